//===- DnnlIsa.cpp - Capping oneDNN's ISA to the --cpu target -------------===//
#include "codegen/cpu/dnnl/DnnlIsa.h"

#include <oneapi/dnnl/dnnl.hpp>

#include <mutex>

namespace kiln::codegen::cpu {
namespace {

struct IsaRow {
  const char *features; ///< every one needed ("" = always)
  const char *name;
  dnnl::cpu_isa isa;
};

// Highest first (the table in DnnlIsa.h).
const IsaRow kIsaRows[] = {
    {"amx-tile,avx512bf16,avx512f,avx512bw,avx512vl,avx512dq", "avx512_core_amx",
     dnnl::cpu_isa::avx512_core_amx},
    {"avx512bf16,avx512f,avx512bw,avx512vl,avx512dq", "avx512_core_bf16",
     dnnl::cpu_isa::avx512_core_bf16},
    {"avx512vnni,avx512f,avx512bw,avx512vl,avx512dq", "avx512_core_vnni",
     dnnl::cpu_isa::avx512_core_vnni},
    {"avx512f,avx512bw,avx512vl,avx512dq", "avx512_core", dnnl::cpu_isa::avx512_core},
    {"avxvnni,avx2", "avx2_vnni", dnnl::cpu_isa::avx2_vnni},
    {"avx2", "avx2", dnnl::cpu_isa::avx2},
    {"avx", "avx", dnnl::cpu_isa::avx},
    {"", "sse41", dnnl::cpu_isa::sse41},
};

const IsaRow &rowFor(const CpuTarget &target) {
  for (const IsaRow &r : kIsaRows)
    if (!*r.features || target.has(r.features))
      return r;
  return kIsaRows[std::size(kIsaRows) - 1];
}

std::mutex gMutex;
std::string gCapped; ///< the ISA this process capped oneDNN at; empty: none
std::string gCappedFor;

} // namespace

std::string oneDnnIsaFor(const CpuTarget &target) {
  return target.native ? "all" : rowFor(target).name;
}

LogicalResult capOneDnnIsa(const CpuTarget &target, DiagnosticEngine &diag) {
  std::lock_guard<std::mutex> lock(gMutex);
  std::string want = oneDnnIsaFor(target);
  if (gCapped.empty() && target.native)
    return success();
  if (gCapped == want)
    return success();
  if (!gCapped.empty())
    return diag.emitError(Location())
           << "this process already compiled for --cpu " << gCappedFor << " (oneDNN ISA " << gCapped
           << "); oneDNN takes one ISA cap per process, so --cpu " << target.requested << " ("
           << want << ") needs a process of its own";
  try {
    dnnl::set_max_cpu_isa(rowFor(target).isa);
  } catch (const dnnl::error &e) {
    return diag.emitError(Location())
           << "cannot cap oneDNN at ISA " << want << " for --cpu " << target.requested
           << ": oneDNN already ran in this process without a cap (" << e.what() << ")";
  }
  gCapped = want;
  gCappedFor = target.requested;
  return success();
}

} // namespace kiln::codegen::cpu
