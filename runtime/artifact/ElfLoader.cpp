//===- ElfLoader.cpp - Linking kernels' objects into memory, without LLVM -===//
//
// Two passes over the objects:
//   1. check each header, section table and symbol table; place every
//      allocated section (code sections in the code part, the rest in the
//      data part, each at its alignment), and count the GOT slots (one per
//      symbol a GOTPCREL relocation names) and jump stubs (one per external
//      function a PC-relative relocation names: libmvec and libm are
//      further than the +-2 GiB a rel32 reaches);
//   2. map one anonymous region, copy the sections in, resolve externals
//      (the runtime's helpers, then libmvec, then the process: libm is a
//      dependency of the runtime), fill GOT and stubs, apply relocations,
//      and make the code part read+execute.
// `.eh_frame` is not loaded (kernels do not throw and are not unwound).
//
//===----------------------------------------------------------------------===//
#include "runtime/artifact/ElfLoader.h"

#include "runtime/KernelABI.h"

#include <dlfcn.h>
#include <elf.h>
#include <sys/mman.h>

#include <cstring>
#include <map>
#include <mutex>

namespace kiln::runtime {
namespace {

constexpr size_t kPage = 4096;
constexpr size_t kStubSize = 8; ///< jmp *disp32(%rip) (6 bytes), padded

size_t alignUp(size_t v, size_t a) {
  return a <= 1 ? v : (v + a - 1) / a * a;
}

/// The address of an external symbol kernels may call; null when unknown.
void *resolveExternal(const std::string &name) {
  if (name == "kiln_cpu_ipow")
    return reinterpret_cast<void *>(&kiln_cpu_ipow);
  static void *mvec = dlopen("libmvec.so.1", RTLD_NOW | RTLD_LOCAL);
  static void *libm = dlopen("libm.so.6", RTLD_NOW | RTLD_LOCAL);
  for (void *h : {mvec, libm})
    if (h)
      if (void *p = dlsym(h, name.c_str()))
        return p;
  return dlsym(RTLD_DEFAULT, name.c_str());
}

struct Object {
  std::string_view bytes;
  const Elf64_Ehdr *eh = nullptr;
  std::span<const Elf64_Shdr> sections;
  std::span<const Elf64_Sym> symbols;
  std::string_view strtab, shstrtab;
  /// Per section: where it goes (offset in the region; ~0: not loaded).
  std::vector<size_t> placed;
  /// Per symbol index: its GOT slot (offset) and stub (offset), or ~0.
  std::map<uint32_t, size_t> got, stub;
};

constexpr size_t kNone = ~size_t(0);

bool isLoaded(const Object &o, const Elf64_Shdr &s) {
  if (!(s.sh_flags & SHF_ALLOC) || s.sh_size == 0)
    return false;
  // parse() checked sh_name against the table, which ends with a NUL.
  return std::string_view(o.shstrtab.data() + s.sh_name) != ".eh_frame";
}

std::string symbolName(const Object &o, const Elf64_Sym &s) {
  if (s.st_name >= o.strtab.size())
    return {};
  return std::string(o.strtab.data() + s.st_name);
}

/// Checks `o.bytes` and fills the views; an error message or "".
std::string parse(Object &o) {
  const std::string_view b = o.bytes;
  if (b.size() < sizeof(Elf64_Ehdr) || std::memcmp(b.data(), ELFMAG, SELFMAG) != 0)
    return "not an ELF object";
  o.eh = reinterpret_cast<const Elf64_Ehdr *>(b.data());
  if (o.eh->e_ident[EI_CLASS] != ELFCLASS64 || o.eh->e_ident[EI_DATA] != ELFDATA2LSB ||
      o.eh->e_type != ET_REL || o.eh->e_machine != EM_X86_64)
    return "not an x86-64 ELF64 relocatable object";
  if (o.eh->e_shentsize != sizeof(Elf64_Shdr) || o.eh->e_shoff > b.size() ||
      o.eh->e_shnum > (b.size() - o.eh->e_shoff) / sizeof(Elf64_Shdr) ||
      o.eh->e_shstrndx >= o.eh->e_shnum)
    return "a section table outside the object";
  o.sections = {reinterpret_cast<const Elf64_Shdr *>(b.data() + o.eh->e_shoff), o.eh->e_shnum};
  for (const Elf64_Shdr &s : o.sections) {
    if (s.sh_type != SHT_NOBITS && (s.sh_offset > b.size() || s.sh_size > b.size() - s.sh_offset))
      return "a section outside the object";
    if (s.sh_type == SHT_NOBITS && s.sh_size > (uint64_t(1) << 30))
      return "a zero-filled section of more than 1 GiB";
  }
  const Elf64_Shdr &names = o.sections[o.eh->e_shstrndx];
  if (names.sh_type != SHT_STRTAB || names.sh_size == 0)
    return "no section name table";
  o.shstrtab = b.substr(names.sh_offset, names.sh_size);
  if (o.shstrtab.back() != '\0')
    return "a malformed section name table";
  for (const Elf64_Shdr &s : o.sections) {
    if (s.sh_name >= o.shstrtab.size())
      return "a section name outside the name table";
    if (s.sh_addralign > kPage)
      return "a section aligned to more than a page";
    if (s.sh_type == SHT_SYMTAB) {
      if (s.sh_entsize != sizeof(Elf64_Sym) || s.sh_link >= o.sections.size())
        return "a malformed symbol table";
      o.symbols = {reinterpret_cast<const Elf64_Sym *>(b.data() + s.sh_offset),
                   s.sh_size / sizeof(Elf64_Sym)};
      const Elf64_Shdr &str = o.sections[s.sh_link];
      if (str.sh_type != SHT_STRTAB)
        return "a symbol table without a string table";
      o.strtab = b.substr(str.sh_offset, str.sh_size);
      if (o.strtab.empty() || o.strtab.back() != '\0')
        return "a malformed string table";
    }
    if (s.sh_type == SHT_INIT_ARRAY || s.sh_type == SHT_FINI_ARRAY ||
        s.sh_type == SHT_PREINIT_ARRAY || (s.sh_flags & SHF_TLS))
      return "static constructors or thread-local data";
  }
  for (const Elf64_Sym &sym : o.symbols) {
    if (sym.st_shndx == SHN_COMMON)
      return "a common symbol";
    if (sym.st_shndx == SHN_XINDEX)
      return "extended section indices";
    if (sym.st_shndx != SHN_UNDEF && sym.st_shndx < SHN_LORESERVE &&
        (sym.st_shndx >= o.sections.size() || sym.st_value > o.sections[sym.st_shndx].sh_size))
      return "a symbol outside its section";
    if (sym.st_name >= o.strtab.size())
      return "a symbol name outside the string table";
  }
  return {};
}

/// The relocation sections of `o` that apply to loaded sections.
template <typename F> std::string forEachRela(const Object &o, F &&f) {
  for (const Elf64_Shdr &s : o.sections) {
    if (s.sh_type == SHT_REL)
      return "REL relocations (x86-64 objects use RELA)";
    if (s.sh_type != SHT_RELA || s.sh_info >= o.sections.size() ||
        !isLoaded(o, o.sections[s.sh_info]))
      continue;
    if (s.sh_entsize != sizeof(Elf64_Rela))
      return "a malformed relocation section";
    std::span<const Elf64_Rela> relas{
        reinterpret_cast<const Elf64_Rela *>(o.bytes.data() + s.sh_offset),
        s.sh_size / sizeof(Elf64_Rela)};
    for (const Elf64_Rela &r : relas) {
      if (ELF64_R_SYM(r.r_info) >= o.symbols.size() || o.sections[s.sh_info].sh_size < 4 ||
          r.r_offset > o.sections[s.sh_info].sh_size - 4)
        return "a relocation outside its section or symbol table";
      if (std::string e = f(s.sh_info, r); !e.empty())
        return e;
    }
  }
  return {};
}

} // namespace

LoadedCode::~LoadedCode() {
  if (base_)
    munmap(base_, size_);
}

std::shared_ptr<LoadedCode> LoadedCode::link(std::span<const std::string_view> objects,
                                             std::string &why) {
  std::vector<Object> objs(objects.size());
  // Pass 1: place code sections and stubs, then (page-aligned) data and GOT.
  size_t end = 0;
  auto fail = [&](size_t i, const std::string &what) {
    why = "kernel object " + std::to_string(i) + ": " + what;
    return nullptr;
  };
  for (size_t i = 0; i < objs.size(); ++i) {
    objs[i].bytes = objects[i];
    if (std::string e = parse(objs[i]); !e.empty())
      return fail(i, e);
    objs[i].placed.assign(objs[i].sections.size(), kNone);
  }
  for (int code = 1; code >= 0; --code) {
    for (Object &o : objs) {
      for (size_t si = 0; si < o.sections.size(); ++si) {
        const Elf64_Shdr &s = o.sections[si];
        if (!isLoaded(o, s) || bool(s.sh_flags & SHF_EXECINSTR) != bool(code))
          continue;
        end = alignUp(end, s.sh_addralign);
        o.placed[si] = end;
        end += s.sh_size;
      }
    }
    // Stubs after the code, GOT slots after the data.
    for (size_t i = 0; i < objs.size(); ++i) {
      Object &o = objs[i];
      std::string e = forEachRela(o, [&](uint32_t, const Elf64_Rela &r) -> std::string {
        const uint32_t sym = ELF64_R_SYM(r.r_info);
        const uint32_t type = ELF64_R_TYPE(r.r_info);
        const bool external = o.symbols[sym].st_shndx == SHN_UNDEF;
        const bool gotRel = type == R_X86_64_GOTPCREL || type == R_X86_64_GOTPCRELX ||
                            type == R_X86_64_REX_GOTPCRELX;
        const bool pcRel = type == R_X86_64_PC32 || type == R_X86_64_PLT32;
        if (code && external && pcRel && !o.stub.count(sym)) {
          end = alignUp(end, kStubSize);
          o.stub[sym] = end;
          end += kStubSize;
        }
        // A stub jumps through a GOT slot: externals named by a stub get one.
        if (!code && (gotRel || (external && pcRel)) && !o.got.count(sym)) {
          end = alignUp(end, 8);
          o.got[sym] = end;
          end += 8;
        }
        return {};
      });
      if (!e.empty())
        return fail(i, e);
    }
    if (code)
      end = alignUp(end, kPage);
  }
  size_t codeBytes = 0;
  for (const Object &o : objs)
    for (size_t si = 0; si < o.sections.size(); ++si)
      if (o.placed[si] != kNone && (o.sections[si].sh_flags & SHF_EXECINSTR))
        codeBytes = std::max(codeBytes, o.placed[si] + o.sections[si].sh_size);
  for (const Object &o : objs)
    for (const auto &[sym, off] : o.stub)
      codeBytes = std::max(codeBytes, off + kStubSize);
  codeBytes = alignUp(codeBytes, kPage);

  std::shared_ptr<LoadedCode> lc(new LoadedCode());
  lc->size_ = std::max(alignUp(end, kPage), kPage);
  void *mem = mmap(nullptr, lc->size_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED) {
    why = "cannot map " + std::to_string(lc->size_) + " bytes for the kernels' code";
    return nullptr;
  }
  lc->base_ = mem;
  auto *base = static_cast<uint8_t *>(mem);

  // Pass 2: copy, resolve, relocate.
  for (size_t i = 0; i < objs.size(); ++i) {
    Object &o = objs[i];
    for (size_t si = 0; si < o.sections.size(); ++si)
      if (o.placed[si] != kNone && o.sections[si].sh_type != SHT_NOBITS)
        std::memcpy(base + o.placed[si], o.bytes.data() + o.sections[si].sh_offset,
                    o.sections[si].sh_size);
    std::vector<uint64_t> address(o.symbols.size(), 0);
    for (size_t k = 1; k < o.symbols.size(); ++k) {
      const Elf64_Sym &s = o.symbols[k];
      if (s.st_shndx == SHN_UNDEF) {
        const std::string name = symbolName(o, s);
        if (name.empty())
          continue;
        void *p = resolveExternal(name);
        if (!p)
          return fail(i, "the symbol '" + name + "' is not defined in this process");
        address[k] = reinterpret_cast<uint64_t>(p);
      } else if (s.st_shndx == SHN_ABS) {
        address[k] = s.st_value;
      } else if (s.st_shndx < o.sections.size()) {
        if (o.placed[s.st_shndx] == kNone)
          continue; // a symbol of a section not loaded (debug info)
        address[k] = reinterpret_cast<uint64_t>(base + o.placed[s.st_shndx]) + s.st_value;
        if (ELF64_ST_BIND(s.st_info) == STB_GLOBAL && ELF64_ST_TYPE(s.st_info) == STT_FUNC)
          lc->symbols_.push_back({i, symbolName(o, s), reinterpret_cast<void *>(address[k])});
      }
    }
    for (const auto &[sym, off] : o.got)
      std::memcpy(base + off, &address[sym], 8);
    for (const auto &[sym, off] : o.stub) {
      // jmp *disp32(%rip) through the symbol's GOT slot.
      const int64_t disp = static_cast<int64_t>(o.got.at(sym)) - static_cast<int64_t>(off + 6);
      const int32_t d32 = static_cast<int32_t>(disp);
      uint8_t code[kStubSize] = {0xff, 0x25, 0, 0, 0, 0, 0xcc, 0xcc};
      std::memcpy(code + 2, &d32, 4);
      std::memcpy(base + off, code, kStubSize);
    }
    std::string e = forEachRela(o, [&](uint32_t target, const Elf64_Rela &r) -> std::string {
      const uint32_t sym = ELF64_R_SYM(r.r_info);
      const uint32_t type = ELF64_R_TYPE(r.r_info);
      uint8_t *place = base + o.placed[target] + r.r_offset;
      const auto P = reinterpret_cast<int64_t>(place);
      const int64_t A = r.r_addend;
      int64_t S = static_cast<int64_t>(address[sym]);
      if (sym != 0 && S == 0 && o.symbols[sym].st_shndx != SHN_ABS)
        return "a relocation against '" + symbolName(o, o.symbols[sym]) +
               "', in a section that is not loaded";
      const bool fits64 = r.r_offset + 8 <= o.sections[target].sh_size;
      auto put32 = [&](int64_t v) -> std::string {
        if (v < INT32_MIN || v > INT32_MAX)
          return "a relocation out of 32-bit range";
        const int32_t v32 = static_cast<int32_t>(v);
        std::memcpy(place, &v32, 4);
        return {};
      };
      switch (type) {
      case R_X86_64_NONE:
        return {};
      case R_X86_64_64: {
        if (!fits64)
          return "a relocation outside its section";
        const int64_t v = S + A;
        std::memcpy(place, &v, 8);
        return {};
      }
      case R_X86_64_PC64: {
        if (!fits64)
          return "a relocation outside its section";
        const int64_t v = S + A - P;
        std::memcpy(place, &v, 8);
        return {};
      }
      case R_X86_64_PC32:
      case R_X86_64_PLT32:
        if (o.stub.count(sym))
          S = reinterpret_cast<int64_t>(base + o.stub.at(sym));
        return put32(S + A - P);
      case R_X86_64_GOTPCREL:
      case R_X86_64_GOTPCRELX:
      case R_X86_64_REX_GOTPCRELX:
        return put32(reinterpret_cast<int64_t>(base + o.got.at(sym)) + A - P);
      default:
        return "relocation type " + std::to_string(type) + " is not supported";
      }
    });
    if (!e.empty())
      return fail(i, e);
  }
  if (codeBytes > 0 && mprotect(base, codeBytes, PROT_READ | PROT_EXEC) != 0) {
    why = "cannot make the kernels' code executable";
    return nullptr;
  }
  return lc;
}

void *LoadedCode::symbol(size_t object, std::string_view name) const {
  for (const Defined &d : symbols_)
    if (d.object == object && d.name == name)
      return d.address;
  return nullptr;
}

} // namespace kiln::runtime
