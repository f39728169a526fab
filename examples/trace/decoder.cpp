//===- decoder.cpp - Example: control flow a trace keeps --------*- C++ -*-===//
//
// A small recurrent decoder written with kiln::whileLoop and kiln::cond:
// it steps a tanh cell, feeding back its own output, until the output's
// norm falls below a threshold or 12 steps ran (the step count depends on
// the input's values), and it damps the state on every step whose input
// is large (a data-dependent branch). A C++ `while` or `if` on these values
// would be frozen by the trace; the combinators keep them as a `loop` with
// an `if` inside. The trace is checked on two other inputs, which take
// other trip counts and branches, and then runs like the other examples.
//
//   kiln_example_decoder                 print the IR (locations, weights elided)
//   kiln_example_decoder -o decoder.kir  write the IR with locations and weights
//
//===----------------------------------------------------------------------===//
#include "examples/trace/ExampleSupport.h"
#include "kiln/Modules.h"
#include "kiln/Trace.h"

#include <cstdio>

namespace {

struct Decoder {
  kiln::nn::Linear cell{8, 8};
  kiln::nn::Linear out{8, 8};

  kiln::Tensor operator()(const kiln::Tensor &x) {
    using Tensors = std::vector<kiln::Tensor>;
    kiln::Tensor limit = kiln::scalar(12, kiln::DType::I64);
    // Carried: the step, the state, the output.
    Tensors init = {kiln::scalar(0, kiln::DType::I64), x, out(x)};
    Tensors last = kiln::whileLoop(
        [&](const Tensors &c) {
          kiln::Tensor big =
              kiln::greater(kiln::reduce_sum(kiln::mul(c[2], c[2])), kiln::scalar(1.0));
          return kiln::logical_and(big, kiln::less(c[0], limit));
        },
        [&](const Tensors &c) {
          kiln::Tensor h = kiln::tanh(kiln::add(cell(c[2]), c[1]));
          kiln::Tensor large = kiln::greater(kiln::reduce_max(kiln::abs(h)), kiln::scalar(0.9));
          h = kiln::cond(
              large, [](const Tensors &a) { return Tensors{kiln::mul(a[0], kiln::scalar(0.5))}; },
              [](const Tensors &a) { return Tensors{a[0]}; }, {h})[0];
          kiln::Tensor step = kiln::add(c[0], kiln::scalar(1, kiln::DType::I64));
          return Tensors{step, h, kiln::mul(out(h), kiln::scalar(0.8))};
        },
        init);
    return kiln::concat(
        {last[2], kiln::cast(kiln::reshape(last[0], {.shape = {1, 1}}), {.to = kiln::DType::F32})},
        {.axis = 1});
  }
};

} // namespace

int main(int argc, char **argv) {
  try {
    kiln::manualSeed(7);
    Decoder model;
    kiln::Tensor x = kiln::randn({1, 8}, /*seed=*/1);
    kiln::Tensor eager = model(x);
    auto graph =
        kiln::trace([&](const kiln::Tensor &in) { return model(in); }, {x},
                    {.inputNames = {"x"},
                     .outputNames = {"y"},
                     .graphName = "decoder",
                     .checkInputs = {{kiln::mul(kiln::randn({1, 8}, 2), kiln::scalar(3.0))},
                                     {kiln::mul(kiln::randn({1, 8}, 3), kiln::scalar(0.01))}}});
    return example::finish("decoder", argc, argv, *graph, {x}, eager, [&] { return model(x); });
  } catch (const kiln::Error &e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
}
