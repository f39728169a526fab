//===- embed.cpp - Example: Kiln inside an application ---------------------===//
//
//   kiln_example_embed MODEL ARTIFACT.kiln
//
// What a program embedding Kiln does, with include/kiln/kiln.h only: load a
// model (ONNX or .kir), compile it, save the compiled model as an artifact,
// load the artifact back (no compile), and run it from 8 threads at once on
// one Executable, checking every thread's outputs against a single-threaded
// run. Random inputs (seeded); exit status 1 on any kiln::Error or mismatch.
//
//===----------------------------------------------------------------------===//
#include "kiln/kiln.h"

#include <cstdio>
#include <cstring>
#include <thread>

int main(int argc, char **argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: kiln_example_embed MODEL ARTIFACT.kiln\n");
    return 2;
  }
  try {
    kiln::Model model = kiln::Model::load(argv[1]);
    kiln::Executable compiled = kiln::compile(model);
    std::printf("compiled %s: %s\n", argv[1], compiled.summary().c_str());
    compiled.save(argv[2]);
    kiln::Executable exe = kiln::Executable::load(argv[2]);
    std::printf("loaded %s\n", argv[2]);

    std::vector<kiln::Tensor> inputs;
    uint64_t seed = 1;
    for (const kiln::PortInfo &p : exe.inputs())
      inputs.push_back(kiln::randn(p.shape, seed++, p.dtype));
    const std::vector<kiln::Tensor> want = exe.run(inputs);

    std::vector<std::vector<kiln::Tensor>> got(8);
    std::vector<std::thread> threads;
    for (size_t t = 0; t < got.size(); ++t)
      threads.emplace_back([&, t] {
        for (int r = 0; r < 10; ++r)
          got[t] = exe.run(inputs);
      });
    for (std::thread &t : threads)
      t.join();
    for (size_t t = 0; t < got.size(); ++t)
      for (size_t k = 0; k < want.size(); ++k)
        if (got[t][k].byteSize() != want[k].byteSize() ||
            std::memcmp(got[t][k].rawData(), want[k].rawData(), want[k].byteSize()) != 0) {
          std::fprintf(stderr, "thread %zu: output %zu differs from the single-threaded run\n", t,
                       k);
          return 1;
        }
    std::printf("8 threads x 10 runs on one executable: outputs equal the single-threaded run\n");
    return 0;
  } catch (const kiln::Error &e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
}
