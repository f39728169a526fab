//===- FusionTest.cpp - Fusion plans run against the reference interpreter ===//
//
// Differential tests of planFusion + lowerGroup + interpretKernel: a graph is
// planned, every Kernel group is lowered to a kernel (which must verify) and
// run with interpretKernel, Library and Fallback groups run their nodes'
// reference kernels, and the graph outputs must match the reference
// interpreter's. Graphs with only exact scalar semantics (Note [Scalar
// precision] in ir/ops/Scalar.cpp) and no reductions must match bit for bit;
// the others within per-dtype tolerances. Cases: every elementwise op in a
// broadcast chain for every dtype it accepts, every data movement op folded
// into a consumer and standing alone, reductions and normalizations with
// their producers and consumers, the transformer and resnet patterns,
// multi-consumer producers, library epilogues, fallbacks, and random graphs
// of random shapes and dtypes. The last test checks that every op of the
// table appeared in some case.
//
//===----------------------------------------------------------------------===//
#include "FusionTestUtil.h"
#include "ir/Parser.h"

using namespace kiln;
using namespace kiln::codegen;
using namespace kiln::codegen::fusiontest;

//===----------------------------------------------------------------------===//
// Elementwise ops in fused broadcast chains
//===----------------------------------------------------------------------===//

// Every elementwise op, for every dtype it accepts, as `consumer(op(x, y))`
// with x: [3,1,5] and y: [4,5] broadcasting to [3,4,5]: one kernel.
TEST(FusionDifferentialTest, EveryElementwiseOpInABroadcastChain) {
  for (const OpInfo &info : allOps()) {
    if (!info.hasTrait(Elementwise))
      continue;
    for (DType t : allDTypes()) {
      TestGraph tg;
      std::vector<Value *> operands;
      std::vector<std::vector<int64_t>> shapes = {{3, 1, 5}, {4, 5}, {3, 4, 1}};
      for (int i = 0; i < info.minOperands; ++i) {
        DType ot = info.kind == OpKind::Where && i == 0 ? DType::Bool : t;
        operands.push_back(tg.input(ot, shapes[static_cast<size_t>(i)]));
      }
      std::vector<NamedAttr> attrs;
      if (info.kind == OpKind::Cast)
        attrs.push_back({"to", t == DType::F32 ? DType::I32 : DType::F32});
      if (info.kind == OpKind::Clip)
        attrs = {{"min", -1.0}, {"max", 2.0}};
      auto n = tg.b.create(info.kind, operands, attrs);
      if (n.failed())
        continue; // the op does not take this dtype
      Value *r = (*n)->result(0);
      // A consumer in the same kernel: neg keeps the dtype where it can; a
      // storage dtype (only cast and selected) is cast to f32.
      Value *out = r;
      if (isStorageDType(r->type().dtype))
        out = tg.op(OpKind::Cast, {r}, {{"to", DType::F32}});
      else if (r->type().dtype != DType::Bool && r->type().dtype != DType::U8)
        out = tg.op(OpKind::Neg, {r});
      else if (r->type().dtype == DType::Bool)
        out = tg.op(OpKind::Not, {r});
      tg.outputs({out});
      InputOptions o;
      if (info.kind == OpKind::Div || info.kind == OpKind::Pow) {
        o.intLo = 1; // the reference rejects integer division by zero
        o.intHi = 4;
      }
      SCOPED_TRACE(std::string(info.mnemonic) + " " + std::string(dtypeName(t)));
      Result res = check(*tg.graph, o);
      EXPECT_EQ(res.numKernels, 1) << res.plan.explain();
    }
  }
}

// Casts between every pair of dtypes, on values that round, saturate and
// wrap.
TEST(FusionDifferentialTest, CastBetweenEveryPairOfDTypes) {
  for (DType from : allDTypes())
    for (DType to : allDTypes()) {
      TestGraph tg;
      Value *x = tg.input(from, {7, 3});
      tg.outputs({tg.op(OpKind::Cast, {x}, {{"to", to}})});
      InputOptions o;
      o.scale = 300;
      o.intLo = -300;
      o.intHi = 300;
      SCOPED_TRACE(std::string(dtypeName(from)) + " -> " + std::string(dtypeName(to)));
      check(*tg.graph, o);
    }
}

// A long chain with shared intermediates (the pointwise model's shape):
// one kernel, two outputs.
TEST(FusionDifferentialTest, PointwiseDagIsOneKernelWithTwoOutputs) {
  TestGraph tg;
  Value *x = tg.input(DType::F32, {1, 64, 96}, "x");
  Value *y = tg.input(DType::F32, {1, 64, 96}, "y");
  Value *a = tg.op(OpKind::Gelu, {x});
  Value *b = tg.op(OpKind::Mul, {tg.op(OpKind::Add, {y, a}), tg.op(OpKind::Sigmoid, {y})});
  Value *c = tg.op(OpKind::Mul, {tg.op(OpKind::Tanh, {b}),
                                 tg.op(OpKind::Sigmoid, {tg.op(OpKind::Sub, {a, y})})});
  Value *d = tg.op(OpKind::Add, {tg.op(OpKind::Mul, {tg.op(OpKind::Add, {c, x}), b}),
                                 tg.op(OpKind::Mul, {a, y})});
  Value *e = tg.op(OpKind::Sub,
                   {tg.op(OpKind::Mul, {tg.op(OpKind::Sigmoid, {d}), tg.op(OpKind::Gelu, {c})}),
                    tg.op(OpKind::Tanh, {d})});
  tg.outputs({tg.op(OpKind::Add, {tg.op(OpKind::Mul, {e, x}), d}), c});
  Result res = check(*tg.graph);
  EXPECT_EQ(res.numKernels, 1) << res.plan.explain();
  ASSERT_EQ(res.plan.groups.size(), 1u);
  EXPECT_EQ(res.plan.groups[0].outputs.size(), 2u);
}

//===----------------------------------------------------------------------===//
// Data movement: folded into consumers, alone, with several consumers
//===----------------------------------------------------------------------===//

namespace {

/// Checks `build(x)` three ways: as a copy kernel (alone), folded into an
/// elementwise consumer, and with two consumers in different kernels.
void checkIndexMap(DType t, std::vector<int64_t> shape,
                   const std::function<Value *(TestGraph &, Value *)> &build,
                   const InputOptions &o = {}) {
  {
    TestGraph tg;
    Value *x = tg.input(t, shape);
    tg.outputs({build(tg, x)});
    SCOPED_TRACE("alone");
    Result res = check(*tg.graph, o);
    EXPECT_EQ(res.numKernels, 1) << res.plan.explain();
  }
  {
    TestGraph tg;
    Value *x = tg.input(t, shape);
    Value *m = build(tg, x);
    Value *y = tg.input(t, staticSizes(m->type().shape));
    tg.outputs({tg.op(OpKind::Max, {m, y})});
    SCOPED_TRACE("folded");
    Result res = check(*tg.graph, o);
    EXPECT_EQ(res.numKernels, 1) << res.plan.explain();
  }
  {
    // Two consumers in different kernels (a reduction and a pointwise op):
    // the index map is recomputed in both.
    TestGraph tg;
    Value *x = tg.input(t, shape);
    Value *m = build(tg, x);
    Value *s = tg.op(OpKind::ReduceMax, {m}, {{"axes", Ints{0}}, {"keepdims", false}});
    tg.outputs({tg.op(OpKind::Abs, {m}), s});
    SCOPED_TRACE("two consumers");
    check(*tg.graph, o);
  }
}

} // namespace

TEST(FusionDifferentialTest, ReshapeFlattenSqueezeUnsqueeze) {
  for (DType t : {DType::F32, DType::I32, DType::F16}) {
    checkIndexMap(t, {4, 6, 5}, [](TestGraph &tg, Value *x) {
      return tg.op(OpKind::Reshape, {x}, {{"shape", Ints{8, 15}}});
    });
    checkIndexMap(t, {4, 6, 5}, [](TestGraph &tg, Value *x) {
      return tg.op(OpKind::Reshape, {x}, {{"shape", Ints{2, 2, 3, 10}}});
    });
    checkIndexMap(t, {2, 3, 4, 5}, [](TestGraph &tg, Value *x) {
      return tg.op(OpKind::Flatten, {x}, {{"axis", int64_t(2)}});
    });
    checkIndexMap(t, {3, 1, 5, 1}, [](TestGraph &tg, Value *x) {
      return tg.op(OpKind::Squeeze, {x}, {{"axes", Ints{1, 3}}});
    });
    checkIndexMap(t, {3, 5}, [](TestGraph &tg, Value *x) {
      return tg.op(OpKind::Unsqueeze, {x}, {{"axes", Ints{0, 2}}});
    });
  }
}

TEST(FusionDifferentialTest, TransposeExpandSlice) {
  for (DType t : {DType::F32, DType::I8, DType::BF16}) {
    checkIndexMap(t, {2, 3, 4, 5}, [](TestGraph &tg, Value *x) {
      return tg.op(OpKind::Transpose, {x}, {{"perm", Ints{2, 0, 3, 1}}});
    });
    checkIndexMap(t, {3, 1, 5}, [](TestGraph &tg, Value *x) {
      return tg.op(OpKind::Expand, {x}, {{"shape", Ints{2, 3, 4, 5}}});
    });
    checkIndexMap(t, {6, 7, 8}, [](TestGraph &tg, Value *x) {
      return tg.op(OpKind::Slice, {x},
                   {{"starts", Ints{1, -1, 0}},
                    {"ends", Ints{5, -8, 100}},
                    {"axes", Ints{0, 1, 2}},
                    {"steps", Ints{2, -2, 3}}});
    });
    checkIndexMap(t, {6, 7}, [](TestGraph &tg, Value *x) {
      return tg.op(OpKind::Slice, {x},
                   {{"starts", Ints{-100}}, {"ends", Ints{3}}, {"axes", Ints{-1}}});
    });
  }
}

TEST(FusionDifferentialTest, ConcatPadSplit) {
  for (DType t : {DType::F32, DType::I64}) {
    checkIndexMap(t, {3, 4, 5}, [](TestGraph &tg, Value *x) {
      Value *y = tg.op(OpKind::Neg, {x});
      Value *s =
          tg.op(OpKind::Slice, {x}, {{"starts", Ints{1}}, {"ends", Ints{3}}, {"axes", Ints{1}}});
      return tg.op(OpKind::Concat, {x, s, y}, {{"axis", int64_t(1)}});
    });
    for (const char *mode : {"constant", "edge", "reflect"}) {
      SCOPED_TRACE(mode);
      checkIndexMap(t, {3, 4, 5}, [&](TestGraph &tg, Value *x) {
        return tg.op(
            OpKind::Pad, {x},
            {{"pads", Ints{1, 0, 7, 2, 3, -1}}, {"mode", std::string(mode)}, {"value", 2.5}});
      });
    }
    checkIndexMap(t, {4, 9}, [](TestGraph &tg, Value *x) {
      auto parts = tg.ops(OpKind::Split, {x}, {{"axis", int64_t(1)}, {"sizes", Ints{2, 3, 4}}}, 3);
      // Results of one split used by different consumers.
      Value *a = tg.op(OpKind::Add, {parts[0], parts[0]});
      Value *b = tg.op(OpKind::Concat, {a, parts[2], parts[1]}, {{"axis", int64_t(1)}});
      return b;
    });
  }
}

TEST(FusionDifferentialTest, GatherWithConstantAndDynamicIndices) {
  checkIndexMap(DType::F32, {5, 4, 3}, [](TestGraph &tg, Value *x) {
    Value *idx = tg.constant(Tensor::fromInts(DType::I64, {2, 2}, {0, -1, 3, 1}));
    return tg.op(OpKind::Gather, {x, idx}, {{"axis", int64_t(1)}});
  });
  checkIndexMap(DType::F32, {5, 4, 3}, [](TestGraph &tg, Value *x) {
    Value *idx = tg.constant(Tensor::fromInts(DType::I64, {}, {2}));
    return tg.op(OpKind::Gather, {x, idx}, {{"axis", int64_t(0)}});
  });
  // An embedding lookup with token ids from a graph input.
  TestGraph tg;
  Value *table = tg.input(DType::F32, {10, 6});
  Value *ids = tg.input(DType::I32, {2, 7});
  Value *e = tg.op(OpKind::Gather, {table, ids});
  Value *pos = tg.input(DType::F32, {7, 6});
  tg.outputs({tg.op(OpKind::Add, {e, pos})});
  InputOptions o;
  o.intLo = -10;
  o.intHi = 9;
  Result res = check(*tg.graph, o);
  EXPECT_EQ(res.numKernels, 1);
}

// The index ops run on their reference kernels (F10 fallbacks) between
// kernels that produce their operands and consume their results.
TEST(FusionDifferentialTest, IndexOpsAsFallbacksBetweenKernels) {
  TestGraph tg;
  Value *x = tg.op(OpKind::Relu, {tg.input(DType::F32, {4, 6})});
  Value *idx = tg.input(DType::I64, {4, 3});
  Value *rows = tg.input(DType::I64, {3, 1});
  Value *u = tg.op(OpKind::Exp, {tg.input(DType::F32, {4, 3})});
  Value *ge = tg.op(OpKind::GatherElements, {x, idx}, {{"axis", int64_t(1)}});
  Value *se = tg.op(OpKind::ScatterElements, {x, idx, u},
                    {{"axis", int64_t(-1)}, {"reduction", std::string("add")}});
  Value *gn = tg.op(OpKind::GatherND, {x, rows});
  Value *sn = tg.op(OpKind::ScatterND, {x, rows, tg.op(OpKind::Neg, {gn})},
                    {{"reduction", std::string("min")}});
  std::vector<Value *> tk =
      tg.ops(OpKind::TopK, {tg.op(OpKind::Add, {x, x})}, {{"k", int64_t(2)}}, 2);
  tg.outputs({tg.op(OpKind::Mul, {ge, u}), tg.op(OpKind::Sqrt, {se}), sn, tk[0], tk[1]});
  InputOptions o;
  o.intLo = -4; // rows index 4 rows, columns 6 (negative ones from the end)
  o.intHi = 3;
  Result res = check(*tg.graph, o);
  EXPECT_EQ(res.numGroups(FusionGroup::Kind::Fallback), 5) << res.plan.explain();
}

TEST(FusionDifferentialTest, ResizeNearestAndLinear) {
  for (const char *ctm : {"half_pixel", "asymmetric", "align_corners", "pytorch_half_pixel",
                          "half_pixel_symmetric"}) {
    for (const char *nearest : {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"}) {
      SCOPED_TRACE(std::string(ctm) + " " + nearest);
      checkIndexMap(DType::F32, {1, 2, 3, 4}, [&](TestGraph &tg, Value *x) {
        return tg.op(OpKind::Resize, {x},
                     {{"scales", Floats{1.0, 1.0, 2.0, 1.5}},
                      {"coordinate_transformation_mode", std::string(ctm)},
                      {"nearest_mode", std::string(nearest)}});
      });
    }
    SCOPED_TRACE(std::string(ctm) + " linear");
    checkIndexMap(DType::F32, {1, 2, 3, 4}, [&](TestGraph &tg, Value *x) {
      return tg.op(OpKind::Resize, {x},
                   {{"sizes", Ints{1, 2, 7, 3}},
                    {"mode", std::string("linear")},
                    {"coordinate_transformation_mode", std::string(ctm)}});
    });
  }
}

//===----------------------------------------------------------------------===//
// Reductions and normalizations
//===----------------------------------------------------------------------===//

TEST(FusionDifferentialTest, ReductionsOverAnyAxesWithProducersAndConsumers) {
  std::vector<std::pair<Ints, bool>> axesCases = {{{-1}, true},    {{0}, false}, {{1}, true},
                                                  {{0, 2}, false}, {{}, true},   {{1, 2}, false}};
  for (OpKind k : {OpKind::ReduceSum, OpKind::ReduceMean, OpKind::ReduceMax, OpKind::ReduceMin,
                   OpKind::ReduceProd})
    for (DType t : {DType::F32, DType::I32, DType::F16})
      for (auto &[axes, keep] : axesCases) {
        TestGraph tg;
        Value *x = tg.input(t, {3, 5, 4});
        Value *y = tg.input(t, {5, 4});
        Value *p = tg.op(OpKind::Add, {tg.op(OpKind::Abs, {x}), y}); // fused producer
        Value *r = tg.op(k, {p}, {{"axes", axes}, {"keepdims", keep}});
        tg.outputs({tg.op(OpKind::Neg, {r})}); // per-row consumer
        InputOptions o;
        o.intLo = -3;
        o.intHi = 3;
        o.scale = 0.7;
        SCOPED_TRACE(std::string(opInfo(k).mnemonic) + " " + std::string(dtypeName(t)));
        Result res = check(*tg.graph, o);
        EXPECT_EQ(res.numKernels, 1) << res.plan.explain();
      }
}

TEST(FusionDifferentialTest, ArgMaxFirstAndLastWithNaNs) {
  for (DType t : {DType::F32, DType::I8})
    for (bool last : {false, true})
      for (int64_t axis : {0, 1, -1}) {
        TestGraph tg;
        Value *x = tg.input(t, {4, 6, 5});
        Value *r = tg.op(OpKind::ArgMax, {x},
                         {{"axis", axis}, {"keepdims", axis == 1}, {"select_last_index", last}});
        tg.outputs({r});
        InputOptions o;
        o.intLo = -2;
        o.intHi = 2; // many ties
        if (t == DType::F32) {
          std::vector<double> v(120);
          std::mt19937 rng(3);
          std::uniform_int_distribution<int> d(-2, 3);
          for (double &e : v)
            e = d(rng) == 3 ? std::nan("") : d(rng);
          o.fixed[0] = Tensor::fromDoubles(DType::F32, {120}, v).view({4, 6, 5});
        }
        check(*tg.graph, o);
      }
}

TEST(FusionDifferentialTest, SoftmaxWithScaleAndMaskIsOneKernel) {
  for (int64_t axis : {-1, 1}) {
    for (OpKind k : {OpKind::Softmax, OpKind::LogSoftmax}) {
      TestGraph tg;
      Value *s = tg.input(DType::F32, {2, 4, 9, 9});
      Value *mask = tg.input(DType::F32, {9, 9});
      Value *scaled = tg.op(OpKind::Mul, {s, tg.constant(Tensor::scalar(DType::F32, 0.125))});
      Value *sm = tg.op(k, {tg.op(OpKind::Add, {scaled, mask})}, {{"axis", axis}});
      tg.outputs({tg.op(OpKind::Cast, {sm}, {{"to", DType::F16}})});
      Result res = check(*tg.graph);
      EXPECT_EQ(res.numKernels, 1) << res.plan.explain();
    }
  }
}

TEST(FusionDifferentialTest, LayerNormWithResidualAddStoredForLater) {
  for (int64_t axis : {-1, -2}) {
    TestGraph tg;
    Value *a = tg.input(DType::F32, {2, 6, 16});
    Value *b = tg.input(DType::F32, {2, 16, 6});
    Value *bt = tg.op(OpKind::Transpose, {b}, {{"perm", Ints{0, 2, 1}}});
    Value *x = tg.op(OpKind::Add, {a, bt}, {}, "x");
    std::vector<int64_t> norm = axis == -1 ? std::vector<int64_t>{16} : std::vector<int64_t>{6, 16};
    Value *scale = tg.input(DType::F32, norm);
    Value *bias = tg.input(DType::F32, {16});
    Value *ln = tg.op(OpKind::LayerNorm, {x, scale, bias}, {{"axis", axis}}, "ln");
    // x is needed again after the norm (a residual): stored by the same
    // kernel.
    tg.outputs({ln, tg.op(OpKind::Exp, {x})});
    Result res = check(*tg.graph);
    EXPECT_LE(res.numKernels, 2) << res.plan.explain();
  }
}

TEST(FusionDifferentialTest, DecomposedLayerNormIsOneKernel) {
  TestGraph tg;
  Value *x = tg.input(DType::F32, {4, 7, 32});
  Value *w = tg.input(DType::F32, {32});
  Value *bias = tg.input(DType::F32, {32});
  Value *mean = tg.op(OpKind::ReduceMean, {x}, {{"axes", Ints{-1}}});
  Value *d = tg.op(OpKind::Sub, {x, mean});
  Value *var = tg.op(OpKind::ReduceMean, {tg.op(OpKind::Mul, {d, d})}, {{"axes", Ints{-1}}});
  Value *eps = tg.constant(Tensor::scalar(DType::F32, 1e-5));
  Value *den = tg.op(OpKind::Sqrt, {tg.op(OpKind::Add, {var, eps})});
  Value *y = tg.op(OpKind::Add, {tg.op(OpKind::Mul, {tg.op(OpKind::Div, {d, den}), w}), bias});
  tg.outputs({y});
  Result res = check(*tg.graph);
  EXPECT_EQ(res.numKernels, 1) << res.plan.explain();
}

TEST(FusionDifferentialTest, DecomposedSoftmaxIsOneKernel) {
  TestGraph tg;
  Value *x = tg.input(DType::F32, {6, 33});
  Value *m = tg.op(OpKind::ReduceMax, {x}, {{"axes", Ints{1}}});
  Value *e = tg.op(OpKind::Exp, {tg.op(OpKind::Sub, {x, m})});
  Value *s = tg.op(OpKind::ReduceSum, {e}, {{"axes", Ints{1}}});
  tg.outputs({tg.op(OpKind::Div, {e, s})});
  Result res = check(*tg.graph);
  EXPECT_EQ(res.numKernels, 1) << res.plan.explain();
}

TEST(FusionDifferentialTest, BatchNormIsElementwise) {
  TestGraph tg;
  Value *x = tg.input(DType::F32, {2, 3, 4, 5});
  std::vector<Value *> params;
  for (int i = 0; i < 4; ++i)
    params.push_back(tg.input(DType::F32, {3}));
  Value *bn = tg.op(OpKind::BatchNorm, {x, params[0], params[1], params[2], params[3]});
  tg.outputs({tg.op(OpKind::Relu, {bn})});
  InputOptions o;
  std::vector<double> var = {0.5, 1.5, 2.0};
  o.fixed[4] = Tensor::fromDoubles(DType::F32, {3}, var);
  Result res = check(*tg.graph, o);
  EXPECT_EQ(res.numKernels, 1) << res.plan.explain();
}

// A masked mean (the text classifier's pooling): reductions over different
// row spaces are separate kernels.
TEST(FusionDifferentialTest, MaskedMeanOverTwoRowSpaces) {
  TestGraph tg;
  Value *x = tg.input(DType::F32, {2, 8, 6});
  Value *ids = tg.input(DType::I64, {2, 8});
  Value *keep =
      tg.op(OpKind::Cast,
            {tg.op(OpKind::Unsqueeze,
                   {tg.op(OpKind::Not, {tg.op(OpKind::Equal, {ids, tg.constant(Tensor::fromInts(
                                                                       DType::I64, {}, {0}))})})},
                   {{"axes", Ints{-1}}})},
            {{"to", DType::F32}});
  Value *num = tg.op(OpKind::ReduceSum, {tg.op(OpKind::Mul, {x, keep})},
                     {{"axes", Ints{1}}, {"keepdims", false}});
  Value *den = tg.op(OpKind::ReduceSum, {keep}, {{"axes", Ints{1}}, {"keepdims", false}});
  tg.outputs({tg.op(OpKind::Div, {num, tg.op(OpKind::Clip, {den}, {{"min", 1.0}})})});
  InputOptions o;
  o.intLo = 0;
  o.intHi = 3;
  Result res = check(*tg.graph, o);
  EXPECT_EQ(res.numKernels, 2) << res.plan.explain();
}

//===----------------------------------------------------------------------===//
// Multi-consumer producers
//===----------------------------------------------------------------------===//

TEST(FusionDifferentialTest, CheapProducerIsRecomputedExpensiveOneMaterialized) {
  for (OpKind producer : {OpKind::Add, OpKind::Exp}) {
    TestGraph tg;
    Value *x = tg.input(DType::F32, {5, 12}, "x");
    Value *y = tg.input(DType::F32, {5, 12}, "y");
    Value *p = producer == OpKind::Add ? tg.op(OpKind::Add, {x, y}, {}, "p")
                                       : tg.op(OpKind::Exp, {x}, {}, "p");
    // Two consumers that cannot share a kernel: reductions over different
    // axes.
    Value *r0 = tg.op(OpKind::ReduceSum, {p}, {{"axes", Ints{0}}});
    Value *r1 = tg.op(OpKind::ReduceMax, {p}, {{"axes", Ints{1}}});
    tg.outputs({r0, r1});
    Result res = check(*tg.graph);
    std::string text = res.plan.explain();
    if (producer == OpKind::Add) {
      EXPECT_EQ(res.numKernels, 2) << text;
      EXPECT_NE(text.find("recomputed here"), std::string::npos) << text;
    } else {
      EXPECT_EQ(res.numKernels, 3) << text;
      EXPECT_NE(text.find("materialized"), std::string::npos) << text;
    }
  }
}

// Each result of a split feeds a library op: every result is stored, by
// one kernel per result (the first owns the split, the others recompute it).
TEST(FusionDifferentialTest, SplitResultsEachFeedALibraryOp) {
  TestGraph tg;
  Value *x = tg.input(DType::F32, {4, 9});
  Value *w = tg.input(DType::F32, {3, 5});
  auto parts = tg.ops(OpKind::Split, {tg.op(OpKind::Exp, {x})}, {{"axis", int64_t(1)}}, 3);
  std::vector<Value *> outs;
  for (Value *p : parts)
    outs.push_back(tg.op(OpKind::MatMul, {p, w}));
  tg.outputs(outs);
  Result res = check(*tg.graph);
  EXPECT_EQ(res.numGroups(FusionGroup::Kind::Library), 3) << res.plan.explain();
}

//===----------------------------------------------------------------------===//
// Library groups and fallbacks
//===----------------------------------------------------------------------===//

TEST(FusionDifferentialTest, ConvWithBiasResidualAddAndRelu) {
  TestGraph tg;
  Value *x = tg.input(DType::F32, {1, 4, 8, 8});
  Value *w1 = tg.input(DType::F32, {4, 4, 3, 3});
  Value *w2 = tg.input(DType::F32, {4, 4, 3, 3});
  Value *b = tg.input(DType::F32, {4});
  Value *c1 = tg.op(OpKind::Conv, {x, w1, b}, {{"pads", Ints{1, 1, 1, 1}}});
  Value *r1 = tg.op(OpKind::Relu, {c1});
  Value *c2 = tg.op(OpKind::Conv, {r1, w2, b}, {{"pads", Ints{1, 1, 1, 1}}});
  Value *sum = tg.op(OpKind::Add, {c2, x});
  tg.outputs({tg.op(OpKind::Relu, {sum})});
  Result res = check(*tg.graph);
  EXPECT_EQ(res.numGroups(FusionGroup::Kind::Library), 2) << res.plan.explain();
  EXPECT_EQ(res.plan.groups.size(), 2u) << res.plan.explain();
  ASSERT_FALSE(res.plan.groups.empty());
  EXPECT_EQ(res.plan.groups.back().nodes.size(), 3u); // conv, add, relu
}

TEST(FusionDifferentialTest, MatMulWithBiasFirstAndGeluEpilogue) {
  TestGraph tg;
  Value *x = tg.input(DType::F32, {1, 6, 8});
  Value *w = tg.input(DType::F32, {8, 5});
  Value *bias = tg.input(DType::F32, {5});
  Value *mm = tg.op(OpKind::MatMul, {x, w});
  Value *a = tg.op(OpKind::Add, {bias, mm});
  Value *g = tg.op(OpKind::Gelu, {a});
  // sub with the chain value second is not a post-op: it is a kernel.
  Value *s = tg.op(OpKind::Sub, {tg.input(DType::F32, {6, 5}), g});
  tg.outputs({s});
  Result res = check(*tg.graph);
  EXPECT_EQ(res.numGroups(FusionGroup::Kind::Library), 1) << res.plan.explain();
  EXPECT_EQ(res.numKernels, 1) << res.plan.explain();
}

TEST(FusionDifferentialTest, EveryLibraryAnchorWithAnEpilogue) {
  auto run = [](OpKind kind, std::vector<std::vector<int64_t>> shapes,
                std::vector<NamedAttr> attrs) {
    for (bool libs : {true, false}) {
      TestGraph tg;
      std::vector<Value *> ins;
      for (auto &s : shapes)
        ins.push_back(tg.input(DType::F32, s));
      Value *a = tg.op(kind, ins, attrs);
      Value *c = tg.op(OpKind::Clip, {a}, {{"min", -0.5}, {"max", 0.5}});
      tg.outputs({tg.op(OpKind::Sigmoid, {c})});
      FusionOptions fo = cpuFusion();
      fo.useLibraries = libs;
      SCOPED_TRACE(std::string(opInfo(kind).mnemonic) + (libs ? " library" : " fallback"));
      Result res = check(*tg.graph, {}, fo);
      EXPECT_EQ(res.numGroups(FusionGroup::Kind::Library), libs ? 1 : 0) << res.plan.explain();
      EXPECT_EQ(res.numGroups(FusionGroup::Kind::Fallback), libs ? 0 : 1) << res.plan.explain();
    }
  };
  run(OpKind::Conv, {{1, 2, 6, 6}, {3, 2, 3, 3}}, {});
  run(OpKind::ConvTranspose, {{1, 2, 4, 4}, {2, 3, 3, 3}}, {{"strides", Ints{2, 2}}});
  run(OpKind::MatMul, {{3, 4}, {4, 5}}, {});
  run(OpKind::Gemm, {{3, 4}, {5, 4}, {5}}, {{"trans_b", true}});
  run(OpKind::MaxPool, {{1, 2, 6, 6}}, {{"kernel", Ints{2, 2}}});
  run(OpKind::AvgPool, {{1, 2, 6, 6}}, {{"kernel", Ints{3, 3}}, {"strides", Ints{2, 2}}});
  run(OpKind::GlobalAvgPool, {{1, 2, 6, 6}}, {});
}

// A recurrent layer is a library group of its own with every result as an
// output (none takes an epilogue), or a fallback without libraries.
TEST(FusionDifferentialTest, RecurrentLayersAreLibraryGroupsWithEveryResult) {
  for (bool libs : {true, false}) {
    TestGraph tg;
    Value *x = tg.input(DType::F32, {5, 2, 3});
    Value *h0 = tg.input(DType::F32, {2, 2, 4});
    std::mt19937 rng(7);
    auto weights = [&](std::vector<int64_t> shape) {
      Tensor t = Tensor::zeros(DType::F32, shape);
      std::uniform_real_distribution<double> u(-0.5, 0.5);
      for (int64_t i = 0; i < t.numel(); ++i)
        t.setDouble(i, u(rng));
      return tg.constant(t);
    };
    std::vector<Value *> l = tg.ops(
        OpKind::Lstm, {x, weights({2, 16, 3}), weights({2, 16, 4}), weights({2, 32}), h0, h0},
        {{"direction", std::string("bidirectional")}}, 3);
    std::vector<Value *> g = tg.ops(OpKind::Gru, {x, weights({1, 12, 3}), weights({1, 12, 4})},
                                    {{"linear_before_reset", true}}, 2);
    std::vector<Value *> r =
        tg.ops(OpKind::Rnn, {x, weights({1, 4, 3}), weights({1, 4, 4}), weights({1, 8})},
               {{"direction", std::string("reverse")}}, 2);
    ASSERT_EQ(l.size() + g.size() + r.size(), 7u);
    tg.outputs({tg.op(OpKind::Relu, {l[0]}), l[1], l[2], g[0], tg.op(OpKind::Neg, {g[1]}), r[1]});
    FusionOptions fo = cpuFusion();
    fo.useLibraries = libs;
    Result res = check(*tg.graph, {}, fo);
    EXPECT_EQ(res.numGroups(FusionGroup::Kind::Library), libs ? 3 : 0) << res.plan.explain();
    EXPECT_EQ(res.numGroups(FusionGroup::Kind::Fallback), libs ? 0 : 3) << res.plan.explain();
    for (const FusionGroup &grp : res.plan.groups)
      if (grp.kind == FusionGroup::Kind::Library) {
        EXPECT_EQ(grp.nodes.size(), 1u) << res.plan.explain();
        EXPECT_EQ(grp.outputs.size(), grp.nodes.front()->numResults()) << res.plan.explain();
      }
  }
}

TEST(FusionDifferentialTest, ShapeRangeAndConstantOfShapeFallBack) {
  TestGraph tg;
  Value *x = tg.input(DType::F32, {3, 4});
  Value *shape = tg.op(OpKind::ShapeOf, {x});
  Value *r = tg.op(OpKind::Range, {}, {{"start", 0.0}, {"limit", 4.0}, {"dtype", DType::F32}});
  Value *c = tg.op(OpKind::ConstantOfShape, {}, {{"shape", Ints{3, 4}}, {"value", 2.0}});
  Value *i =
      tg.op(OpKind::Iota, {}, {{"shape", Ints{3, 4}}, {"axis", int64_t(0)}, {"dtype", DType::F32}});
  Value *y = tg.op(OpKind::Add, {tg.op(OpKind::Mul, {x, r}), tg.op(OpKind::Add, {c, i})});
  tg.outputs({y, tg.op(OpKind::Cast, {shape}, {{"to", DType::F32}})});
  DiagnosticEngine diag;
  ScopedDiagnosticCollector collect(diag);
  Result res = check(*tg.graph);
  EXPECT_EQ(res.numGroups(FusionGroup::Kind::Fallback), 4) << res.plan.explain();
  auto plan = planFusion(*tg.graph, cpuFusion(), diag);
  ASSERT_TRUE(plan.succeeded());
  // The planner records why; the compiler turns it into the warning.
  bool found = false;
  for (const FusionGroup &grp : plan->groups)
    found |=
        grp.kind == FusionGroup::Kind::Fallback && grp.reason == "no kernel lowering for 'range'";
  EXPECT_TRUE(found) << plan->explain();
}

// Nothing fuses across a region boundary: an if and a loop are groups of
// their own between the kernels around them (the compiler compiles their
// regions, or runs them on the reference kernel).
TEST(FusionDifferentialTest, RegionOpsAreGroupsOfTheirOwn) {
  auto region = [](const char *text) {
    DiagnosticEngine diag;
    auto g = parseRegion(text, diag);
    EXPECT_TRUE(g.succeeded());
    return g.succeeded() ? *g : nullptr;
  };
  GraphAttr twice = region(R"(graph @twice(%a: f32[4]) -> (f32[4]) {
  %b = add(%a, %a) : f32[4]
  return %b
})");
  GraphAttr negate = region(R"(graph @negate(%a: f32[4]) -> (f32[4]) {
  %b = neg(%a) : f32[4]
  return %b
})");
  GraphAttr body = region(R"(graph @body(%i: i64[], %c: bool[], %a: f32[4]) -> (bool[], f32[4]) {
  %b = add(%a, %a) : f32[4]
  return %c, %b
})");
  for (bool cond : {true, false}) {
    TestGraph tg;
    Value *x = tg.input(DType::F32, {4}, "x");
    Value *c = tg.constant(Tensor::fromInts(DType::Bool, {}, {cond ? 1 : 0}));
    Value *n = tg.constant(Tensor::fromInts(DType::I64, {}, {3}));
    Value *e = tg.op(OpKind::Exp, {x});
    Value *y = tg.op(OpKind::If, {c, e}, {{"then_branch", twice}, {"else_branch", negate}});
    Value *z = tg.op(OpKind::Loop, {n, c, tg.op(OpKind::Relu, {y})},
                     {{"body", body}, {"num_carried", int64_t(1)}});
    tg.outputs({tg.op(OpKind::Sin, {z})});
    Result res = check(*tg.graph);
    EXPECT_EQ(res.numGroups(FusionGroup::Kind::Fallback), 2) << res.plan.explain();
    EXPECT_EQ(res.numKernels, 3) << res.plan.explain();
  }
}

TEST(FusionDifferentialTest, DynamicShapesAreAnError) {
  Graph g;
  Value *x = g.addInput(TensorType(DType::F32, Shape{Dim::symbolic("N"), Dim(3)}), "x");
  DiagnosticEngine diag;
  Builder b(g, diag);
  g.setOutputs({b.createValue(OpKind::Relu, {x})});
  ScopedDiagnosticCollector collect(diag);
  EXPECT_TRUE(planFusion(g, cpuFusion(), diag).failed());
  EXPECT_NE(collect.str().find("fusion needs static shapes"), std::string::npos) << collect.str();
}

// nonzero's count is decided by the run (`?`): what reads it cannot be
// planned, and that is its whole differential case (the interpreter runs it;
// a nonzero of constants is folded before fusion).
TEST(FusionDifferentialTest, ValueDependentCountIsAnError) {
  TestGraph tg;
  Value *nz = tg.op(OpKind::NonZero, {tg.input(DType::F32, {2, 3})});
  tg.outputs({tg.op(OpKind::Neg, {nz})});
  DiagnosticEngine diag;
  ScopedDiagnosticCollector collect(diag);
  EXPECT_TRUE(planFusion(*tg.graph, cpuFusion(), diag).failed());
  EXPECT_NE(collect.str().find("fusion needs static shapes"), std::string::npos) << collect.str();
  covered().insert("nonzero");
}

TEST(FusionDifferentialTest, UnusedNodesAreNotComputed) {
  TestGraph tg;
  Value *x = tg.input(DType::F32, {4}, "x");
  tg.op(OpKind::Exp, {tg.op(OpKind::Neg, {x})}, {}, "dead");
  tg.outputs({tg.op(OpKind::Relu, {x})});
  Result res = check(*tg.graph);
  EXPECT_EQ(res.numKernels, 1);
  EXPECT_NE(res.plan.explain().find("unused: not computed"), std::string::npos);
}

//===----------------------------------------------------------------------===//
// Kernel shapes: inner loop choice, explain
//===----------------------------------------------------------------------===//

TEST(FusionLoweringTest, InnerLoopCollapsesContiguousDimsButKeepsBroadcastsInvariant) {
  TestGraph tg;
  Value *x = tg.input(DType::F32, {2, 8, 4, 4}, "x");
  Value *b = tg.input(DType::F32, {1, 8, 1, 1}, "b");
  Value *y = tg.input(DType::F32, {2, 8, 4, 4}, "y");
  tg.outputs({tg.op(OpKind::Add, {tg.op(OpKind::Mul, {x, y}), b})});
  DiagnosticEngine diag;
  auto plan = planFusion(*tg.graph, cpuFusion(), diag);
  ASSERT_TRUE(plan.succeeded());
  ASSERT_EQ(plan->groups.size(), 1u);
  auto k = lowerGroup(plan->groups[0], diag);
  ASSERT_TRUE(k.succeeded());
  // H*W collapse into the inner loop; the per-channel bias stays invariant.
  EXPECT_EQ(k->outer, (std::vector<int64_t>{2, 8}));
  EXPECT_EQ(k->inner, 16);
  check(*tg.graph);
}

TEST(FusionLoweringTest, ReshapesSimplifyToPlainOffsets) {
  TestGraph tg;
  Value *x = tg.input(DType::F32, {4, 6, 8}, "x");
  Value *r = tg.op(OpKind::Reshape, {x}, {{"shape", Ints{24, 8}}});
  Value *r2 = tg.op(OpKind::Reshape, {tg.op(OpKind::Relu, {r})}, {{"shape", Ints{4, 48}}});
  tg.outputs({r2});
  DiagnosticEngine diag;
  auto plan = planFusion(*tg.graph, cpuFusion(), diag);
  ASSERT_TRUE(plan.succeeded());
  auto k = lowerGroup(plan->groups[0], diag);
  ASSERT_TRUE(k.succeeded());
  // No div or rem survives: the load is at the store's offset.
  EXPECT_EQ(k->str().find("= div i64"), std::string::npos) << k->str();
  EXPECT_EQ(k->str().find("= rem i64"), std::string::npos) << k->str();
}

TEST(FusionLoweringTest, KernelTextAndHashAreDeterministic) {
  auto build = [](const char *name) {
    TestGraph tg;
    Value *x = tg.input(DType::F32, {8, 32}, name);
    tg.outputs({tg.op(OpKind::Softmax, {x}, {}, std::string(name) + "_out")});
    DiagnosticEngine diag;
    auto plan = planFusion(*tg.graph, cpuFusion(), diag);
    auto k = lowerGroup(plan->groups[0], diag);
    return k.take();
  };
  Kernel a = build("a"), b = build("b");
  EXPECT_EQ(a.hash(), b.hash()); // names are not part of the hash
  EXPECT_NE(a.str(), b.str());
  EXPECT_EQ(a.stages.size(), 3u);
  EXPECT_EQ(a.str(), build("a").str());
}

TEST(FusionLoweringTest, ExplainNamesNodesAndRules) {
  TestGraph tg;
  Value *x = tg.input(DType::F32, {4, 8}, "x");
  Value *w = tg.input(DType::F32, {8, 8}, "w");
  Value *mm = tg.op(OpKind::MatMul, {x, w}, {}, "mm");
  Value *r = tg.op(OpKind::Relu, {mm}, {}, "act");
  Value *t = tg.op(OpKind::Transpose, {r}, {{"perm", Ints{1, 0}}}, "t");
  tg.outputs({tg.op(OpKind::Exp, {t}, {}, "out")});
  DiagnosticEngine diag;
  auto plan = planFusion(*tg.graph, cpuFusion(), diag);
  ASSERT_TRUE(plan.succeeded());
  std::string text = plan->explain();
  EXPECT_NE(text.find("fuse %mm -> %act [F3 library epilogue]"), std::string::npos) << text;
  EXPECT_NE(text.find("fuse %t -> %out [F5 index map]"), std::string::npos) << text;
  EXPECT_NE(text.find("keep %act -> %t [F2 library anchor]"), std::string::npos) << text;
  EXPECT_NE(text.find("group 1 kernel: %t (transpose) %out (exp) <- %act -> %out"),
            std::string::npos)
      << text;
}

//===----------------------------------------------------------------------===//
// Random graphs
//===----------------------------------------------------------------------===//

namespace {

/// Builds a random graph of elementwise ops, index maps and reductions on
/// random (odd, broadcast) shapes of one dtype.
std::unique_ptr<TestGraph> randomGraph(std::mt19937 &rng, DType t) {
  auto tg = std::make_unique<TestGraph>();
  auto pick = [&](int n) { return std::uniform_int_distribution<int>(0, n - 1)(rng); };
  const int64_t dims[] = {1, 2, 3, 5, 7, 8};
  size_t rank = static_cast<size_t>(1 + pick(4));
  std::vector<int64_t> shape;
  for (size_t d = 0; d < rank; ++d)
    shape.push_back(dims[pick(6)]);
  std::vector<Value *> pool;
  for (int i = 0; i < 3; ++i) {
    std::vector<int64_t> s = shape;
    if (i > 0) { // broadcast variants
      for (int64_t &d : s)
        if (pick(3) == 0)
          d = 1;
      if (pick(2) == 0 && s.size() > 1)
        s.erase(s.begin());
    }
    pool.push_back(tg->input(t, s));
  }
  bool fl = isFloat(t);
  int steps = 4 + pick(8);
  for (int s = 0; s < steps; ++s) {
    Value *a = pool[static_cast<size_t>(pick(static_cast<int>(pool.size())))];
    Value *b = pool[static_cast<size_t>(pick(static_cast<int>(pool.size())))];
    std::vector<int64_t> as = staticSizes(a->type().shape);
    size_t ar = as.size();
    Value *r = nullptr;
    switch (pick(12)) {
    case 0:
    case 1: {
      OpKind ks[] = {OpKind::Add, OpKind::Sub, OpKind::Mul, OpKind::Max, OpKind::Min};
      r = tg->b.createValue(ks[pick(5)], {a, b});
      break;
    }
    case 2: {
      std::vector<OpKind> ks = {OpKind::Neg, OpKind::Abs, OpKind::Relu};
      if (fl)
        ks.insert(ks.end(), {OpKind::Tanh, OpKind::Sigmoid, OpKind::Sin, OpKind::Floor,
                             OpKind::LeakyRelu, OpKind::HardSwish});
      r = tg->b.createValue(ks[static_cast<size_t>(pick(static_cast<int>(ks.size())))], {a});
      break;
    }
    case 3: {
      Value *c = tg->b.createValue(OpKind::Greater, {a, b});
      r = c ? tg->b.createValue(OpKind::Where, {c, a, b}) : nullptr;
      break;
    }
    case 4: {
      Ints perm(ar);
      std::iota(perm.begin(), perm.end(), 0);
      std::shuffle(perm.begin(), perm.end(), rng);
      r = tg->b.createValue(OpKind::Transpose, {a}, {{"perm", perm}});
      break;
    }
    case 5:
      r = tg->b.createValue(OpKind::Reshape, {a}, {{"shape", Ints{-1}}});
      if (r && pick(2)) // and back to a shape of the same count
        r = tg->b.createValue(OpKind::Reshape, {r}, {{"shape", Ints(as.rbegin(), as.rend())}});
      break;
    case 6: {
      int64_t axis = pick(static_cast<int>(ar));
      int64_t dim = as[static_cast<size_t>(axis)];
      r = tg->b.createValue(
          OpKind::Slice, {a},
          {{"starts", Ints{dim > 1 ? 1 : 0}}, {"ends", Ints{dim}}, {"axes", Ints{axis}}});
      if (r && dim > 1) // pad it back so it still broadcasts
        r = tg->b.createValue(OpKind::Pad, {r},
                              {{"pads",
                                [&] {
                                  Ints p(2 * ar, 0);
                                  p[static_cast<size_t>(axis)] = 1;
                                  return p;
                                }()},
                               {"mode", std::string(pick(2) ? "edge" : "reflect")}});
      break;
    }
    case 7: {
      int64_t axis = pick(static_cast<int>(ar));
      Value *c = tg->b.createValue(OpKind::Concat, {a, a}, {{"axis", axis}});
      r = c ? tg->b.createValue(OpKind::Slice, {c},
                                {{"starts", Ints{1}},
                                 {"ends", Ints{1 + as[static_cast<size_t>(axis)]}},
                                 {"axes", Ints{axis}}})
            : nullptr;
      break;
    }
    case 8: {
      // A reduction broadcast back against a full value.
      OpKind ks[] = {OpKind::ReduceSum, OpKind::ReduceMax, OpKind::ReduceMean, OpKind::ReduceMin};
      Value *red =
          tg->b.createValue(ks[pick(4)], {a}, {{"axes", Ints{static_cast<int64_t>(ar) - 1}}});
      r = red ? tg->b.createValue(OpKind::Sub, {a, red}) : nullptr;
      break;
    }
    case 9:
      if (fl)
        r = tg->b.createValue(pick(2) ? OpKind::Softmax : OpKind::LogSoftmax, {a},
                              {{"axis", static_cast<int64_t>(pick(static_cast<int>(ar)))}});
      break;
    case 10:
      if (fl && ar >= 1) {
        std::vector<int64_t> last{as.back()};
        Value *scale = tg->input(t, last);
        r = tg->b.createValue(OpKind::LayerNorm, {a, scale});
      }
      break;
    case 11:
      r = tg->b.createValue(OpKind::Expand, {a}, {{"shape", Ints(shape.begin(), shape.end())}});
      break;
    }
    if (r)
      pool.push_back(r);
  }
  // Outputs: the last value and a random earlier one (stored mid-kernel).
  std::vector<Value *> outs{pool.back()};
  if (pool.size() > 4) {
    Value *mid = pool[static_cast<size_t>(3 + pick(static_cast<int>(pool.size()) - 4))];
    if (mid->definingNode())
      outs.push_back(mid);
  }
  tg->outputs(outs);
  return tg;
}

} // namespace

TEST(FusionDifferentialTest, RandomGraphs) {
  std::mt19937 rng(2024);
  DType types[] = {DType::F32, DType::F32, DType::F64, DType::F16, DType::I32, DType::I8};
  for (int i = 0; i < 300; ++i) {
    DType t = types[i % 6];
    auto tg = randomGraph(rng, t);
    InputOptions o;
    o.scale = 1.0;
    SCOPED_TRACE("random graph " + std::to_string(i) + " (" + std::string(dtypeName(t)) + ")");
    check(*tg->graph, o, {}, static_cast<unsigned>(i));
    if (::testing::Test::HasFailure())
      break;
  }
}

// Without fusion every node is its own group, and the plan still runs.
TEST(FusionDifferentialTest, RandomGraphsUnfused) {
  std::mt19937 rng(7);
  FusionOptions fo = cpuFusion();
  fo.fuse = false;
  for (int i = 0; i < 60; ++i) {
    DType t = i % 2 ? DType::F32 : DType::I32;
    auto tg = randomGraph(rng, t);
    SCOPED_TRACE("random graph " + std::to_string(i));
    Result res = check(*tg->graph, {}, fo, static_cast<unsigned>(i));
    for (const FusionGroup &g : res.plan.groups)
      EXPECT_EQ(g.nodes.size() + g.recomputed.size(), 1u) << res.plan.explain();
    if (::testing::Test::HasFailure())
      break;
  }
}

// Last: every op of the table appeared in some differential case above.
TEST(FusionDifferentialTest, ZZEveryOpOfTheTableIsCovered) {
  std::vector<std::string> missing;
  for (const OpInfo &info : allOps())
    if (!covered().count(std::string(info.mnemonic)))
      missing.push_back(std::string(info.mnemonic));
  EXPECT_TRUE(missing.empty()) << "ops without a differential case: "
                               << ::testing::PrintToString(missing);
}
