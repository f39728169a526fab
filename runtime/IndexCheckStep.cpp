//===- IndexCheckStep.cpp - Index ranges checked at run time --------------===//
#include "runtime/IndexCheckStep.h"

#include "runtime/ByteStream.h"

namespace kiln::runtime {

IndexCheckStep::IndexCheckStep(std::string node, DType dtype, int64_t count, int64_t axis,
                               int64_t size)
    : node_(std::move(node)), dtype_(dtype), count_(count), axis_(axis), size_(size) {}

namespace {
template <typename T> int64_t firstOutside(const T *p, int64_t n, int64_t size, int64_t &bad) {
  for (int64_t i = 0; i < n; ++i)
    if (p[i] < -size || p[i] >= size) {
      bad = static_cast<int64_t>(p[i]);
      return i;
    }
  return -1;
}
} // namespace

Status IndexCheckStep::run(std::span<void *const> buffers, const StepContext &) const {
  int64_t bad = 0;
  const int64_t at =
      dtype_ == DType::I32
          ? firstOutside(static_cast<const int32_t *>(buffers[0]), count_, size_, bad)
          : firstOutside(static_cast<const int64_t *>(buffers[0]), count_, size_, bad);
  if (at < 0)
    return Status::success();
  return Status::failure("'gather' op index " + std::to_string(bad) + " (element " +
                         std::to_string(at) + " of its indices) is out of range for axis " +
                         std::to_string(axis_) + " of size " + std::to_string(size_));
}

bool IndexCheckStep::save(SavedStep &out, std::string &) const {
  ByteWriter w;
  w.str(node_);
  w.pod<uint8_t>(dtype_ == DType::I32 ? 32 : 64);
  w.pod<int64_t>(count_);
  w.pod<int64_t>(axis_);
  w.pod<int64_t>(size_);
  out.kind = kKind;
  out.payload = w.take();
  return true;
}

std::shared_ptr<const IndexCheckStep> IndexCheckStep::load(std::string_view payload,
                                                           size_t bufferBytes, std::string &why) {
  ByteReader r(payload);
  std::string node = r.str();
  const auto bits = r.pod<uint8_t>();
  const auto count = r.pod<int64_t>();
  const auto axis = r.pod<int64_t>();
  const auto size = r.pod<int64_t>();
  if (!r.ok() || !r.done() || (bits != 32 && bits != 64) || count < 0 || size < 0 ||
      static_cast<uint64_t>(count) * (bits / 8) != bufferBytes) {
    why = "damaged index check step";
    return nullptr;
  }
  return std::make_shared<IndexCheckStep>(std::move(node), bits == 32 ? DType::I32 : DType::I64,
                                          count, axis, size);
}

} // namespace kiln::runtime
