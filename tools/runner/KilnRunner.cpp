//===- KilnRunner.cpp - kiln-runner: run an artifact without the compiler -===//
//
//   kiln-runner ARTIFACT.kiln [--input NAME=FILE.npy ...] [--threads N]
//               [--repeat N] [--output-dir DIR]
//
// The deployment runner: links kiln_artifact (the runtime, its oneDNN steps,
// protobuf) and nothing of the compiler, LLVM or the ONNX importer, so an
// artifact plus this program (and libdnnl, libprotobuf, libgomp) run a
// model on a machine with no compiler. Inputs not given are zeros. Prints
// each output's type and leading values and the median time; writes
// DIR/output_K.npy. Exit status: 0 ok, 1 model or data error, 2 usage.
//
// Reads and writes little-endian, C-order .npy files of the artifact's
// dtypes (version 1.0 and 2.0 headers).
//
//===----------------------------------------------------------------------===//
#include "runtime/artifact/Artifact.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

namespace {

using kiln::DType;
using kiln::runtime::HostTensor;

const char kUsage[] =
    "usage: kiln-runner ARTIFACT.kiln [options]\n"
    "  --input NAME=FILE.npy  bind input NAME (default: zeros)\n"
    "  --threads N            threads (default: the artifact's)\n"
    "  --repeat N             run N times, print the median time (default 1)\n"
    "  --output-dir DIR       write output K to DIR/output_K.npy\n"
    "exit status: 0 ok, 1 model or data error, 2 usage\n";

/// numpy's descr for a dtype ("<f4").
const char *npyDescr(DType t) {
  switch (t) {
  case DType::F32: return "<f4";
  case DType::F16: return "<f2";
  case DType::F64: return "<f8";
  case DType::I8: return "|i1";
  case DType::U8: return "|u1";
  case DType::I32: return "<i4";
  case DType::I64: return "<i8";
  case DType::Bool: return "|b1";
  case DType::BF16: return nullptr; // numpy has none
  }
  return nullptr;
}

bool readNpy(const std::string &path, DType want, const std::vector<int64_t> &shape,
             HostTensor &out, std::string &why) {
  std::ifstream f(path, std::ios::binary);
  char magic[8];
  if (!f.read(magic, 8) || std::memcmp(magic, "\x93NUMPY", 6) != 0) {
    why = "not a .npy file";
    return false;
  }
  uint32_t headerLen = 0;
  if (magic[6] == 1) {
    uint16_t n = 0;
    f.read(reinterpret_cast<char *>(&n), 2);
    headerLen = n;
  } else {
    f.read(reinterpret_cast<char *>(&headerLen), 4);
  }
  std::string header(headerLen, '\0');
  if (!f.read(header.data(), headerLen)) {
    why = "a truncated .npy header";
    return false;
  }
  const char *descr = npyDescr(want);
  if (!descr || header.find(std::string("'descr': '") + descr + "'") == std::string::npos) {
    why = std::string("expects dtype ") + kiln::runtime::elementTypeName(want) + " (" +
          (descr ? descr : "none in numpy") + "); the header is " + header;
    return false;
  }
  if (header.find("'fortran_order': False") == std::string::npos) {
    why = "a Fortran-order array (C order expected)";
    return false;
  }
  std::vector<int64_t> got;
  size_t at = header.find("'shape': (");
  if (at == std::string::npos) {
    why = "no shape in the header";
    return false;
  }
  for (const char *p = header.c_str() + at + 10; *p && *p != ')';) {
    char *end = nullptr;
    long long v = std::strtoll(p, &end, 10);
    if (end == p) {
      ++p;
      continue;
    }
    got.push_back(v);
    p = end;
  }
  if (got != shape) {
    why = "shape " + kiln::runtime::typeString(want, got) + ", expected " +
          kiln::runtime::typeString(want, shape);
    return false;
  }
  out = HostTensor::allocate(want, shape);
  if (!f.read(static_cast<char *>(out.data), static_cast<std::streamsize>(out.byteSize()))) {
    why = "fewer elements than its shape says";
    return false;
  }
  return true;
}

bool writeNpy(const std::string &path, const HostTensor &t) {
  const char *descr = npyDescr(t.dtype);
  if (!descr)
    return false;
  std::string shape;
  for (int64_t d : t.shape)
    shape += std::to_string(d) + ",";
  if (t.shape.size() > 1)
    shape.pop_back();
  std::string header = std::string("{'descr': '") + descr + "', 'fortran_order': False, " +
                       "'shape': (" + shape + "), }";
  while ((10 + header.size() + 1) % 64 != 0)
    header += ' ';
  header += '\n';
  std::ofstream f(path, std::ios::binary);
  const uint16_t n = static_cast<uint16_t>(header.size());
  f.write("\x93NUMPY\x01\x00", 8);
  f.write(reinterpret_cast<const char *>(&n), 2);
  f.write(header.data(), static_cast<std::streamsize>(header.size()));
  f.write(static_cast<const char *>(t.data), static_cast<std::streamsize>(t.byteSize()));
  return bool(f);
}

std::string preview(const HostTensor &t) {
  std::string s = "[";
  const int64_t n = std::min<int64_t>(t.numElements(), 8);
  for (int64_t i = 0; i < n; ++i) {
    char buf[64];
    switch (t.dtype) {
    case DType::F32: std::snprintf(buf, sizeof(buf), "%.6g", static_cast<const float *>(t.data)[i]); break;
    case DType::F64: std::snprintf(buf, sizeof(buf), "%.6g", static_cast<const double *>(t.data)[i]); break;
    case DType::I64: std::snprintf(buf, sizeof(buf), "%lld", static_cast<long long>(static_cast<const int64_t *>(t.data)[i])); break;
    case DType::I32: std::snprintf(buf, sizeof(buf), "%d", static_cast<const int32_t *>(t.data)[i]); break;
    default: std::snprintf(buf, sizeof(buf), "?"); break;
    }
    s += (i ? ", " : "") + std::string(buf);
  }
  if (t.numElements() > n)
    s += ", ... (" + std::to_string(t.numElements()) + " values)";
  return s + "]";
}

int usage(const char *message) {
  if (message)
    std::fprintf(stderr, "kiln-runner: error: %s\n", message);
  std::fputs(kUsage, stderr);
  return 2;
}

} // namespace

int main(int argc, char **argv) {
  std::string file, outDir;
  std::map<std::string, std::string> inputFiles;
  int threads = 0, repeat = 1;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&](std::string &v) {
      if (i + 1 >= argc)
        return false;
      v = argv[++i];
      return true;
    };
    std::string v;
    if (a == "--help" || a == "-h") {
      std::fputs(kUsage, stdout);
      return 0;
    } else if (a == "--input") {
      if (!value(v) || v.find('=') == std::string::npos || v.find('=') == 0)
        return usage("--input expects NAME=FILE.npy");
      inputFiles[v.substr(0, v.find('='))] = v.substr(v.find('=') + 1);
    } else if (a == "--threads" || a == "--repeat") {
      if (!value(v))
        return usage("a number must follow --threads and --repeat");
      char *end = nullptr;
      long n = std::strtol(v.c_str(), &end, 10);
      if (*end || n < 1 || n > 1000000)
        return usage("--threads and --repeat expect a positive integer");
      (a == "--threads" ? threads : repeat) = static_cast<int>(n);
    } else if (a == "--output-dir") {
      if (!value(v))
        return usage("--output-dir expects a folder");
      outDir = v;
    } else if (!a.empty() && a[0] == '-') {
      return usage(("unknown option '" + a + "'").c_str());
    } else if (file.empty()) {
      file = a;
    } else {
      return usage("more than one artifact");
    }
  }
  if (file.empty())
    return usage(nullptr);

  std::unique_ptr<kiln::runtime::Executable> exe;
  kiln::runtime::ArtifactInfo info;
  if (kiln::runtime::Status st = kiln::runtime::loadArtifact(file, exe, &info); !st.ok()) {
    std::fprintf(stderr, "kiln-runner: error: %s\n", st.error.c_str());
    return 1;
  }
  std::vector<HostTensor> inputs;
  for (const kiln::runtime::ArtifactPort &p : info.inputs) {
    auto it = inputFiles.find(p.name);
    if (it == inputFiles.end()) {
      inputs.push_back(HostTensor::allocate(p.dtype, p.dims));
      continue;
    }
    HostTensor t;
    std::string why;
    if (!readNpy(it->second, p.dtype, p.dims, t, why)) {
      std::fprintf(stderr, "kiln-runner: error: input '%s' from '%s': %s\n", p.name.c_str(),
                   it->second.c_str(), why.c_str());
      return 1;
    }
    inputs.push_back(std::move(t));
    inputFiles.erase(it);
  }
  for (const auto &[name, path] : inputFiles) {
    std::fprintf(stderr, "kiln-runner: error: the artifact has no input '%s'\n", name.c_str());
    return 1;
  }
  kiln::runtime::RunOptions options;
  options.threads = threads;
  std::vector<HostTensor> outputs;
  std::vector<double> times;
  for (int r = 0; r < repeat; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    if (kiln::runtime::Status st = exe->run(inputs, outputs, options); !st.ok()) {
      std::fprintf(stderr, "kiln-runner: error: %s\n", st.error.c_str());
      return 1;
    }
    times.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(times.begin(), times.end());
  for (size_t k = 0; k < outputs.size(); ++k)
    std::printf("output %zu (%%%s): %s = %s\n", k,
                k < info.outputs.size() ? info.outputs[k].name.c_str() : "?",
                kiln::runtime::typeString(outputs[k].dtype, outputs[k].shape).c_str(),
                preview(outputs[k]).c_str());
  std::printf("time: %.3f ms (median of %d runs, %d threads)\n", times[times.size() / 2], repeat,
              exe->resolveThreads(threads));
  if (!outDir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(outDir, ec);
    for (size_t k = 0; k < outputs.size(); ++k) {
      const std::string p = outDir + "/output_" + std::to_string(k) + ".npy";
      if (!writeNpy(p, outputs[k])) {
        std::fprintf(stderr, "kiln-runner: error: cannot write '%s'\n", p.c_str());
        return 1;
      }
    }
  }
  return 0;
}
