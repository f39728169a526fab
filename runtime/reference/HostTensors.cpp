//===- HostTensors.cpp - kiln::Tensor <-> HostTensor -------------*- C++ -*-===//
#include "runtime/reference/HostTensors.h"

namespace kiln {
namespace runtime {

HostTensor toHostTensor(const Tensor &t) {
  HostTensor h;
  h.dtype = t.dtype();
  h.shape = t.shape();
  auto owner = std::make_shared<Tensor>(t);
  h.data = const_cast<void *>(t.rawData());
  h.storage = std::shared_ptr<void>(owner, h.data);
  return h;
}

Tensor fromHostTensor(const HostTensor &t) {
  return Tensor::borrow(t.dtype, t.shape, t.storage, t.data);
}

} // namespace runtime
} // namespace kiln
