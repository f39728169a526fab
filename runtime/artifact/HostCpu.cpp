//===- HostCpu.cpp - The instruction sets this CPU runs, without LLVM -----===//
#include "runtime/artifact/HostCpu.h"

#include "runtime/CpuFeatures.h"

#include <cpuid.h>

#include <cstdint>
#include <iterator>
#include <map>
#include <vector>

namespace kiln::runtime {
namespace {

enum Reg { EAX, EBX, ECX, EDX };

struct FeatureBit {
  const char *name; ///< LLVM's name
  unsigned leaf, subleaf;
  Reg reg;
  unsigned bit;
  /// Register state it needs enabled by the OS (XCR0 bits): 0x6 (SSE, AVX)
  /// for AVX-class, 0xe6 (and opmask, ZMM) for AVX-512.
  uint64_t xcr0;
};

// Intel SDM vol. 2A, CPUID; LLVM's X86TargetParser.def for the names.
const FeatureBit kFeatures[] = {
    {"cmov", 1, 0, EDX, 15, 0},
    {"mmx", 1, 0, EDX, 23, 0},
    {"sse", 1, 0, EDX, 25, 0},
    {"sse2", 1, 0, EDX, 26, 0},
    {"sse3", 1, 0, ECX, 0, 0},
    {"ssse3", 1, 0, ECX, 9, 0},
    {"fma", 1, 0, ECX, 12, 0x6},
    {"cx16", 1, 0, ECX, 13, 0},
    {"sse4.1", 1, 0, ECX, 19, 0},
    {"sse4.2", 1, 0, ECX, 20, 0},
    {"movbe", 1, 0, ECX, 22, 0},
    {"popcnt", 1, 0, ECX, 23, 0},
    {"aes", 1, 0, ECX, 25, 0},
    {"avx", 1, 0, ECX, 28, 0x6},
    {"f16c", 1, 0, ECX, 29, 0x6},
    {"pclmul", 1, 0, ECX, 1, 0},
    {"bmi", 7, 0, EBX, 3, 0},
    {"avx2", 7, 0, EBX, 5, 0x6},
    {"bmi2", 7, 0, EBX, 8, 0},
    {"avx512f", 7, 0, EBX, 16, 0xe6},
    {"avx512pf", 7, 0, EBX, 26, 0xe6},
    {"avx512er", 7, 0, EBX, 27, 0xe6},
    {"avx512dq", 7, 0, EBX, 17, 0xe6},
    {"adx", 7, 0, EBX, 19, 0},
    {"avx512ifma", 7, 0, EBX, 21, 0xe6},
    {"avx512cd", 7, 0, EBX, 28, 0xe6},
    {"sha", 7, 0, EBX, 29, 0},
    {"avx512bw", 7, 0, EBX, 30, 0xe6},
    {"avx512vl", 7, 0, EBX, 31, 0xe6},
    {"avx512vbmi", 7, 0, ECX, 1, 0xe6},
    {"avx512vbmi2", 7, 0, ECX, 6, 0xe6},
    {"gfni", 7, 0, ECX, 8, 0},
    {"vaes", 7, 0, ECX, 9, 0x6},
    {"vpclmulqdq", 7, 0, ECX, 10, 0x6},
    {"avx512vnni", 7, 0, ECX, 11, 0xe6},
    {"avx512bitalg", 7, 0, ECX, 12, 0xe6},
    {"avx512vpopcntdq", 7, 0, ECX, 14, 0xe6},
    {"avx512vp2intersect", 7, 0, EDX, 8, 0xe6},
    {"avx512fp16", 7, 0, EDX, 23, 0xe6},
    {"amx-bf16", 7, 0, EDX, 22, 0},
    {"amx-tile", 7, 0, EDX, 24, 0},
    {"amx-int8", 7, 0, EDX, 25, 0},
    {"avxvnni", 7, 1, EAX, 4, 0x6},
    {"avx512bf16", 7, 1, EAX, 5, 0xe6},
    {"amx-fp16", 7, 1, EAX, 21, 0},
    {"avxifma", 7, 1, EAX, 23, 0x6},
    {"avxvnniint8", 7, 1, EDX, 4, 0x6},
    {"avxneconvert", 7, 1, EDX, 5, 0x6},
    {"avxvnniint16", 7, 1, EDX, 10, 0x6},
    {"lzcnt", 0x80000001, 0, ECX, 5, 0},
    {"sse4a", 0x80000001, 0, ECX, 6, 0},
    {"prfchw", 0x80000001, 0, ECX, 8, 0},
    {"xop", 0x80000001, 0, ECX, 11, 0x6},
    {"fma4", 0x80000001, 0, ECX, 16, 0x6},
    {"tbm", 0x80000001, 0, ECX, 21, 0},
};

bool hostHas(const FeatureBit &f) {
  unsigned r[4] = {0, 0, 0, 0};
  const unsigned maxLeaf = __get_cpuid_max(f.leaf & 0x80000000u, nullptr);
  if (maxLeaf < f.leaf)
    return false;
  __cpuid_count(f.leaf, f.subleaf, r[EAX], r[EBX], r[ECX], r[EDX]);
  if (!((r[f.reg] >> f.bit) & 1))
    return false;
  if (f.xcr0 == 0)
    return true;
  unsigned a, b, c, d;
  __cpuid_count(1, 0, a, b, c, d);
  if (!((c >> 27) & 1)) // OSXSAVE
    return false;
  uint32_t lo, hi;
  __asm__("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  const uint64_t xcr0 = (uint64_t(hi) << 32) | lo;
  return (xcr0 & f.xcr0) == f.xcr0;
}

/// Each row of kFeatures on this CPU, asked once: CPUID exits to the
/// hypervisor on a virtual machine (about 10 us each on the KVM guest the
/// benchmarks ran on), and a load checks dozens of features, once per
/// nested artifact too; asked per load it was 1.2 ms.
const std::vector<bool> &hostFeatures() {
  static const std::vector<bool> bits = [] {
    std::vector<bool> b;
    for (const FeatureBit &row : kFeatures)
      b.push_back(hostHas(row));
    return b;
  }();
  return bits;
}

} // namespace

std::vector<std::string> missingCpuFeatures(std::string_view required) {
  std::vector<std::string> missing;
  for (size_t pos = 0; pos < required.size();) {
    size_t comma = required.find(',', pos);
    if (comma == std::string_view::npos)
      comma = required.size();
    std::string_view f = required.substr(pos, comma - pos);
    pos = comma + 1;
    if (f.empty() || f[0] != '+')
      continue;
    f.remove_prefix(1);
    size_t known = std::size(kFeatures);
    for (size_t i = 0; i < std::size(kFeatures); ++i)
      if (f == kFeatures[i].name)
        known = i;
    // An instruction set the table cannot check counts as missing: running
    // code that may use it could fault.
    if (known < std::size(kFeatures) ? !hostFeatures()[known] : runtime::isInstructionSetFeature(f))
      missing.emplace_back(f);
  }
  return missing;
}

} // namespace kiln::runtime
