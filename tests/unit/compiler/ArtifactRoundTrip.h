//===- ArtifactRoundTrip.h - A compiled model through a .kiln file -*- C++ -*-===//
//
// For differential tests: saves a compiled executable as an artifact,
// loads it back (runtime/artifact/Artifact.h: the LLVM-free loader) and
// runs it on the same inputs. The loaded code is the JIT's own machine
// code and oneDNN rebuilds the same primitives, so at one thread its
// outputs must equal the in-process ones bit for bit; anything else is a
// loader bug (a relocation, a layout, a constant). Executables with a
// reference-kernel fallback step are skipped: they cannot be saved.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "codegen/Compiler.h"
#include "runtime/artifact/Artifact.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <unistd.h>

namespace kiln::testing {

/// Adds a failure naming `label` unless `exe` survives the round trip with
/// outputs bitwise equal to `want`.
inline void expectArtifactRoundTrip(const runtime::Executable &exe, std::span<const Tensor> inputs,
                                    const std::vector<Tensor> &want, const std::string &label) {
  const char *tmp = std::getenv("TMPDIR");
  std::string path = std::string(tmp && *tmp ? tmp : "/tmp") + "/kiln-roundtrip-XXXXXX";
  int fd = mkstemp(path.data());
  ASSERT_GE(fd, 0) << "cannot create " << path;
  close(fd);
  runtime::ArtifactInfo info;
  runtime::Status st = runtime::saveArtifact(exe, info, path);
  if (!st.ok()) {
    std::remove(path.c_str());
    ADD_FAILURE() << label << ": save: " << st.error;
    return;
  }
  std::unique_ptr<runtime::Executable> loaded;
  st = runtime::loadArtifact(path, loaded);
  std::remove(path.c_str()); // mapped: the bytes stay until the executable goes
  ASSERT_TRUE(st.ok()) << label << ": load: " << st.error;
  DiagnosticEngine diag;
  runtime::RunOptions options;
  options.threads = 1;
  auto got = codegen::runCompiled(*loaded, inputs, diag, options);
  ASSERT_TRUE(got.succeeded()) << label << ": the loaded artifact failed to run";
  ASSERT_EQ(got->size(), want.size()) << label;
  for (size_t k = 0; k < want.size(); ++k) {
    const Tensor &a = (*got)[k], &b = want[k];
    ASSERT_EQ(a.shape(), b.shape()) << label << " output " << k;
    ASSERT_EQ(a.dtype(), b.dtype()) << label << " output " << k;
    const size_t bytes = static_cast<size_t>(a.numel()) * dtypeSize(a.dtype());
    EXPECT_EQ(std::memcmp(a.rawData(), b.rawData(), bytes), 0)
        << label << " output " << k << ": the artifact's result differs from the JIT's";
  }
}

} // namespace kiln::testing
