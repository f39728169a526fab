//===- NpyTest.cpp - NumPy .npy files ---------------------------*- C++ -*-===//
#include "ir/Npy.h"

#include <gtest/gtest.h>

using namespace kiln;

TEST(NpyTest, EncodeParseRoundTrip) {
  DiagnosticEngine diag;
  for (DType t : {DType::F32, DType::F16, DType::F64, DType::I8, DType::U8, DType::I32, DType::I64,
                  DType::Bool}) {
    Tensor a = Tensor::fromDoubles(t, {2, 3}, {0, 1, 0, 1, 1, 0});
    std::string bytes = encodeNpy(a);
    EXPECT_EQ(bytes.substr(0, 6), "\x93NUMPY");
    EXPECT_EQ((bytes.size() - a.byteSize()) % 64, 0u); // header padded to 64
    auto b = parseNpy(bytes, "x.npy", diag);
    ASSERT_TRUE(b.succeeded()) << dtypeName(t);
    EXPECT_TRUE(b->bitwiseEqual(a)) << dtypeName(t);
  }
  Tensor s = Tensor::scalar(DType::F32, 3.5);
  auto back = parseNpy(encodeNpy(s), "s.npy", diag);
  ASSERT_TRUE(back.succeeded());
  EXPECT_EQ(back->rank(), 0);
  Tensor one = Tensor::fromDoubles(DType::F32, {1}, {2});
  EXPECT_NE(encodeNpy(one).find("'shape': (1,)"), std::string::npos);
}

TEST(NpyTest, MalformedFilesAreErrors) {
  DiagnosticEngine diag;
  ScopedDiagnosticCollector c(diag);
  EXPECT_TRUE(parseNpy("hello", "a.npy", diag).failed());
  Tensor a = Tensor::fromDoubles(DType::F32, {4}, {1, 2, 3, 4});
  std::string bytes = encodeNpy(a);
  EXPECT_TRUE(parseNpy(bytes.substr(0, bytes.size() - 3), "b.npy", diag).failed());
  std::string fortran = bytes;
  fortran.replace(fortran.find("False"), 5, "True ");
  EXPECT_TRUE(parseNpy(fortran, "c.npy", diag).failed());
  std::string bigEndian = bytes;
  bigEndian.replace(bigEndian.find("<f4"), 3, ">f4");
  EXPECT_TRUE(parseNpy(bigEndian, "d.npy", diag).failed());
  ASSERT_EQ(c.diagnostics().size(), 4u);
  EXPECT_NE(c.diagnostics()[1].message.find("truncated"), std::string::npos);
  EXPECT_NE(c.diagnostics()[2].message.find("Fortran"), std::string::npos);
  EXPECT_NE(c.diagnostics()[3].message.find("'>f4'"), std::string::npos);
}
