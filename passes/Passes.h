//===- Passes.h - Factories of the registered passes ------------*- C++ -*-===//
//
// One `create<Class>Pass()` per line of Passes.def. Prefer building
// pipelines from strings (parsePassPipeline); these are for code that wants
// one pass directly.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "passes/PassManager.h"

#include <memory>

namespace kiln {

/// The name and description of a pass as Passes.def gives them; each pass
/// class passes its `k<Class>Spec` to the Pass constructor.
struct PassSpec {
  const char *name;
  const char *description;
};

#define PASS(Class, Name, Description)                                                             \
  inline constexpr PassSpec k##Class##Spec{Name, Description};                                     \
  std::unique_ptr<Pass> create##Class##Pass();
#include "passes/Passes.def"

} // namespace kiln
