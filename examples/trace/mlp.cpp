//===- mlp.cpp - Example: an MLP written, traced and checked in C++ -------===//
//
// Builds a three-layer MLP from kiln::nn::Linear, runs it eagerly, traces it
// (checking the trace on a second input), then verifies, prints and runs the
// traced graph and compares it with eager.
//
//   kiln_example_mlp                 print the IR (locations, weights elided)
//   kiln_example_mlp -o mlp.kir      write the IR with locations and weights
//
//===----------------------------------------------------------------------===//
#include "examples/trace/ExampleSupport.h"
#include "kiln/Modules.h"
#include "kiln/Trace.h"

#include <cstdio>

namespace {

struct MLP : kiln::nn::Module {
  kiln::nn::Linear fc1{256, 128}, fc2{128, 64}, fc3{64, 10};

  MLP() {
    registerModule("fc1", fc1);
    registerModule("fc2", fc2);
    registerModule("fc3", fc3);
  }

  kiln::Tensor forward(const kiln::Tensor &x, const std::source_location &) override {
    kiln::Tensor h = kiln::relu(fc1(x));
    h = kiln::relu(fc2(h));
    return kiln::softmax(fc3(h), {.axis = -1});
  }
};

} // namespace

int main(int argc, char **argv) {
  try {
    kiln::manualSeed(42);
    MLP model;
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
