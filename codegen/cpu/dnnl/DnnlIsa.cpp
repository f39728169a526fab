//===- DnnlIsa.cpp - Capping oneDNN's ISA to the --cpu target -------------===//
#include "codegen/cpu/dnnl/DnnlIsa.h"

#include "runtime/dnnl/DnnlSteps.h"

namespace kiln::codegen::cpu {
namespace {

struct IsaRow {
  const char *features; ///< every one needed ("" = always)
  const char *name;     ///< oneDNN's cpu_isa name (runtime::onednn::capIsa)
};

// Highest first (the table in DnnlIsa.h).
const IsaRow kIsaRows[] = {
    {"amx-tile,avx512bf16,avx512f,avx512bw,avx512vl,avx512dq", "avx512_core_amx"},
    {"avx512bf16,avx512f,avx512bw,avx512vl,avx512dq", "avx512_core_bf16"},
    {"avx512vnni,avx512f,avx512bw,avx512vl,avx512dq", "avx512_core_vnni"},
    {"avx512f,avx512bw,avx512vl,avx512dq", "avx512_core"},
    {"avxvnni,avx2", "avx2_vnni"},
    {"avx2", "avx2"},
    {"avx", "avx"},
    {"", "sse41"},
};

const IsaRow &rowFor(const CpuTarget &target) {
  for (const IsaRow &r : kIsaRows)
    if (!*r.features || target.has(r.features))
      return r;
  return kIsaRows[std::size(kIsaRows) - 1];
}

} // namespace

std::string oneDnnIsaFor(const CpuTarget &target) {
  return target.native ? "all" : rowFor(target).name;
}

LogicalResult capOneDnnIsa(const CpuTarget &target, DiagnosticEngine &diag) {
  runtime::Status st = runtime::onednn::capIsa(oneDnnIsaFor(target), "--cpu " + target.requested);
  if (!st.ok())
    return diag.emitError(Location()) << st.error;
  return success();
}

} // namespace kiln::codegen::cpu
