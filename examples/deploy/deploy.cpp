//===- deploy.cpp - Example: run a compiled model, no compiler ------------===//
//
//   kiln_example_deploy ARTIFACT.kiln
//
// What a deployed program does with include/kiln/Executable.h only, linked
// to the runtime library (kiln::runtime: no LLVM, no compiler, no ONNX):
// load an artifact written by `kiln compile MODEL -o ARTIFACT.kiln`, run it
// on inputs in the program's own buffers (borrowed, not copied), write the
// outputs into the program's own buffers (runInto), and run it again from 4
// threads at once, each checked against the first run. Inputs follow a
// fixed pattern (sin(0.01 i)); exit status 1 on any kiln::Error or mismatch.
//
//===----------------------------------------------------------------------===//
#include "kiln/Executable.h"

#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <thread>

int main(int argc, char **argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: kiln_example_deploy ARTIFACT.kiln\n");
    return 2;
  }
  try {
    kiln::Executable exe = kiln::Executable::load(argv[1]);
    std::printf("loaded %s: %s\n", argv[1], exe.summary().c_str());

    // The program's input buffers, lent to Kiln for the runs.
    std::vector<std::vector<float>> buffers;
    std::vector<kiln::Tensor> inputs;
    for (const kiln::PortInfo &p : exe.inputs()) {
      if (p.dtype != kiln::DType::F32) {
        std::fprintf(stderr, "input '%s' is not f32; this example fills f32 inputs only\n",
                     p.name.c_str());
        return 1;
      }
      size_t n = 1;
      for (int64_t d : p.shape)
        n *= static_cast<size_t>(d);
      std::vector<float> &b = buffers.emplace_back(n);
      for (size_t i = 0; i < n; ++i)
        b[i] = static_cast<float>(std::sin(0.01 * static_cast<double>(i)));
      // A non-owning handle (shared_ptr's aliasing constructor over no
      // owner): the buffer outlives every run.
      std::shared_ptr<const void> view(std::shared_ptr<const void>(), b.data());
      inputs.push_back(kiln::Tensor::borrow(p.dtype, p.shape, view, b.data()));
    }

    // The program's output buffers, written by runInto.
    std::vector<kiln::Tensor> outputs;
    for (const kiln::PortInfo &p : exe.outputs())
      outputs.push_back(kiln::Tensor::zeros(p.dtype, p.shape));
    exe.runInto(inputs, outputs);
    for (size_t k = 0; k < outputs.size(); ++k) {
      double sum = 0;
      for (int64_t i = 0; i < outputs[k].numel(); ++i)
        sum += outputs[k].getDouble(i);
      std::printf("output %zu (%s): %s, sum %.6g\n", k, exe.outputs()[k].name.c_str(),
                  outputs[k].str().c_str(), sum);
    }

    std::atomic<bool> same = true;
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t)
      threads.emplace_back([&] {
        try {
          for (int r = 0; r < 10; ++r) {
            std::vector<kiln::Tensor> got = exe.run(inputs);
            for (size_t k = 0; k < got.size(); ++k)
              if (!got[k].bitwiseEqual(outputs[k]))
                same = false; // any thread's mismatch fails the example
          }
        } catch (const kiln::Error &e) {
          std::fprintf(stderr, "%s\n", e.what());
          same = false;
        }
      });
    for (std::thread &t : threads)
      t.join();
    if (!same) {
      std::fprintf(stderr, "a run from 4 threads differs from the first run\n");
      return 1;
    }
    std::printf("4 threads x 10 runs: outputs equal the first run\n");
    return 0;
  } catch (const kiln::Error &e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
}
