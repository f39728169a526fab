//===- ElfLoader.h - Linking kernels' objects into memory, without LLVM -*- C++ -*-===//
//
// The loader of an artifact's machine code: the kernels' ELF64 x86-64
// relocatable objects (runtime::KernelObject), as the JIT produced them,
// copied into one mapping (code first, read+execute; then data), relocated,
// and their calls to libm/libmvec/runtime helpers bound through a GOT and
// jump stubs built here (the objects are position independent, small code
// model: every reference is PC-relative or through the GOT). It is a static
// linker for the few relocation kinds such code has, not a general one; an
// object with another kind (or a static constructor, TLS, common symbols)
// is refused, naming it.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::runtime {

class LoadedCode {
public:
  /// Links `objects` (each an ELF relocatable; its bytes are read, not kept)
  /// into one mapping. Null, with `why` naming the object and what is wrong
  /// with it, on a malformed object or an unresolvable symbol.
  static std::shared_ptr<LoadedCode> link(std::span<const std::string_view> objects,
                                          std::string &why);
  ~LoadedCode();
  LoadedCode(const LoadedCode &) = delete;
  LoadedCode &operator=(const LoadedCode &) = delete;

  /// The address of global `name` defined by object `object`; null if it
  /// defines none.
  void *symbol(size_t object, std::string_view name) const;
  /// Bytes mapped (code, data, GOT and stubs).
  size_t mappedBytes() const { return size_; }

private:
  LoadedCode() = default;
  struct Defined {
    size_t object;
    std::string name;
    void *address;
  };
  void *base_ = nullptr;
  size_t size_ = 0;
  std::vector<Defined> symbols_;
};

} // namespace kiln::runtime
