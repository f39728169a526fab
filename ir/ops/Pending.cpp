// TEMPORARY during the bring-up of the op families: weak placeholders so the
// library links while each family file is being written. Deleted before the
// first commit that claims the op table is complete.
#include "ir/Ops.h"

namespace kiln {
#define OP(Class, ...)                                                                             \
  __attribute__((weak)) FailureOr<std::vector<TensorType>> infer##Class(const OpContext &ctx) {    \
    return ctx.emitError() << "has no type inference yet";                                         \
  }                                                                                                \
  __attribute__((weak)) FailureOr<std::vector<Tensor>> reference##Class(                           \
      const OpContext &ctx, std::span<const Tensor>, std::span<const TensorType>) {                \
    return ctx.emitError() << "has no reference kernel yet";                                       \
  }
#include "ir/Ops.def"
} // namespace kiln
