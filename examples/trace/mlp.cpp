//===- mlp.cpp - Example: an MLP written, traced and checked in C++ -------===//
//
// Builds the MLP of Models.h (three kiln::nn::Linear layers), runs it
// eagerly, traces it (checking the trace on a second input), then verifies,
// prints and runs the traced graph and compares it with eager.
//
//   kiln_example_mlp                 print the IR (locations, weights elided)
//   kiln_example_mlp -o mlp.kir      write the IR with locations and weights
//
//===----------------------------------------------------------------------===//
#include "examples/trace/ExampleSupport.h"
#include "examples/trace/Models.h"
#include "kiln/Trace.h"

#include <cstdio>

int main(int argc, char **argv) {
  try {
    kiln::manualSeed(42);
    example::MLP model;
    kiln::Tensor x = kiln::randn({32, 256}, /*seed=*/1);
    kiln::Tensor eager = model(x);

    auto graph = kiln::trace([&](const kiln::Tensor &in) { return model(in); }, {x},
                             {.inputNames = {"x"},
                              .outputNames = {"probs"},
                              .graphName = "mlp",
                              .checkInputs = {{kiln::randn({32, 256}, /*seed=*/2)}}});
    return example::finish("mlp", argc, argv, *graph, {x}, eager, [&] { return model(x); });
  } catch (const kiln::Error &e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
}
