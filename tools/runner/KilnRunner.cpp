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
// .npy files are read and written by ir/Npy.h (kiln_ir: no LLVM either).
//
//===----------------------------------------------------------------------===//
#include "ir/Npy.h"
#include "runtime/artifact/Artifact.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

namespace {

using kiln::DType;
using kiln::runtime::HostTensor;

const char kUsage[] = "usage: kiln-runner ARTIFACT.kiln [options]\n"
                      "  --input NAME=FILE.npy  bind input NAME (default: zeros)\n"
                      "  --threads N            threads (default: the artifact's)\n"
                      "  --repeat N             run N times, print the median time (default 1)\n"
                      "  --output-dir DIR       write output K to DIR/output_K.npy\n"
                      "exit status: 0 ok, 1 model or data error, 2 usage\n";

/// A kiln::Tensor over a runtime tensor's bytes (shared, not copied).
kiln::Tensor tensorOf(const HostTensor &h) {
  return kiln::Tensor::borrow(h.dtype, h.shape, h.storage, h.data);
}

/// A runtime tensor over `t`'s bytes (shared, not copied).
HostTensor hostTensorOf(const kiln::Tensor &t) {
  HostTensor h;
  h.dtype = t.dtype();
  h.shape = t.shape();
  h.data = t.mutableRawData();
  h.storage = std::shared_ptr<void>(std::make_shared<kiln::Tensor>(t), h.data);
  return h;
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

  // A size set runs the size whose inputs have the given files' shapes.
  std::vector<kiln::runtime::ArtifactSetMember> set;
  if (kiln::runtime::Status st = kiln::runtime::loadArtifactSet(file, set); !st.ok()) {
    std::fprintf(stderr, "kiln-runner: error: %s\n", st.error.c_str());
    return 1;
  }
  std::map<std::string, kiln::Tensor> given;
  for (const auto &[name, path] : inputFiles) {
    bool known = false;
    for (const kiln::runtime::ArtifactPort &p : set.front().info.inputs)
      known |= p.name == name;
    if (!known) {
      std::fprintf(stderr, "kiln-runner: error: the artifact has no input '%s'\n", name.c_str());
      return 1;
    }
    kiln::DiagnosticEngine diag;
    kiln::installStderrHandler(diag);
    auto t = kiln::readNpy(path, diag);
    if (kiln::failed(t))
      return 1;
    given.emplace(name, t.take());
  }
  size_t pick = 0;
  for (size_t m = 0; m < set.size(); ++m) {
    bool fits = true;
    for (const kiln::runtime::ArtifactPort &p : set[m].info.inputs)
      if (auto it = given.find(p.name); it != given.end())
        fits &= it->second.shape() == p.dims;
    if (fits) {
      pick = m;
      break;
    }
  }
  std::unique_ptr<kiln::runtime::Executable> exe = std::move(set[pick].exe);
  const kiln::runtime::ArtifactInfo &info = set[pick].info;
  if (set.size() > 1)
    std::printf("size: %s (of %zu in the set)\n", set[pick].sizes.c_str(), set.size());
  std::vector<HostTensor> inputs;
  for (const kiln::runtime::ArtifactPort &p : info.inputs) {
    auto it = given.find(p.name);
    if (it == given.end()) {
      inputs.push_back(HostTensor::allocate(p.dtype, p.dims));
      continue;
    }
    const kiln::Tensor &t = it->second;
    if (t.dtype() != p.dtype || t.shape() != p.dims) {
      std::fprintf(
          stderr, "kiln-runner: error: input '%s' from '%s': shape %s, expected %s%s\n",
          p.name.c_str(), inputFiles[p.name].c_str(), t.type().str().c_str(),
          kiln::runtime::typeString(p.dtype, p.dims).c_str(),
          set.size() > 1
              ? (" (or another size of the set: " + kiln::runtime::setSizesList(set) + ")").c_str()
              : "");
      return 1;
    }
    inputs.push_back(hostTensorOf(t));
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
                kiln::previewValues(tensorOf(outputs[k]), 8).c_str());
  std::printf("time: %.3f ms (median of %d runs, %d threads)\n", times[times.size() / 2], repeat,
              exe->resolveThreads(threads));
  if (!outDir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(outDir, ec);
    kiln::DiagnosticEngine diag;
    kiln::installStderrHandler(diag);
    for (size_t k = 0; k < outputs.size(); ++k) {
      const std::string path = outDir + "/output_" + std::to_string(k) + ".npy";
      if (kiln::failed(kiln::writeNpy(path, tensorOf(outputs[k]), diag)))
        return 1;
    }
  }
  return 0;
}
