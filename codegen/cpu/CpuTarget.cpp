//===- CpuTarget.cpp - Resolving --cpu names with LLVM's X86 parser -------===//
//
// 1. `native`: the host CPU name and the features the host reports.
// 2. A name: validated by llvm::X86::parseArchX86 (64-bit CPUs only); its
//    features come from llvm::X86::getFeaturesForCPU, the list clang turns
//    -march=NAME into.
// 3. Every feature of the named CPU that the host reports as absent is a
//    reason to refuse it: code for it would fault on this machine.
//
//===----------------------------------------------------------------------===//
#include "codegen/cpu/CpuTarget.h"
#include "runtime/CpuFeatures.h"

#include <llvm/ADT/SmallVector.h>
#include <llvm/ADT/StringMap.h>
#include <llvm/TargetParser/Host.h>
#include <llvm/TargetParser/X86TargetParser.h>

#include <algorithm>
#include <set>

namespace kiln::codegen::cpu {

std::vector<std::string> validCpuNames() {
  llvm::SmallVector<llvm::StringRef, 64> names;
  llvm::X86::fillValidCPUArchList(names, /*Only64Bit=*/true);
  std::vector<std::string> out{"native"};
  for (llvm::StringRef n : names)
    out.push_back(n.str());
  return out;
}

FailureOr<CpuTarget> resolveCpuTarget(std::string_view name, DiagnosticEngine &diag) {
  llvm::StringMap<bool> host;
  bool haveHost = llvm::sys::getHostCPUFeatures(host);
  CpuTarget t;
  t.requested = std::string(name);
  if (name.empty() || name == "native") {
    t.requested = "native";
    t.cpu = llvm::sys::getHostCPUName().str();
    std::vector<std::string> on;
    for (const auto &kv : host)
      if (kv.getValue())
        on.push_back(kv.getKey().str());
    std::sort(on.begin(), on.end());
    for (const std::string &f : on)
      t.features += (t.features.empty() ? "+" : ",+") + f;
    return t;
  }
  if (llvm::X86::parseArchX86(llvm::StringRef(name.data(), name.size()), /*Only64Bit=*/true) ==
      llvm::X86::CK_None) {
    std::string list;
    for (const std::string &n : validCpuNames())
      list += (list.empty() ? "" : ", ") + n;
    return diag.emitError(Location())
           << "--cpu: unknown CPU '" << name << "'; valid names: " << list;
  }
  llvm::SmallVector<llvm::StringRef, 64> feats;
  llvm::X86::getFeaturesForCPU(llvm::StringRef(name.data(), name.size()), feats);
  std::set<std::string> sorted;
  for (llvm::StringRef f : feats)
    sorted.insert(f.str());
  if (!haveHost)
    return diag.emitError(Location())
           << "--cpu " << name
           << ": cannot read this machine's CPU features, so code for another CPU could "
              "fault here; use --cpu native";
  std::string missing;
  for (const std::string &f : sorted) {
    t.features += (t.features.empty() ? "+" : ",+") + f;
    auto it = host.find(f);
    if (runtime::isInstructionSetFeature(f) && it != host.end() && !it->getValue())
      missing += (missing.empty() ? "" : ", ") + f;
  }
  if (!missing.empty())
    return diag.emitError(Location())
           << "--cpu " << name << " needs features this machine lacks (" << missing
           << "); its code would not run here (this machine is '"
           << llvm::sys::getHostCPUName().str() << "')";
  t.cpu = std::string(name);
  t.native = false;
  return t;
}

} // namespace kiln::codegen::cpu
