//===- transformer_block.cpp - Example: a transformer encoder block -------===//
//
// A post-norm transformer encoder block (PyTorch's TransformerEncoderLayer
// with batch_first=True, GELU, no dropout; its parameter names), written with
// kiln::MultiheadAttention, kiln::nn::LayerNorm and a GELU feed-forward. It is
// run eagerly, traced (checked on a second input), verified, printed or
// written, run on the interpreter and compared with eager.
//
//   kiln_example_transformer_block [-o block.kir]
//
//===----------------------------------------------------------------------===//
#include "examples/trace/ExampleSupport.h"
#include "kiln/Modules.h"
#include "kiln/Trace.h"

#include <cstdio>

namespace {

struct EncoderBlock : kiln::nn::Module {
  kiln::nn::MultiheadAttention selfAttn;
  kiln::nn::Linear linear1, linear2;
  kiln::nn::LayerNorm norm1, norm2;
  kiln::nn::GELU gelu;

  EncoderBlock(int64_t embed, int64_t heads, int64_t feedForward)
      : selfAttn(embed, heads), linear1(embed, feedForward), linear2(feedForward, embed),
        norm1({embed}), norm2({embed}) {
    registerModule("self_attn", selfAttn);
    registerModule("linear1", linear1);
    registerModule("linear2", linear2);
    registerModule("norm1", norm1);
    registerModule("norm2", norm2);
  }

  kiln::Tensor forward(const kiln::Tensor &x, const std::source_location &) override {
    kiln::Tensor h = norm1(kiln::add(x, selfAttn(x)));
    kiln::Tensor ff = linear2(gelu(linear1(h)));
    return norm2(kiln::add(h, ff));
  }
};

} // namespace

int main(int argc, char **argv) {
  try {
    kiln::manualSeed(7);
    EncoderBlock block(/*embed=*/64, /*heads=*/4, /*feedForward=*/256);
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
