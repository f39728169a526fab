//===- HostTensors.h - kiln::Tensor <-> the runtime's HostTensor -*- C++ -*-===//
//
// The IR's host tensor (ir/Tensor.h, the public kiln::Tensor) and the
// runtime's HostTensor (runtime/Executable.h) viewed as each other: both
// directions share the bytes and keep the owner alive. Here because this is
// the runtime library that links the IR.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/Tensor.h"
#include "runtime/Executable.h"

namespace kiln {
namespace runtime {

HostTensor toHostTensor(const Tensor &t);
Tensor fromHostTensor(const HostTensor &t);

} // namespace runtime
} // namespace kiln
