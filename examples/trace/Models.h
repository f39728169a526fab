//===- Models.h - The models of the tracing examples ------------*- C++ -*-===//
//
// Two models written against the public API only (include/kiln): an MLP and
// a transformer encoder block. mlp.cpp and transformer_block.cpp trace and
// run them; tests/unit/frontend checks that their traces equal eager.
//
// A model is a kiln::nn::Module: its layers are members registered by name
// (the names prefix the parameters: fc1.weight, self_attn.in_proj_weight),
// and forward() is plain C++ over eager calls.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "kiln/Modules.h"

namespace example {

/// 256 -> 128 -> 64 -> 10 with ReLU, then softmax over the classes.
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

/// A post-norm transformer encoder block: PyTorch's TransformerEncoderLayer
/// with batch_first=True, activation GELU and no dropout, with its
/// parameter names, so its state_dict saved as .npy files loads as is.
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
    registerModule("gelu", gelu);
  }

  kiln::Tensor forward(const kiln::Tensor &x, const std::source_location &) override {
    kiln::Tensor h = norm1(kiln::add(x, selfAttn(x)));
    kiln::Tensor ff = linear2(gelu(linear1(h)));
    return norm2(kiln::add(h, ff));
  }
};

} // namespace example
