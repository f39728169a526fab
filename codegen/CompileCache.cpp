//===- CompileCache.cpp - Compiled models on disk, reused -----------------===//
#include "codegen/CompileCache.h"

#include "codegen/cpu/CpuJit.h"
#include "generated/SourceHash.h"
#include "ir/Printer.h"
#include "runtime/dnnl/DnnlSteps.h"

#include <omp.h>

#include <sys/stat.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>

namespace kiln::codegen {
namespace fs = std::filesystem;
namespace {

/// Two independent 64-bit FNV-1a streams (different offsets, one byte
/// rotated into the second): 128 bits of key, no crypto needed.
class KeyHasher {
public:
  void bytes(const void *data, size_t n) {
    auto *p = static_cast<const uint8_t *>(data);
    for (size_t i = 0; i < n; ++i) {
      a_ = (a_ ^ p[i]) * 0x100000001b3ull;
      b_ = (b_ ^ static_cast<uint8_t>(p[i] + 0x5b)) * 0x100000001b3ull;
    }
  }
  /// Word-wise for bulk data (constants).
  void words(const void *data, size_t n) {
    auto *p = static_cast<const uint8_t *>(data);
    for (; n >= 8; n -= 8, p += 8) {
      uint64_t w;
      std::memcpy(&w, p, 8);
      a_ = (a_ ^ w) * 0x100000001b3ull;
      b_ = (b_ ^ (w + 0x9e3779b97f4a7c15ull)) * 0x100000001b3ull;
    }
    bytes(p, n);
  }
  void str(const std::string &s) {
    const uint64_t n = s.size();
    bytes(&n, sizeof(n));
    bytes(s.data(), s.size());
  }
  std::string hex() const {
    char buf[33];
    std::snprintf(buf, sizeof(buf), "%016llx%016llx", static_cast<unsigned long long>(a_),
                  static_cast<unsigned long long>(b_));
    return buf;
  }

private:
  uint64_t a_ = 0xcbf29ce484222325ull, b_ = 0x84222325cbf29ce4ull;
};

bool isEntry(const fs::directory_entry &e) {
  return e.is_regular_file() && e.path().extension() == ".kiln";
}

/// A temporary file a writer left behind (it died before renaming it).
bool isLeftover(const fs::directory_entry &e) {
  return e.is_regular_file() &&
         e.path().filename().string().find(".kiln.tmp.") != std::string::npos;
}

} // namespace

std::string cacheDirectory() {
  const char *off = std::getenv("KILN_CACHE");
  if (off && (std::strcmp(off, "off") == 0 || std::strcmp(off, "0") == 0))
    return "";
  if (const char *d = std::getenv("KILN_CACHE_DIR"); d && *d)
    return d;
  if (const char *x = std::getenv("XDG_CACHE_HOME"); x && *x)
    return std::string(x) + "/kiln";
  if (const char *h = std::getenv("HOME"); h && *h)
    return std::string(h) + "/.cache/kiln";
  return "";
}

uint64_t cacheLimit(std::string *error) {
  constexpr uint64_t kDefault = uint64_t(1) << 30;
  const char *v = std::getenv("KILN_CACHE_MAX");
  if (!v || !*v)
    return kDefault;
  char *end = nullptr;
  const unsigned long long n = std::strtoull(v, &end, 10);
  uint64_t mult = 1;
  if (*end == 'K' || *end == 'k')
    mult = uint64_t(1) << 10, ++end;
  else if (*end == 'M' || *end == 'm')
    mult = uint64_t(1) << 20, ++end;
  else if (*end == 'G' || *end == 'g')
    mult = uint64_t(1) << 30, ++end;
  if (end == v || *end) {
    if (error)
      *error = std::string("KILN_CACHE_MAX='") + v + "' is not a size (bytes, or with K, M, G)";
    return kDefault;
  }
  return static_cast<uint64_t>(n) * mult;
}

CacheStats cacheStats(const std::string &dir) {
  CacheStats s;
  std::error_code ec;
  for (const auto &e : fs::directory_iterator(dir, ec))
    if (isEntry(e)) {
      ++s.entries;
      s.bytes += e.file_size(ec);
    }
  return s;
}

size_t clearCache(const std::string &dir) {
  size_t n = 0;
  std::error_code ec;
  for (const auto &e : fs::directory_iterator(dir, ec)) {
    if (isEntry(e) && fs::remove(e.path(), ec))
      ++n;
    else if (isLeftover(e))
      fs::remove(e.path(), ec);
  }
  return n;
}

size_t evictCache(const std::string &dir, uint64_t limit) {
  struct Entry {
    fs::path path;
    fs::file_time_type used;
    uint64_t bytes;
  };
  std::vector<Entry> entries;
  uint64_t total = 0;
  std::error_code ec;
  for (const auto &e : fs::directory_iterator(dir, ec))
    if (isEntry(e)) {
      entries.push_back({e.path(), e.last_write_time(ec), e.file_size(ec)});
      total += entries.back().bytes;
    }
  std::sort(entries.begin(), entries.end(),
            [](const Entry &a, const Entry &b) { return a.used < b.used; });
  size_t n = 0;
  for (const Entry &e : entries) {
    if (total <= limit)
      break;
    if (fs::remove(e.path, ec)) {
      total -= e.bytes;
      ++n;
    }
  }
  return n;
}

std::string cacheKey(const Graph &g, const CompileOptions &o, const std::string &cpu,
                     const std::string &features) {
  KeyHasher h;
  h.str(runtime::kilnVersion());
  h.str(KILN_SOURCE_HASH);
  h.str(cpu::llvmVersion());
  h.str(runtime::onednn::version());
  PrintOptions po;
  po.elideBlobs = true;
  h.str(printGraph(g, po));
  // Every constant's bytes, those inside regions too (their blobs print
  // elided like the graph's own).
  std::function<void(const Graph &)> hashConstants = [&](const Graph &graph) {
    for (const Node *n : graph.nodes()) {
      if (n->kind() == OpKind::Constant) {
        const Tensor &t = std::get<Tensor>(n->attr(ConstantOp::value_index));
        h.str(std::string(dtypeName(t.dtype())));
        for (int64_t d : t.shape())
          h.bytes(&d, sizeof(d));
        h.words(t.rawData(), t.byteSize());
      }
      for (const Attribute &a : n->attrs())
        if (const auto *region = std::get_if<GraphAttr>(&a); region && *region)
          hashConstants(**region);
    }
  };
  hashConstants(g);
  h.str(cpu);
  h.str(features);
  // Dims and the pipeline are in the graph (it is the prepared one). The
  // thread count oneDNN primitives are created for is part of them.
  const int threads = o.threads > 0 ? o.threads : omp_get_max_threads();
  h.bytes(&threads, sizeof(threads));
  // A model compiled with kernels with run-time sizes runs other code.
  const uint8_t flags[] = {o.useLibraries,
                           o.useKernels,
                           o.fuse,
                           o.shareKernels,
                           static_cast<uint8_t>(o.dnnlLayout),
                           static_cast<uint8_t>(o.recurrent),
                           static_cast<uint8_t>(o.runTimeSizes || o.sharedKernels)};
  h.bytes(flags, sizeof(flags));
  // The ranges decide which kernels merge (RunTimeSizes.h), in any order.
  std::vector<SymbolRange> ranges = o.ranges;
  std::sort(ranges.begin(), ranges.end(),
            [](const SymbolRange &a, const SymbolRange &b) { return a.name < b.name; });
  for (const SymbolRange &r : ranges) {
    h.str(r.name);
    h.bytes(&r.min, sizeof(r.min));
    h.bytes(&r.max, sizeof(r.max));
  }
  h.bytes(&o.optLevel, sizeof(o.optLevel));
  return h.hex();
}

bool cacheApplies(const CompileOptions &o) {
  return o.cache && !o.explain && !o.emitKernels && !o.emitLLVM && !o.emitLLVMOptimized &&
         o.dumpDir.empty() && o.debugFaultKernel.empty() && o.useKernels;
}

} // namespace kiln::codegen
