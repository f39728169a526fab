//===- transformer_block.cpp - Example: a transformer encoder block -------===//
//
// Builds the encoder block of Models.h (kiln::nn::MultiheadAttention,
// LayerNorm and a GELU feed-forward), runs it eagerly, traces it (checked on
// a second input), then verifies, prints or writes, and runs the traced
// graph on the interpreter and compares it with eager.
//
//   kiln_example_transformer_block [-o block.kir]
//
//===----------------------------------------------------------------------===//
#include "examples/trace/ExampleSupport.h"
#include "examples/trace/Models.h"
#include "kiln/Trace.h"

#include <cstdio>

int main(int argc, char **argv) {
  try {
    kiln::manualSeed(7);
    example::EncoderBlock block(/*embed=*/64, /*heads=*/4, /*feedForward=*/256);
    kiln::Tensor x = kiln::randn({2, 16, 64}, /*seed=*/1);
    kiln::Tensor eager = block(x);

    auto graph = kiln::trace([&](const kiln::Tensor &in) { return block(in); }, {x},
                             {.inputNames = {"x"},
                              .outputNames = {"y"},
                              .graphName = "encoder_block",
                              .checkInputs = {{kiln::randn({2, 16, 64}, /*seed=*/2)}}});
    return example::finish("transformer_block", argc, argv, *graph, {x}, eager,
                           [&] { return block(x); });
  } catch (const kiln::Error &e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
}
