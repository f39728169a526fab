//===- OpsCommand.cpp - kiln ops: print the op table ------------*- C++ -*-===//
//
// Prints the op table (ir/Ops.def) as a Markdown table: the generated part of
// docs/OPS.md, which a lit test keeps in sync with the table.
//
//===----------------------------------------------------------------------===//
#include "ir/Ops.h"
#include "tools/Commands.h"

#include <cstdio>
#include <string>

namespace kiln::tools {
namespace {

std::string traitsStr(uint32_t t) {
  static const std::pair<uint32_t, const char *> kNames[] = {
      {Elementwise, "elementwise"},     {Commutative, "commutative"},
      {Idempotent, "idempotent"},       {Involution, "involution"},
      {DataMovement, "data-movement"},  {Reduction, "reduction"},
      {Normalization, "normalization"}, {Window, "window"}};
  std::string s;
  for (auto &[bit, name] : kNames)
    if (t & bit)
      s += (s.empty() ? "" : ", ") + std::string(name);
  return s.empty() ? "-" : s;
}

std::string arity(int lo, int hi) {
  if (hi == kVariadic)
    return std::to_string(lo) + "+";
  if (lo == hi)
    return std::to_string(lo);
  return std::to_string(lo) + "-" + std::to_string(hi);
}

} // namespace

int opsCommand(const Args &args) {
  if (!args.empty() && (args[0] == "--help" || args[0] == "-h")) {
    std::puts("usage: kiln ops    print the op table as Markdown");
    return 0;
  }
  if (!args.empty()) {
    std::fprintf(stderr, "kiln ops: error: unexpected argument '%s'\n", args[0].c_str());
    return 2;
  }
  std::printf("| op | operands | results | traits | ulps | attributes (kind = default) |\n");
  std::printf("| --- | --- | --- | --- | --- | --- |\n");
  for (const OpInfo &info : allOps()) {
    std::string attrs;
    for (const AttrSpec &a : info.attrs) {
      attrs += (attrs.empty() ? "" : "<br>") + std::string("`") + std::string(a.name) + ": " +
               attrKindName(a.kind);
      attrs += a.defaultText ? std::string(" = ") + a.defaultText : std::string(" (required)");
      attrs += "`";
    }
    std::string ulps = info.ulps < 0 ? "-" : std::to_string(info.ulps);
    std::printf("| `%s` | %s | %s | %s | %s | %s |\n", std::string(info.mnemonic).c_str(),
                arity(info.minOperands, info.maxOperands).c_str(),
                info.numResults == kVariadic ? "1+" : std::to_string(info.numResults).c_str(),
                traitsStr(info.traits).c_str(), ulps.c_str(), attrs.empty() ? "-" : attrs.c_str());
  }
  return 0;
}

} // namespace kiln::tools
