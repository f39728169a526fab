//===- Artifact.cpp - Compiled models saved to and loaded from disk -------===//
#include "runtime/artifact/Artifact.h"

#include "runtime/CopyStep.h"
#include "runtime/IndexCheckStep.h"
#include "runtime/artifact/Artifact.pb.h"
#include "runtime/artifact/ElfLoader.h"
#include "runtime/artifact/FileFormat.h"
#include "runtime/dnnl/DnnlSteps.h"
#include "runtime/reference/ReferenceStep.h"
#include "runtime/reference/RegionStep.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <deque>
#include <functional>
#include <optional>

namespace kiln::runtime {
namespace {

using namespace framing;

constexpr const char (&kMagic)[8] = kArtifactMagic;
constexpr char kSetMagic[8] = {'K', 'I', 'L', 'N', 'S', 'E', 'T', '\0'};
constexpr uint32_t kSetFormatVersion = 1;
/// Bumped by any change of the layout or of Artifact.proto that is not a
/// pure addition.
// 2: kernel steps with run-time sizes; 3: kernel entries sharing code
// (code_of), compiled regions as nested artifacts.
constexpr uint32_t kFormatVersion = 3;
/// The header of a size set; the table (SizeSet in Artifact.proto) follows
/// the last member.
struct SetHeader {
  char magic[8];
  uint32_t format;
  uint32_t count;
  uint64_t tableOffset, tableBytes;
  uint64_t checksum; ///< Hasher over this header (this field read as 0) and the table
  uint64_t reserved[3];
};
static_assert(sizeof(SetHeader) == kHeaderBytes);

bool isSetMagic(const void *base, size_t size) {
  return size >= 8 && std::memcmp(base, kSetMagic, 8) == 0;
}

std::optional<DType> dtypeNamed(const std::string &name) {
#define DTYPE(Enum, Name, Bytes, Bits, IsFloat, IsSigned, Compute, Codec)                          \
  if (name == Name)                                                                                \
    return DType::Enum;
#include "ir/DTypes.def"
  return std::nullopt;
}

void putPort(const ArtifactPort &p, artifact::Port *out) {
  out->set_name(p.name);
  out->set_dtype(elementTypeName(p.dtype));
  for (size_t i = 0; i < p.dims.size(); ++i) {
    out->add_dims(p.dims[i]);
    out->add_symbols(i < p.symbols.size() ? p.symbols[i] : "");
  }
}

bool getPort(const artifact::Port &in, ArtifactPort &p) {
  auto dt = dtypeNamed(in.dtype());
  if (!dt || in.symbols_size() != in.dims_size())
    return false;
  p.name = in.name();
  p.dtype = *dt;
  p.dims.assign(in.dims().begin(), in.dims().end());
  p.symbols.assign(in.symbols().begin(), in.symbols().end());
  return true;
}

} // namespace

bool isSymbolicArtifactFile(const std::string &path) {
  return hasMagic(path, kSymbolicMagic);
}

bool isCudaArtifactFile(const std::string &path) {
  return hasMagic(path, kCudaMagic);
}

bool isArtifactFile(const std::string &path) {
  return hasMagic(path, kMagic) || hasMagic(path, kSetMagic);
}

namespace {

Status writeArtifact(int fd, const Executable &exe, const ArtifactInfo &info, uint64_t &written);

// Note [Nested artifacts]
// ~~~~~~~~~~~~~~~~~~~~~~~
// A compiled if or loop (runtime/reference/RegionStep.h) runs regions that
// are Executables of their own. Saved, the step is its Spec as the payload
// and each region as a whole artifact, a page-aligned blob of the step: the
// loader loads each from the same mapping, with every check a file gets,
// then rebuilds the step and checks that the regions fit its buffers. So
// a model with compiled regions is stored in the compile cache and loaded
// from an artifact with its regions compiled, not interpreted.

/// `exe` (a region of a compiled if or loop) as artifact bytes.
Status nestedArtifact(const Executable &exe, std::string &bytes) {
  ArtifactInfo info;
  info.model = "region";
  int fd = ::memfd_create("kiln-region", MFD_CLOEXEC);
  if (fd < 0)
    return Status::failure(std::string("cannot save a compiled region: ") + std::strerror(errno));
  uint64_t written = 0;
  Status st = writeArtifact(fd, exe, info, written);
  bytes.resize(written);
  for (uint64_t at = 0; st.ok() && at < written;) {
    const ssize_t n = ::pread(fd, bytes.data() + at, written - at, static_cast<off_t>(at));
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      st = Status::failure(std::string("cannot save a compiled region: ") +
                           (n < 0 ? std::strerror(errno) : "the file ended early"));
    else
      at += static_cast<uint64_t>(n);
  }
  ::close(fd);
  return st;
}

/// Writes the artifact of `exe` at `fd`'s position; `written` gets its size.
Status writeArtifact(int fd, const Executable &exe, const ArtifactInfo &info, uint64_t &written) {
  if (!exe.finalized())
    return Status::failure("the executable is not finalized");
  artifact::Artifact meta;
  DataPart data;
  meta.set_kiln_version(kilnVersion());
  meta.set_dnnl_version(onednn::version());
  meta.set_model(info.model);
  const TargetInfo &t = exe.target();
  meta.set_cpu_requested(t.requested);
  meta.set_cpu(t.cpu);
  meta.set_cpu_features(t.features);
  meta.set_dnnl_isa(t.dnnlIsa);
  meta.set_default_threads(exe.defaultThreads());
  meta.set_summary(info.summary);
  {
    artifact::Report *r = meta.mutable_report();
    r->set_kernels(info.report.kernels);
    r->set_library_calls(info.report.libraryCalls);
    r->set_fallbacks(info.report.fallbacks);
    r->set_target(info.report.target);
    for (const std::string &l : info.report.libraryLines)
      r->add_library_lines(l);
    for (const std::string &l : info.report.fallbackLines)
      r->add_fallback_lines(l);
    r->set_lower_bound_bytes(info.report.lowerBound);
    r->set_naive_bytes(info.report.naiveBytes);
    r->set_in_place(info.report.inPlace);
    r->set_peak_step(info.report.peakStep);
  }
  for (const ArtifactPort &p : info.inputs)
    putPort(p, meta.add_inputs());
  for (const ArtifactPort &p : info.outputs)
    putPort(p, meta.add_outputs());

  for (const BufferDesc &b : exe.buffers()) {
    artifact::Buffer *out = meta.add_buffers();
    out->set_kind(b.kind == BufferDesc::Kind::Input      ? artifact::Buffer::INPUT
                  : b.kind == BufferDesc::Kind::Constant ? artifact::Buffer::CONSTANT
                                                         : artifact::Buffer::TEMP);
    out->set_dtype(elementTypeName(b.dtype));
    for (int64_t d : b.shape)
      out->add_shape(d);
    out->set_name(b.name);
    if (b.kind == BufferDesc::Kind::Constant)
      data.add(b.constant.data, b.constant.byteSize(), out->mutable_constant());
    if (b.placement == BufferDesc::Placement::Arena)
      out->set_arena_offset(b.offset);
  }
  // Kernels: an entry per distinct function and sizes, in first-use
  // order; the object once per function.
  std::vector<std::pair<KernelFn, int>> kernelIndex;
  std::vector<SavedStep> saved; // kept alive until the data is written
  saved.reserve(exe.steps().size());
  std::deque<std::string> nested; // Note [Nested artifacts]
  for (const Step &s : exe.steps()) {
    artifact::Step *out = meta.add_steps();
    out->set_name(s.name);
    for (int32_t id : s.buffers)
      out->add_buffers(id);
    out->set_num_reads(s.numReads);
    for (const auto &[w, r] : s.inPlace) {
      out->add_in_place(w);
      out->add_in_place(r);
    }
    if (s.kind == Step::Kind::Kernel) {
      out->set_kind(artifact::Step::KERNEL);
      if (!s.object)
        return Status::failure("kernel step '" + s.name +
                               "' has no machine code to save (it was not compiled by the CPU "
                               "code generator)");
      auto it = std::find_if(kernelIndex.begin(), kernelIndex.end(), [&](const auto &e) {
        const artifact::Kernel &k = meta.kernels(e.second);
        return e.first == s.fn &&
               std::equal(k.sizes().begin(), k.sizes().end(), s.sizes.begin(), s.sizes.end());
      });
      int index;
      if (it != kernelIndex.end()) {
        index = it->second;
      } else {
        index = meta.kernels_size();
        auto code = std::find_if(kernelIndex.begin(), kernelIndex.end(),
                                 [&](const auto &e) { return e.first == s.fn; });
        const int codeOf = code == kernelIndex.end() ? 0 : code->second + 1;
        kernelIndex.emplace_back(s.fn, index);
        artifact::Kernel *k = meta.add_kernels();
        k->set_symbol(s.object->symbol);
        for (int32_t id : s.buffers)
          k->add_buffer_bytes(exe.buffers()[static_cast<size_t>(id)].byteSize());
        k->set_num_reads(s.numReads);
        k->set_num_outer(s.numOuter);
        for (int64_t v : s.sizes)
          k->add_sizes(v);
        if (codeOf != 0)
          k->set_code_of(codeOf);
        else
          data.add(s.object->elf.data(), s.object->elf.size(), k->mutable_object());
      }
      out->set_kernel(index);
      out->set_num_outer(s.numOuter);
      out->set_parallel(s.parallel);
      out->set_grain(s.grain);
      for (int64_t v : s.sizes)
        out->add_sizes(v);
      continue;
    }
    out->set_kind(artifact::Step::EXTERN);
    SavedStep &st = saved.emplace_back();
    std::string why;
    if (!s.externStep->save(st, why))
      return Status::failure("cannot save the model as an artifact: " + why);
    out->set_extern_kind(st.kind);
    out->set_payload(st.payload);
    for (std::span<const uint8_t> blob : st.blobs)
      data.add(blob.data(), blob.size(), out->add_blobs());
    if (const auto *region = dynamic_cast<const RegionStep *>(s.externStep.get()))
      for (const auto &r : region->regions()) {
        if (Status st = nestedArtifact(*r, nested.emplace_back()); !st.ok())
          return st;
        data.add(nested.back().data(), nested.back().size(), out->add_blobs(), kPage);
      }
  }
  for (int32_t id : exe.outputs())
    meta.add_outputs_buffers(id);
  meta.set_arena_bytes(exe.arenaBytes());

  std::string metaBytes;
  if (!meta.SerializeToString(&metaBytes))
    return Status::failure("cannot serialize the artifact's metadata");
  return writeFramed(fd, kMagic, kFormatVersion, metaBytes, data, written);
}

} // namespace

Status saveArtifact(const Executable &exe, const ArtifactInfo &info, const std::string &path) {
  return writeFileAtomically(path, [&](int fd) {
    uint64_t written = 0;
    return writeArtifact(fd, exe, info, written);
  });
}

namespace {

/// How deep artifacts nest, and how many nested ones a load takes in all
/// (Note [Nested artifacts]): a crafted file cannot make a load recurse
/// without end or load one region a thousand times over.
struct Nesting {
  int depth = 0;
  int loadsLeft = 4096;
};
constexpr int kMaxNesting = 8;

/// Loads the artifact in bytes [offset, offset + size) of `map` (offset a
/// multiple of the page size); `label` names it in errors.
Status loadMapped(const std::shared_ptr<Mapping> &map, size_t offset, size_t size,
                  const std::string &label, std::unique_ptr<Executable> &exeOut,
                  ArtifactInfo *infoOut, Nesting *nesting = nullptr) {
  Nesting top;
  if (!nesting)
    nesting = &top;
  auto fail = [&](const std::string &what) { return Status::failure(label + ": " + what); };
  const auto *bytes = static_cast<const uint8_t *>(map->base) + offset;
  if (size >= 8 && std::memcmp(bytes, kSymbolicMagic, 8) == 0)
    return fail("a symbolic artifact (compiled over ranges of sizes), which compiles each size "
                "it meets and so needs the compiler: run it with kiln run or load it with "
                "kiln::Model::load; the runtime alone runs a size set (kiln compile --dim "
                "SYM=A,B,... -o)");
  Header h;
  if (Status st = checkFramed(bytes, size, kMagic, kFormatVersion, "Kiln artifact", h); !st.ok())
    return fail(st.error);
  artifact::Artifact meta;
  if (!meta.ParseFromArray(bytes + h.metaOffset, static_cast<int>(h.metaBytes)))
    return fail("corrupt metadata");
  if (Status st = checkCompiledFor(meta.kiln_version(), meta.cpu_requested(), meta.cpu(),
                                   meta.cpu_features());
      !st.ok())
    return fail(st.error);
  const uint8_t *dataBase = bytes + h.dataOffset;
  auto blobSpan = [&](const artifact::Blob &b) { return blobIn(dataBase, h.dataBytes, b); };

  // Code.
  std::vector<std::string_view> objects;
  std::vector<size_t> objectOf; // per kernel entry
  uint64_t codeBytes = 0;
  for (const artifact::Kernel &k : meta.kernels()) {
    if (k.code_of() != 0) {
      const int64_t first = int64_t(k.code_of()) - 1;
      if (first < 0 || first >= static_cast<int64_t>(objectOf.size()) ||
          meta.kernels(first).code_of() != 0 || meta.kernels(first).symbol() != k.symbol())
        return fail("kernel '" + k.symbol() + "' names the code of an entry that has none");
      objectOf.push_back(objectOf[static_cast<size_t>(first)]);
      continue;
    }
    objectOf.push_back(objects.size());
    auto s = blobSpan(k.object());
    if (!s)
      return fail("kernel '" + k.symbol() + "' lies outside the file");
    objects.emplace_back(reinterpret_cast<const char *>(s->data()), s->size());
    codeBytes += s->size();
  }
  std::string why;
  std::shared_ptr<LoadedCode> code = LoadedCode::link(objects, why);
  if (!code)
    return fail(why);
  std::vector<KernelFn> fns;
  // The objects stay with the steps, so that a loaded model can be saved
  // again (a compile-cache hit written with -o).
  std::vector<std::shared_ptr<const KernelObject>> kernelObjects;
  for (int i = 0; i < meta.kernels_size(); ++i) {
    const size_t object = objectOf[static_cast<size_t>(i)];
    if (meta.kernels(i).code_of() != 0) {
      fns.push_back(fns[static_cast<size_t>(meta.kernels(i).code_of() - 1)]);
      kernelObjects.push_back(kernelObjects[static_cast<size_t>(meta.kernels(i).code_of() - 1)]);
      continue;
    }
    void *fn = code->symbol(object, meta.kernels(i).symbol());
    if (!fn)
      return fail("kernel object " + std::to_string(object) + " does not define '" +
                  meta.kernels(i).symbol() + "'");
    fns.push_back(reinterpret_cast<KernelFn>(fn));
    kernelObjects.push_back(std::make_shared<const KernelObject>(
        KernelObject{meta.kernels(i).symbol(), std::string(objects[object])}));
  }

  auto exe = std::make_unique<Executable>();
  exe->keepAlive(map);
  exe->keepAlive(code);
  uint64_t constantBytes = 0;
  std::vector<uint64_t> offsets;
  for (int i = 0; i < meta.buffers_size(); ++i) {
    const artifact::Buffer &b = meta.buffers(i);
    auto dt = dtypeNamed(b.dtype());
    std::vector<int64_t> shape(b.shape().begin(), b.shape().end());
    const std::optional<int64_t> stored = elementsOfStored(shape);
    if (!dt || !stored)
      return fail("buffer " + std::to_string(i) + " ('" + b.name() + "') has a corrupt type");
    offsets.push_back(b.arena_offset());
    switch (b.kind()) {
    case artifact::Buffer::INPUT:
      exe->addInput(*dt, std::move(shape), b.name());
      break;
    case artifact::Buffer::CONSTANT: {
      HostTensor t;
      t.dtype = *dt;
      t.shape = std::move(shape);
      auto s = blobSpan(b.constant());
      if (!s || s->size() != t.byteSize())
        return fail("constant '" + b.name() + "' lies outside the file or has the wrong size");
      t.data = const_cast<uint8_t *>(s->data());
      t.storage = std::shared_ptr<void>(map, t.data); // shares the mapping
      constantBytes += s->size();
      exe->addConstant(std::move(t), b.name());
      break;
    }
    default:
      exe->addTemp(*dt, std::move(shape), b.name());
      break;
    }
  }
  const auto numBuffers = static_cast<int32_t>(meta.buffers_size());
  auto validIds = [&](const auto &ids) {
    for (int32_t id : ids)
      if (id < 0 || id >= numBuffers)
        return false;
    return true;
  };
  bool usesDnnl = false;
  for (const artifact::Step &s : meta.steps())
    usesDnnl |= s.kind() == artifact::Step::EXTERN && s.extern_kind().rfind("onednn.", 0) == 0;
  if (usesDnnl) {
    if (meta.dnnl_version() != onednn::version())
      return fail("written with " + meta.dnnl_version() + "; this process has " +
                  onednn::version() + ": compile the model again");
    if (Status st = onednn::capIsa(meta.dnnl_isa().empty() ? "all" : meta.dnnl_isa(), label);
        !st.ok())
      return fail(st.error);
  }
  for (int i = 0; i < meta.steps_size(); ++i) {
    const artifact::Step &s = meta.steps(i);
    std::vector<int32_t> ids(s.buffers().begin(), s.buffers().end());
    if (!validIds(ids) || !validIds(s.in_place()) || s.in_place_size() % 2 != 0 ||
        s.num_reads() < 0 || s.num_reads() > static_cast<int32_t>(ids.size()))
      return fail("step " + std::to_string(i) + " ('" + s.name() +
                  "') names buffers that do not exist");
    if (s.kind() == artifact::Step::KERNEL) {
      if (s.kernel() < 0 || s.kernel() >= static_cast<int32_t>(fns.size()) || s.num_outer() < 0)
        return fail("step " + std::to_string(i) + " ('" + s.name() + "') is corrupt");
      // The kernel's code has its shapes built in: the step must match them.
      const artifact::Kernel &k = meta.kernels(s.kernel());
      bool matches =
          k.buffer_bytes_size() == static_cast<int>(ids.size()) && k.num_reads() == s.num_reads() &&
          k.num_outer() == s.num_outer() &&
          std::equal(k.sizes().begin(), k.sizes().end(), s.sizes().begin(), s.sizes().end());
      for (size_t b = 0; matches && b < ids.size(); ++b)
        matches = exe->buffers()[static_cast<size_t>(ids[b])].byteSize() ==
                  k.buffer_bytes(static_cast<int>(b));
      if (!matches)
        return fail("step " + std::to_string(i) + " ('" + s.name() +
                    "') does not match the buffers its kernel was compiled for");
      std::vector<std::pair<int32_t, int32_t>> inPlace;
      for (int k = 0; k + 1 < s.in_place_size(); k += 2)
        inPlace.emplace_back(s.in_place(k), s.in_place(k + 1));
      exe->addKernelStep(s.name(), fns[static_cast<size_t>(s.kernel())], std::move(ids),
                         s.num_reads(), s.num_outer(), s.parallel(), s.grain(), std::move(inPlace),
                         kernelObjects[static_cast<size_t>(s.kernel())]);
      if (s.sizes_size() > 0)
        exe->setKernelSizes(exe->steps().size() - 1, {s.sizes().begin(), s.sizes().end()});
      continue;
    }
    std::vector<std::span<const uint8_t>> blobs;
    for (const artifact::Blob &b : s.blobs()) {
      auto sp = blobSpan(b);
      if (!sp)
        return fail("step '" + s.name() + "' has data outside the file");
      blobs.push_back(*sp);
      if (s.extern_kind() != RegionStep::kKind) // nested artifacts: their constants below
        constantBytes += sp->size();
    }
    std::vector<size_t> bufferBytes;
    for (int32_t id : ids)
      bufferBytes.push_back(exe->buffers()[static_cast<size_t>(id)].byteSize());
    std::vector<std::shared_ptr<const Executable>> regions;
    if (s.extern_kind() == RegionStep::kKind) { // Note [Nested artifacts]
      std::optional<RegionStep::Spec> spec = RegionStep::Spec::parse(s.payload(), why);
      if (!spec)
        return fail("step " + std::to_string(i) + " ('" + s.name() + "'): " + why);
      if (blobs.size() != (spec->isLoop ? 1u : 2u) || nesting->depth >= kMaxNesting)
        return fail("step " + std::to_string(i) + " ('" + s.name() + "') has " +
                    std::to_string(blobs.size()) + " regions nested " +
                    std::to_string(nesting->depth + 1) + " deep");
      for (size_t r = 0; r < blobs.size(); ++r) {
        const size_t at =
            static_cast<size_t>(blobs[r].data() - static_cast<const uint8_t *>(map->base));
        if (at % kPage != 0 || --nesting->loadsLeft < 0)
          return fail("step " + std::to_string(i) + " ('" + s.name() + "') region " +
                      std::to_string(r) + " is not a nested artifact it may load");
        std::unique_ptr<Executable> region;
        ++nesting->depth;
        Status st = loadMapped(map, at, blobs[r].size(),
                               label + ": step '" + s.name() + "' region " + std::to_string(r),
                               region, nullptr, nesting);
        --nesting->depth;
        if (!st.ok())
          return st;
        regions.push_back(std::move(region));
      }
    }
    std::shared_ptr<const ExternStep> step =
        s.extern_kind() == RegionStep::kKind
            ? RegionStep::load(s.payload(), std::move(regions), bufferBytes, why)
        : s.extern_kind() == CopyStep::kKind ? CopyStep::load(s.payload(), bufferBytes, why)
        : s.extern_kind() == IndexCheckStep::kKind && bufferBytes.size() == 1
            ? IndexCheckStep::load(s.payload(), bufferBytes[0], why)
        : s.extern_kind() == ReferenceStep::kKind
            ? ReferenceStep::load(s.payload(), bufferBytes, why)
            : onednn::loadStep(s.extern_kind(), s.payload(), blobs, bufferBytes, map, why);
    if (!step)
      return fail("step " + std::to_string(i) + " ('" + s.name() + "'): " + why);
    if (s.extern_kind() == RegionStep::kKind)
      constantBytes += step->constantBytes();
    exe->addExternStep(std::move(step), std::move(ids), s.num_reads());
  }
  std::vector<int32_t> outputs(meta.outputs_buffers().begin(), meta.outputs_buffers().end());
  if (!validIds(outputs))
    return fail("an output names a buffer that does not exist");
  exe->setOutputs(std::move(outputs));
  exe->setDefaultThreads(std::max(0, meta.default_threads()));
  exe->setTarget({meta.cpu_requested(), meta.cpu(), meta.cpu_features(), meta.dnnl_isa()});
  if (Status st = exe->finalize(meta.arena_bytes(), offsets); !st.ok())
    return fail("its memory plan is wrong: " + st.error);

  if (infoOut) {
    ArtifactInfo &info = *infoOut;
    info = ArtifactInfo{};
    info.kilnVersion = meta.kiln_version();
    info.dnnlVersion = meta.dnnl_version();
    info.model = meta.model();
    info.target = exe->target();
    info.summary = meta.summary();
    const artifact::Report &r = meta.report();
    info.report.kernels = r.kernels();
    info.report.libraryCalls = r.library_calls();
    info.report.fallbacks = r.fallbacks();
    info.report.target = r.target();
    info.report.libraryLines.assign(r.library_lines().begin(), r.library_lines().end());
    info.report.fallbackLines.assign(r.fallback_lines().begin(), r.fallback_lines().end());
    info.report.lowerBound = r.lower_bound_bytes();
    info.report.naiveBytes = r.naive_bytes();
    info.report.inPlace = r.in_place();
    info.report.peakStep = r.peak_step();
    for (const artifact::Port &p : meta.inputs())
      if (!getPort(p, info.inputs.emplace_back()))
        return fail("corrupt input signature");
    for (const artifact::Port &p : meta.outputs())
      if (!getPort(p, info.outputs.emplace_back()))
        return fail("corrupt output signature");
    info.fileBytes = size;
    info.constantBytes = constantBytes;
    info.codeBytes = codeBytes;
    info.numKernels = objects.size();
    info.numSteps = exe->steps().size();
  }
  exeOut = std::move(exe);
  return Status::success();
}

} // namespace

Status loadArtifact(const std::string &path, std::unique_ptr<Executable> &exeOut,
                    ArtifactInfo *infoOut) {
  const std::string label = "artifact '" + path + "'";
  auto fail = [&](const std::string &what) { return Status::failure(label + ": " + what); };
  std::shared_ptr<Mapping> map;
  if (Status st = mapFile(path, map, fail); !st.ok())
    return st;
  if (isSetMagic(map->base, map->size))
    return fail("holds several sizes (kiln compile --dim N=A,B,...); load it with "
                "loadArtifactSet");
  return loadMapped(map, 0, map->size, label, exeOut, infoOut);
}

// Note [Size sets]
// ~~~~~~~~~~~~~~~~
// Compiled code has static shapes, so a model with symbolic dims is compiled
// once per set of sizes (Note [Compiling per size] in api/Kiln.cpp). A size
// set keeps several such compiles in one file for a machine without the
// compiler: a 64-byte SetHeader, each member a whole artifact (its own
// header, metadata, data and checksum) at a page-aligned offset, then the
// table naming each member's offset, size and sizes. The header's checksum
// covers itself and the table; every member is checked as a lone artifact
// is. Loading maps the file once and loads every member, so a damaged
// member is an error before anything runs; a run picks the member whose
// inputs have exactly the shapes given (findSetMember).

Status saveArtifactSet(std::span<const ArtifactSetEntry> members, const std::string &path) {
  if (members.empty())
    return Status::failure("cannot write '" + path + "': a size set needs at least one size");
  for (size_t i = 0; i < members.size(); ++i)
    for (size_t j = 0; j < i; ++j)
      if (members[i].exe->takesShapes(members[j].exe->inputShapes()))
        return Status::failure("cannot write '" + path + "': sizes " + members[j].sizes + " and " +
                               members[i].sizes +
                               " give the inputs the same shapes, so a run could not tell them "
                               "apart (a symbol no input dim has?)");
  return writeFileAtomically(path, [&](int fd) -> Status {
    static const char zeros[kPage] = {};
    SetHeader h{};
    if (Status st = writeAll(fd, &h, sizeof(h)); !st.ok())
      return st;
    uint64_t at = sizeof(h);
    artifact::SizeSet table;
    for (const ArtifactSetEntry &m : members) {
      const uint64_t start = alignUp(at, kPage);
      if (Status st = writeAll(fd, zeros, start - at); !st.ok())
        return st;
      uint64_t written = 0;
      if (Status st = writeArtifact(fd, *m.exe, *m.info, written); !st.ok())
        return Status::failure("size " + m.sizes + ": " + st.error);
      artifact::SizeSet::Member *row = table.add_members();
      row->set_offset(start);
      row->set_bytes(written);
      row->set_sizes(m.sizes);
      at = start + written;
    }
    std::string tableBytes;
    if (!table.SerializeToString(&tableBytes))
      return Status::failure("cannot serialize the size set's table");
    if (Status st = writeAll(fd, tableBytes.data(), tableBytes.size()); !st.ok())
      return st;
    std::memcpy(h.magic, kSetMagic, 8);
    h.format = kSetFormatVersion;
    h.count = static_cast<uint32_t>(members.size());
    h.tableOffset = at;
    h.tableBytes = tableBytes.size();
    Hasher hasher;
    hasher.update(&h, sizeof(h));
    hasher.update(tableBytes.data(), tableBytes.size());
    h.checksum = hasher.finish();
    if (::pwrite(fd, &h, sizeof(h), 0) != static_cast<ssize_t>(sizeof(h)))
      return Status::failure(std::strerror(errno));
    return Status::success();
  });
}

Status loadArtifactSet(const std::string &path, std::vector<ArtifactSetMember> &out) {
  out.clear();
  const std::string label = "artifact '" + path + "'";
  auto fail = [&](const std::string &what) { return Status::failure(label + ": " + what); };
  std::shared_ptr<Mapping> map;
  if (Status st = mapFile(path, map, fail); !st.ok())
    return st;
  if (!isSetMagic(map->base, map->size)) {
    ArtifactSetMember one;
    if (Status st = loadMapped(map, 0, map->size, label, one.exe, &one.info); !st.ok())
      return st;
    out.push_back(std::move(one));
    return Status::success();
  }
  SetHeader h;
  std::memcpy(&h, map->base, sizeof(h));
  if (h.format != kSetFormatVersion)
    return fail("size set format version " + std::to_string(h.format) + "; this Kiln (" +
                kilnVersion() + ") reads version " + std::to_string(kSetFormatVersion) +
                ": compile the model again");
  if (h.tableOffset < sizeof(h) || h.tableOffset > map->size ||
      h.tableBytes != map->size - h.tableOffset || h.tableBytes > (uint64_t(1) << 30))
    return fail("truncated or corrupt: the size set's header does not match the file's " +
                std::to_string(map->size) + " bytes");
  const auto *bytes = static_cast<const uint8_t *>(map->base);
  SetHeader unsummed = h;
  unsummed.checksum = 0;
  Hasher hasher;
  hasher.update(&unsummed, sizeof(unsummed));
  hasher.update(bytes + h.tableOffset, h.tableBytes);
  if (hasher.finish() != h.checksum)
    return fail("corrupt: the size set's checksum does not match its table");
  artifact::SizeSet table;
  if (!table.ParseFromArray(bytes + h.tableOffset, static_cast<int>(h.tableBytes)) ||
      table.members_size() != static_cast<int>(h.count) || h.count == 0)
    return fail("corrupt size set table");
  uint64_t end = sizeof(h); // members lie in order, apart
  for (const artifact::SizeSet::Member &m : table.members()) {
    if (m.offset() % kPage != 0 || m.offset() < end || m.offset() > h.tableOffset ||
        m.bytes() > h.tableOffset - m.offset())
      return fail("the member for " + m.sizes() + " lies outside the file or over another");
    end = m.offset() + m.bytes();
    ArtifactSetMember member;
    member.sizes = m.sizes();
    if (Status st = loadMapped(map, m.offset(), m.bytes(), label + " (" + m.sizes() + ")",
                               member.exe, &member.info);
        !st.ok())
      return st;
    for (const ArtifactSetMember &before : out)
      if (before.exe->takesShapes(member.exe->inputShapes()))
        return fail("sizes " + before.sizes + " and " + member.sizes +
                    " give the inputs the same shapes");
    out.push_back(std::move(member));
  }
  return Status::success();
}

int findSetMember(std::span<const ArtifactSetMember> members,
                  std::span<const std::vector<int64_t>> shapes) {
  for (size_t i = 0; i < members.size(); ++i)
    if (members[i].exe->takesShapes(shapes))
      return static_cast<int>(i);
  return -1;
}

std::string setSizesList(std::span<const ArtifactSetMember> members) {
  std::string out;
  for (const ArtifactSetMember &m : members)
    out += (out.empty() ? "" : "; ") + m.sizes;
  return out;
}

} // namespace kiln::runtime
