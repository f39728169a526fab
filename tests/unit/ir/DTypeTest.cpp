//===- DTypeTest.cpp - The dtype table and conversions ----------*- C++ -*-===//
#include "ir/DType.h"
#include "ir/Type.h"

#include <cmath>
#include <gtest/gtest.h>

using namespace kiln;

TEST(DTypeTest, NamesRoundTrip) {
  for (unsigned i = 0; i < kNumDTypes; ++i) {
    DType t = static_cast<DType>(i);
    auto back = dtypeFromName(dtypeName(t));
    ASSERT_TRUE(back.has_value()) << dtypeName(t);
    EXPECT_EQ(*back, t);
  }
  EXPECT_FALSE(dtypeFromName("f31").has_value());
  EXPECT_EQ(kNumDTypes, 12u);
}

TEST(DTypeTest, SizesAndKinds) {
  EXPECT_EQ(dtypeSize(DType::F32), 4u);
  EXPECT_EQ(dtypeSize(DType::BF16), 2u);
  EXPECT_EQ(dtypeSize(DType::I64), 8u);
  EXPECT_EQ(dtypeSize(DType::Bool), 1u);
  EXPECT_TRUE(isFloat(DType::F16));
  EXPECT_FALSE(isFloat(DType::I32));
  EXPECT_TRUE(isSignedInt(DType::I8));
  EXPECT_FALSE(isSignedInt(DType::U8));
  EXPECT_FALSE(isInteger(DType::Bool));
  EXPECT_EQ(dtypeSize(DType::U16), 2u);
  EXPECT_FALSE(isSignedInt(DType::U32));
  EXPECT_TRUE(isSignedInt(DType::I16));
}

// The value range of every integer dtype and bool, from the size and sign
// columns of DTypes.def.
TEST(DTypeTest, IntegerRanges) {
  EXPECT_EQ(intLowest(DType::I8), -128);
  EXPECT_EQ(intHighest(DType::I8), 127);
  EXPECT_EQ(intLowest(DType::U8), 0);
  EXPECT_EQ(intHighest(DType::U8), 255);
  EXPECT_EQ(intLowest(DType::I16), -32768);
  EXPECT_EQ(intHighest(DType::I16), 32767);
  EXPECT_EQ(intHighest(DType::U16), 65535);
  EXPECT_EQ(intLowest(DType::I32), INT32_MIN);
  EXPECT_EQ(intHighest(DType::U32), int64_t(UINT32_MAX));
  EXPECT_EQ(intLowest(DType::I64), INT64_MIN);
  EXPECT_EQ(intHighest(DType::I64), INT64_MAX);
  EXPECT_EQ(intLowest(DType::Bool), 0);
  EXPECT_EQ(intHighest(DType::Bool), 1);
}

TEST(DTypeTest, HalfConversions) {
  EXPECT_EQ(floatToHalf(1.0f), 0x3c00);
  EXPECT_EQ(floatToHalf(-2.0f), 0xc000);
  EXPECT_EQ(floatToHalf(65504.0f), 0x7bff);
  EXPECT_EQ(floatToHalf(1e6f), 0x7c00); // overflow to inf
  EXPECT_EQ(halfToFloat(0x3555), 0.333251953125f);
  EXPECT_EQ(halfToFloat(0x0001), std::ldexp(1.0f, -24)); // smallest subnormal
  EXPECT_EQ(floatToHalf(std::ldexp(1.0f, -24)), 0x0001);
  EXPECT_TRUE(std::isnan(halfToFloat(floatToHalf(NAN))));
  // Round to nearest even: 1 + 2^-11 is halfway between 1 and 1 + 2^-10.
  EXPECT_EQ(floatToHalf(1.0f + std::ldexp(1.0f, -11)), 0x3c00);
  EXPECT_EQ(floatToHalf(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02);
  // Every half round-trips exactly through float.
  for (uint32_t h = 0; h < 0x10000; ++h) {
    if ((h & 0x7c00) == 0x7c00 && (h & 0x3ff))
      continue; // NaNs
    ASSERT_EQ(floatToHalf(halfToFloat(static_cast<uint16_t>(h))), h) << h;
  }
}

TEST(DTypeTest, BFloat16Conversions) {
  EXPECT_EQ(floatToBf16(1.0f), 0x3f80);
  EXPECT_EQ(bf16ToFloat(0x3f80), 1.0f);
  EXPECT_EQ(bf16ToFloat(floatToBf16(3.140625f)), 3.140625f);
  EXPECT_TRUE(std::isnan(bf16ToFloat(floatToBf16(NAN))));
}

TEST(TypeTest, ShapesAndTypes) {
  TensorType t(DType::F32, Shape{Dim(2), Dim::symbolic("N"), Dim::dynamic()});
  EXPECT_EQ(t.str(), "f32[2,N,?]");
  EXPECT_FALSE(t.isStatic());
  EXPECT_EQ(TensorType(DType::I64, std::vector<int64_t>{}).str(), "i64[]");
  EXPECT_EQ(numElements({2, 3, 4}), 24);
  EXPECT_EQ(numElements({}), 1);
  EXPECT_NE(Dim::symbolic("N"), Dim::symbolic("M"));
  EXPECT_EQ(Dim(3), Dim(3));
}
