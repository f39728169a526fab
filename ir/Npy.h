//===- Npy.h - NumPy .npy files ---------------------------------*- C++ -*-===//
//
// `.npy` is the tensor exchange format of the CLI. Supported: versions 1-3,
// C order, little-endian f2/f4/f8/i1/u1/i4/i8 and b1. bf16 has no NumPy
// dtype and is refused with a message.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/Diagnostics.h"
#include "ir/Tensor.h"

#include <string>

namespace kiln {

/// The .npy dtype descr of `t` ("<f4", "|u1", "|b1"; from DTypes.def), or ""
/// for a dtype NumPy lacks (bf16 and the storage dtypes).
std::string npyDescr(DType t);

FailureOr<Tensor> readNpy(const std::string &path, DiagnosticEngine &diag);
/// Parses the bytes of a .npy file; `what` names it in errors.
FailureOr<Tensor> parseNpy(std::string_view bytes, const std::string &what, DiagnosticEngine &diag);
std::string encodeNpy(const Tensor &t);
LogicalResult writeNpy(const std::string &path, const Tensor &t, DiagnosticEngine &diag);

} // namespace kiln
