//===- OpTableTest.cpp - The op table ---------------------------*- C++ -*-===//
#include "ir/Graph.h"
#include "ir/Ops.h"

#include <gtest/gtest.h>
#include <set>

using namespace kiln;

TEST(OpTableTest, SortedByMnemonicAndUnique) {
  auto ops = allOps();
  ASSERT_EQ(ops.size(), kNumOps);
  for (size_t i = 1; i < ops.size(); ++i)
    EXPECT_LT(ops[i - 1].mnemonic, ops[i].mnemonic) << "Ops.def must stay sorted by mnemonic";
}

TEST(OpTableTest, LookupAndKinds) {
  for (const OpInfo &info : allOps()) {
    const OpInfo *found = lookupOp(info.mnemonic);
    ASSERT_NE(found, nullptr);
    EXPECT_EQ(found->kind, info.kind);
    EXPECT_EQ(&opInfo(info.kind), found);
    EXPECT_NE(info.infer, nullptr);
    EXPECT_NE(info.reference, nullptr);
  }
  EXPECT_EQ(lookupOp("no_such_op"), nullptr);
}

TEST(OpTableTest, SchemasHaveDefaultsOfTheirKind) {
  for (const OpInfo &info : allOps()) {
    ASSERT_EQ(info.defaults.size(), info.attrs.size()) << info.mnemonic;
    std::set<std::string_view> names;
    for (size_t i = 0; i < info.attrs.size(); ++i) {
      EXPECT_EQ(attrKind(info.defaults[i]), info.attrs[i].kind)
          << info.mnemonic << "." << info.attrs[i].name;
      EXPECT_TRUE(names.insert(info.attrs[i].name).second) << info.mnemonic;
    }
  }
}

TEST(OpTableTest, RequiredOpsArePresent) {
  // The ops the foundation issue names, by family.
  const char *required[] = {"neg",
                            "abs",
                            "exp",
                            "log",
                            "sqrt",
                            "rsqrt",
                            "reciprocal",
                            "sigmoid",
                            "tanh",
                            "relu",
                            "leaky_relu",
                            "elu",
                            "gelu",
                            "erf",
                            "sin",
                            "cos",
                            "floor",
                            "ceil",
                            "round",
                            "sign",
                            "clip",
                            "hard_sigmoid",
                            "hard_swish",
                            "softplus",
                            "not",
                            "cast",
                            "add",
                            "sub",
                            "mul",
                            "div",
                            "pow",
                            "max",
                            "min",
                            "equal",
                            "less",
                            "greater",
                            "and",
                            "or",
                            "where",
                            "reduce_sum",
                            "reduce_mean",
                            "reduce_max",
                            "reduce_min",
                            "reduce_prod",
                            "argmax",
                            "softmax",
                            "log_softmax",
                            "layer_norm",
                            "batch_norm",
                            "matmul",
                            "gemm",
                            "conv",
                            "conv_transpose",
                            "max_pool",
                            "avg_pool",
                            "global_avg_pool",
                            "reshape",
                            "transpose",
                            "flatten",
                            "squeeze",
                            "unsqueeze",
                            "concat",
                            "split",
                            "slice",
                            "gather",
                            "expand",
                            "pad",
                            "resize",
                            "constant",
                            "shape",
                            "constant_of_shape",
                            "range"};
  for (const char *m : required)
    EXPECT_NE(lookupOp(m), nullptr) << m;
}

TEST(OpTableTest, TypedViewsReadAttributes) {
  const OpInfo &t = opInfo(OpKind::Transpose);
  std::vector<Attribute> attrs = t.defaults;
  attrs[TransposeOp::perm_index] = std::vector<int64_t>{1, 0};
  EXPECT_EQ(TransposeOp(std::span<const Attribute>(attrs)).perm(), (std::vector<int64_t>{1, 0}));
  const OpInfo &g = opInfo(OpKind::Gemm);
  GemmOp gemm{std::span<const Attribute>(g.defaults)};
  EXPECT_EQ(gemm.alpha(), 1.0);
  EXPECT_FALSE(gemm.trans_b());
  EXPECT_EQ(ClipOp{std::span<const Attribute>(opInfo(OpKind::Clip).defaults)}.min(),
            -std::numeric_limits<double>::infinity());
  EXPECT_TRUE(opInfo(OpKind::Add).hasTrait(Elementwise | Commutative));
  EXPECT_TRUE(opInfo(OpKind::Reshape).hasTrait(DataMovement));
  EXPECT_FALSE(opInfo(OpKind::Sub).hasTrait(Commutative));
}
