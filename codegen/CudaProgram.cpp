//===- CudaProgram.cpp - A graph's kernels as one CUDA module -------------===//

#include "codegen/CudaProgram.h"
#include "codegen/RunTimeSizes.h"

#include <cctype>
#include <set>

namespace kiln::codegen {
namespace {

/// `name` as a C identifier not in `taken` (kernel names are sanitized
/// graph names; two kernels may still share one).
std::string uniqueIdentifier(const std::string &name, std::set<std::string> &taken) {
  std::string id;
  for (char c : name)
    id += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  if (id.empty() || std::isdigit(static_cast<unsigned char>(id[0])))
    id = "k_" + id;
  std::string candidate = id;
  for (int n = 2; taken.count(candidate); ++n)
    candidate = id + "_" + std::to_string(n);
  taken.insert(candidate);
  return candidate;
}

} // namespace

FailureOr<CudaProgram> compileCudaProgram(const Graph &g, const CompileOptions &options, int arch,
                                          DiagnosticEngine &diag) {
  auto kernels = lowerAtSizes(g, options.dims, options, diag);
  if (failed(kernels))
    return failure();
  CudaProgram prog;
  prog.arch = arch;
  prog.source = "// " + std::to_string(kernels->size()) + " kernels for sm_" +
                std::to_string(arch) + ", written by Kiln's CUDA backend\n";
  std::set<std::string> taken;
  bool first = true;
  for (const Kernel &k : *kernels) {
    std::string error;
    const std::string name = uniqueIdentifier(k.name, taken);
    auto ck = cuda::emitCudaKernel(k, name, error);
    if (!ck) {
      diag.emitError(Location()) << "the CUDA backend cannot write kernel '" << k.name
                                 << "': " << error;
      return failure();
    }
    // One include of the prelude for the whole module.
    std::string src = ck->source;
    if (!first)
      src = src.substr(src.find('\n') + 1);
    first = false;
    prog.source += "\n" + src;
    prog.kernels.push_back({name, ck->form, k.numOuter(), k.inner,
                            cuda::cudaGridBlocks(ck->form, k.numOuter(), k.inner)});
  }
  std::string error;
  if (!cuda::compileWithNvrtc(prog.source, "kiln_kernels.cu", arch, prog.binary, error)) {
    diag.emitError(Location()) << error;
    return failure();
  }
  return prog;
}

} // namespace kiln::codegen
