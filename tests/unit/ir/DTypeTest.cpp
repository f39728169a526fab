//===- DTypeTest.cpp - The dtype table and conversions ----------*- C++ -*-===//
#include "ir/DType.h"
#include "ir/DTypeCodec.h"
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
  EXPECT_EQ(kNumDTypes, 21u);
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
  // The sub-byte storage integers, from the bits column.
  EXPECT_EQ(intLowest(DType::I4), -8);
  EXPECT_EQ(intHighest(DType::I4), 7);
  EXPECT_EQ(intHighest(DType::U4), 15);
  EXPECT_EQ(intLowest(DType::I2), -2);
  EXPECT_EQ(intHighest(DType::U2), 3);
  EXPECT_EQ(dtypeSize(DType::I4), 1u);
  EXPECT_TRUE(isStorageDType(DType::U2));
  EXPECT_FALSE(isStorageDType(DType::I8));
}

// i4 and friends: an integer wraps into them, a float truncates and
// saturates (as every Kiln integer, docs/NUMERICS.md).
TEST(DTypeTest, SubByteIntegers) {
  EXPECT_EQ(wrapThroughDType(DType::I4, 8), -8);
  EXPECT_EQ(wrapThroughDType(DType::I4, -9), 7);
  EXPECT_EQ(wrapThroughDType(DType::U4, 17), 1);
  EXPECT_EQ(wrapThroughDType(DType::I2, 2), -2);
  EXPECT_EQ(wrapThroughDType(DType::U2, -1), 3);
  EXPECT_EQ(floatThroughDType(DType::I4, 9.7), 7);
  EXPECT_EQ(floatThroughDType(DType::I4, -100.0), -8);
  EXPECT_EQ(floatThroughDType(DType::I4, -2.9), -2);
  EXPECT_EQ(floatThroughDType(DType::U2, 5.0), 3);
  EXPECT_EQ(floatThroughDType(DType::U4, NAN), 0);
}

// The mini floats against values from ml_dtypes and ONNX's reference
// (onnx.numpy_helper.saturate_cast): largest values, ties to even in the
// normal and subnormal ranges, saturation, NaN and inf codes, no -0 in the
// fnuz formats; and every code round-trips.
TEST(DTypeTest, MiniFloats) {
  EXPECT_EQ(miniFloatMax(kF8E4M3FN), 448.0f);
  EXPECT_EQ(miniFloatMax(kF8E4M3FNUZ), 240.0f);
  EXPECT_EQ(miniFloatMax(kF8E5M2), 57344.0f);
  EXPECT_EQ(miniFloatMax(kF8E5M2FNUZ), 57344.0f);
  EXPECT_EQ(miniFloatMax(kF4E2M1FN), 6.0f);
  EXPECT_EQ(floatToMiniFloat(kF8E4M3FN, 448.0f), 0x7e);
  EXPECT_EQ(floatToMiniFloat(kF8E4M3FN, 464.0f), 0x7e); // tie: 448 is even
  EXPECT_EQ(floatToMiniFloat(kF8E4M3FN, 1e6f), 0x7e);   // saturates
  EXPECT_EQ(floatToMiniFloat(kF8E4M3FN, -INFINITY), 0xfe);
  EXPECT_EQ(floatToMiniFloat(kF8E4M3FN, NAN), 0x7f);
  EXPECT_EQ(floatToMiniFloat(kF8E4M3FN, 0.47892547f), 0x2f); // ONNX's cast test
  EXPECT_EQ(floatToMiniFloat(kF8E4M3FN, 0.81910545f), 0x35);
  EXPECT_EQ(floatToMiniFloat(kF8E4M3FN, std::ldexp(1.0f, -10)), 0x00); // half the step: even
  EXPECT_EQ(floatToMiniFloat(kF8E4M3FN, 3 * std::ldexp(1.0f, -10)), 0x02);
  EXPECT_EQ(floatToMiniFloat(kF8E4M3FN, -0.0f), 0x80);
  EXPECT_EQ(floatToMiniFloat(kF8E4M3FNUZ, -0.0f), 0x00);  // no -0
  EXPECT_EQ(floatToMiniFloat(kF8E4M3FNUZ, -1e-7f), 0x00); // rounds to 0, no -0
  EXPECT_EQ(floatToMiniFloat(kF8E4M3FNUZ, NAN), 0x80);
  EXPECT_EQ(floatToMiniFloat(kF8E4M3FNUZ, INFINITY), 0x7f); // 240, saturated
  EXPECT_EQ(floatToMiniFloat(kF8E5M2, 59391.0f), 0x7b);
  EXPECT_EQ(floatToMiniFloat(kF8E5M2, INFINITY), 0x7c); // kept: e5m2 has inf
  EXPECT_EQ(floatToMiniFloat(kF8E5M2, -INFINITY), 0xfc);
  EXPECT_EQ(floatToMiniFloat(kF8E5M2, 1e9f), 0x7b);
  EXPECT_EQ(floatToMiniFloat(kF8E5M2FNUZ, NAN), 0x80);
  EXPECT_EQ(floatToMiniFloat(kF4E2M1FN, 0.25f), 0x0);  // tie: 0 is even
  EXPECT_EQ(floatToMiniFloat(kF4E2M1FN, -3.5f), 0xe);  // tie: 4 is even
  EXPECT_EQ(floatToMiniFloat(kF4E2M1FN, 100.0f), 0x7); // 6
  EXPECT_EQ(floatToMiniFloat(kF4E2M1FN, NAN), 0x8);    // no NaN: -0, as ml_dtypes
  EXPECT_TRUE(std::isnan(miniFloatToFloat(kF8E4M3FN, 0xff)));
  EXPECT_TRUE(std::isnan(miniFloatToFloat(kF8E5M2FNUZ, 0x80)));
  EXPECT_EQ(miniFloatToFloat(kF8E5M2, 0xfc), -INFINITY);
  EXPECT_EQ(miniFloatToFloat(kF8E4M3FN, 0x01), std::ldexp(1.0f, -9)); // smallest subnormal
  EXPECT_EQ(miniFloatToFloat(kF8E5M2FNUZ, 0x01), std::ldexp(1.0f, -17));
  for (const MiniFloatFormat *f : {&kF8E4M3FN, &kF8E4M3FNUZ, &kF8E5M2, &kF8E5M2FNUZ, &kF4E2M1FN})
    for (unsigned c = 0; c < (1u << (1 + f->expBits + f->manBits)); ++c) {
      const float v = miniFloatToFloat(*f, static_cast<uint8_t>(c));
      if (std::isnan(v))
        ASSERT_EQ(floatToMiniFloat(*f, v), miniFloatNaN(*f, std::signbit(v))) << c;
      else
        ASSERT_EQ(floatToMiniFloat(*f, v), c) << c;
    }
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
