//===- TensorTest.cpp - Host tensors ----------------------------*- C++ -*-===//
#include "ir/Tensor.h"

#include <cmath>
#include <cstdint>
#include <gtest/gtest.h>

using namespace kiln;

TEST(TensorTest, ZerosAreAlignedAndZero) {
  Tensor t = Tensor::zeros(DType::F32, {3, 5});
  EXPECT_EQ(t.numel(), 15);
  EXPECT_EQ(t.byteSize(), 60u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(t.rawData()) % 64, 0u);
  for (int64_t i = 0; i < t.numel(); ++i)
    EXPECT_EQ(t.getDouble(i), 0.0);
  EXPECT_EQ(t.strides(), (std::vector<int64_t>{5, 1}));
}

TEST(TensorTest, ConversionsPerDType) {
  Tensor i8 = Tensor::fromDoubles(DType::I8, {3}, {1.9, -200, 300});
  EXPECT_EQ(i8.toInts(), (std::vector<int64_t>{1, -128, 127})); // truncate, saturate
  Tensor u8 = Tensor::fromInts(DType::U8, {2}, {255, 7});
  EXPECT_EQ(u8.getInt(0), 255);
  Tensor b = Tensor::fromDoubles(DType::Bool, {3}, {0.0, 2.0, -0.5});
  EXPECT_EQ(b.toInts(), (std::vector<int64_t>{0, 1, 1}));
  Tensor h = Tensor::fromDoubles(DType::F16, {2}, {0.5, 1e6});
  EXPECT_EQ(h.getDouble(0), 0.5);
  EXPECT_TRUE(std::isinf(h.getDouble(1)));
  Tensor i64 = Tensor::fromInts(DType::I64, {1}, {INT64_MAX});
  EXPECT_EQ(i64.getInt(0), INT64_MAX);
  Tensor nanToInt = Tensor::fromDoubles(DType::I32, {1}, {NAN});
  EXPECT_EQ(nanToInt.getInt(0), 0);
}

TEST(TensorTest, ViewsShareStorage) {
  Tensor t = Tensor::fromDoubles(DType::F32, {2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor v = t.view({3, 2});
  EXPECT_EQ(v.rawData(), t.rawData());
  EXPECT_EQ(v.shape(), (std::vector<int64_t>{3, 2}));
  Tensor c = t.clone();
  EXPECT_NE(c.rawData(), t.rawData());
  EXPECT_TRUE(c.bitwiseEqual(t));
  EXPECT_FALSE(c.bitwiseEqual(v)); // shapes differ
}

TEST(TensorTest, BorrowKeepsOwnerAlive) {
  auto owner = std::make_shared<std::vector<float>>(std::vector<float>{1.5f, 2.5f});
  Tensor t = Tensor::borrow(DType::F32, {2}, owner, owner->data());
  std::weak_ptr<std::vector<float>> weak = owner;
  owner.reset();
  EXPECT_FALSE(weak.expired());
  EXPECT_EQ(t.getDouble(1), 2.5);
}

TEST(TensorTest, Splat) {
  EXPECT_TRUE(Tensor::fromDoubles(DType::F32, {3}, {2, 2, 2}).isSplat());
  EXPECT_FALSE(Tensor::fromDoubles(DType::F32, {3}, {2, 2, 1}).isSplat());
  EXPECT_TRUE(Tensor::scalar(DType::I64, 4).isSplat());
}
