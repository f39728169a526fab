//===- TraceOpsTest.cpp - Every op: traced, interpreted, equal to eager ---===//
//
// Driven by the op table: each op of ir/Ops.def must have a case (a small
// valid input set and a function calling the op's eager function). An
// elementwise op of one or two operands gets one from the table
// (tableCases(): its eager function with default attributes, on the first
// of f32, bool and i32 inputs it accepts); opCases() adds by hand the ops
// that need attributes or inputs of their own, and the overloads and
// attributes worth a second call. For each case the function is run eagerly
// and traced; the traced graph must verify, contain the op, and give on the
// reference interpreter exactly the eager outputs. An op without a case
// fails the test.
//
//===----------------------------------------------------------------------===//
#include "ir/Interpreter.h"
#include "ir/Parser.h"
#include "ir/Printer.h"
#include "ir/Verifier.h"
#include "kiln/Trace.h"

#include <gtest/gtest.h>

#include <functional>
#include <map>

namespace kiln {
namespace {

using Ins = std::vector<Tensor>;
using Outs = std::vector<Tensor>;

struct OpCase {
  Ins inputs;
  std::function<Outs(const Ins &)> fn;
};

Tensor normal(std::vector<int64_t> shape, uint64_t seed) {
  return randn(std::move(shape), seed);
}
/// Values in [0.5, 2): safe for log, sqrt, division.
Tensor positive(std::vector<int64_t> shape, uint64_t seed) {
  return uniform(std::move(shape), 0.5, 2.0, seed);
}
Tensor boolean(std::vector<double> values) {
  int64_t n = static_cast<int64_t>(values.size());
  return tensor(values, {n}, DType::Bool);
}

/// Calls `fn` with the first `Arity` inputs (Arity 1 or 2).
template <int Arity, typename Fn> Outs callWith(Fn fn, const Ins &in) {
  if constexpr (Arity == 1)
    return {fn(in[0])};
  else if constexpr (Arity == 2)
    return {fn(in[0], in[1])};
  else
    return {};
}

/// A case for every elementwise op of one or two operands and one result:
/// its eager function with default attributes on the first input set it
/// accepts: f32 values of both signs, most inside [-1, 1] and (0, 2) (the
/// domains of acos, asin, log, sqrt), the binary ones broadcasting a row
/// that equals two of them (equal, less, ...); then bools; then i32 values
/// around the shift widths.
std::map<std::string, OpCase> tableCases() {
  const Tensor x = tensor({0.5, 1.5, 0.25, -0.7, 1.9, -1.2}, {2, 3});
  const std::vector<Ins> candidates[3] = {
      {{x}, {x, tensor({0.5, 2.0, 0.25}, {3})}},
      {{boolean({1, 0, 1, 0})}, {boolean({1, 0, 1, 0}), boolean({1, 1, 0, 0})}},
      {{Tensor::fromInts(DType::I32, {2, 3}, {-7, 0, 5, 12, -1, 255})},
       {Tensor::fromInts(DType::I32, {2, 3}, {-7, 0, 5, 12, -1, 255}),
        Tensor::fromInts(DType::I32, {2, 3}, {3, -2, 6, 10, 1, -256})}},
  };
  std::map<std::string, OpCase> c;
  auto addCase = [&](const char *mnemonic, int arity, int numResults,
                     std::function<Outs(const Ins &)> fn) {
    if (arity < 1 || arity > 2 || numResults != 1 || !lookupOp(mnemonic)->hasTrait(Elementwise))
      return;
    for (const std::vector<Ins> &set : candidates) {
      const Ins &in = set[static_cast<size_t>(arity - 1)];
      try {
        fn(in);
      } catch (const Error &) {
        continue; // a dtype the op refuses
      }
      c[mnemonic] = {in, fn};
      return;
    }
  };
#define OP(Class, Mnemonic, MinOps, MaxOps, NumResults, ...)                                       \
  addCase(Mnemonic, MinOps == MaxOps ? MinOps : 0, NumResults, [](const Ins &in) -> Outs {         \
    return callWith < MinOps == MaxOps                                                             \
               ? MinOps                                                                            \
               : 0 > ([](const auto &...x) { return KILN_EAGER_FN_##Class(x...); }, in);           \
  });
#include "ir/Ops.def"
  return c;
}

/// The one graph of `text`, as a region attribute.
GraphAttr region(const char *text) {
  DiagnosticEngine diag;
  ScopedDiagnosticCollector collect(diag);
  auto g = parseRegion(text, diag);
  EXPECT_TRUE(g.succeeded()) << collect.str();
  return g.succeeded() ? *g : nullptr;
}

std::map<std::string, OpCase> opCases() {
  std::map<std::string, OpCase> c = tableCases();
  Ins x23{normal({2, 3}, 1)};
  Ins xy23{normal({2, 3}, 1), normal({2, 3}, 2)};
  Ins img{normal({1, 2, 5, 5}, 3)};
  Ins bools{boolean({1, 0, 1, 0}), boolean({1, 1, 0, 0})};

  // Elementwise, unary.
  c["elu"] = {x23, [](const Ins &in) -> Outs { return {elu(in[0]), elu(in[0], {.alpha = 0.5})}; }};
  c["gelu"] = {x23, [](const Ins &in) -> Outs {
                 return {gelu(in[0]), gelu(in[0], {.approximate = "tanh"})};
               }};
  c["hard_sigmoid"] = {x23, [](const Ins &in) -> Outs {
                         return {hard_sigmoid(in[0], {.alpha = 0.3, .beta = 0.4})};
                       }};
  c["leaky_relu"] = {x23,
                     [](const Ins &in) -> Outs { return {leaky_relu(in[0], {.alpha = 0.2})}; }};
  c["cast"] = {x23, [](const Ins &in) -> Outs {
                 return {cast(in[0], {.to = DType::I32}), cast(in[0], {.to = DType::F16})};
               }};
  c["clip"] = {x23, [](const Ins &in) -> Outs {
                 return {clip(in[0], {.min = -0.5, .max = 0.5}), clip(in[0], {.max = 0.1})};
               }};

  // Elementwise, binary and ternary (with broadcasting).
  c["where"] = {{boolean({1, 0, 1}), normal({2, 3}, 1), normal({3}, 2)},
                [](const Ins &in) -> Outs { return {where(in[0], in[1], in[2])}; }};

  // Reductions and normalizations.
  c["argmax"] = {x23, [](const Ins &in) -> Outs {
                   return {argmax(in[0]), argmax(in[0], {.axis = 1, .keepdims = false})};
                 }};
  c["reduce_max"] = {x23, [](const Ins &in) -> Outs { return {reduce_max(in[0], {.axes = {1}})}; }};
  c["reduce_mean"] = {x23, [](const Ins &in) -> Outs { return {reduce_mean(in[0])}; }};
  c["reduce_min"] = {x23, [](const Ins &in) -> Outs {
                       return {reduce_min(in[0], {.axes = {0}, .keepdims = false})};
                     }};
  c["reduce_prod"] = {x23,
                      [](const Ins &in) -> Outs { return {reduce_prod(in[0], {.axes = {-1}})}; }};
  c["reduce_sum"] = {
      x23, [](const Ins &in) -> Outs {
        return {reduce_sum(in[0]), reduce_sum(in[0], {.axes = {1}, .keepdims = false})};
      }};
  c["softmax"] = {x23, [](const Ins &in) -> Outs { return {softmax(in[0], {.axis = 0})}; }};
  c["log_softmax"] = {x23, [](const Ins &in) -> Outs { return {log_softmax(in[0])}; }};
  c["layer_norm"] = {
      {normal({2, 4}, 1), normal({4}, 2), normal({4}, 3)}, [](const Ins &in) -> Outs {
        return {layer_norm(in[0], in[1]), layer_norm(in[0], in[1], in[2], {.epsilon = 1e-3})};
      }};
  c["batch_norm"] = {
      {normal({2, 3, 4}, 1), normal({3}, 2), normal({3}, 3), normal({3}, 4), positive({3}, 5)},
      [](const Ins &in) -> Outs {
        return {batch_norm(in[0], in[1], in[2], in[3], in[4], {.epsilon = 1e-3})};
      }};

  // Linear algebra and windows.
  c["matmul"] = {{normal({2, 3, 4}, 1), normal({4, 5}, 2)},
                 [](const Ins &in) -> Outs { return {matmul(in[0], in[1])}; }};
  c["gemm"] = {{normal({2, 3}, 1), normal({4, 3}, 2), normal({4}, 3)}, [](const Ins &in) -> Outs {
                 return {gemm(in[0], in[1], {.trans_b = true}),
                         gemm(in[0], in[1], in[2], {.alpha = 0.5, .beta = 2.0, .trans_b = true})};
               }};
  // Recurrent layers: x [S, B, I], w [D, G*H, I], r [D, G*H, H], b, h0, c0.
  c["lstm"] = {{normal({3, 2, 4}, 1), normal({2, 12, 4}, 2), normal({2, 12, 3}, 3),
                normal({2, 24}, 4), normal({2, 2, 3}, 5), normal({2, 2, 3}, 6)},
               [](const Ins &in) -> Outs {
                 return lstm(in[0], in[1], in[2], in[3], in[4], in[5],
                             {.direction = "bidirectional"});
               }};
  c["gru"] = {{normal({3, 2, 4}, 1), normal({1, 9, 4}, 2), normal({1, 9, 3}, 3), normal({1, 18}, 4),
               normal({1, 2, 3}, 5)},
              [](const Ins &in) -> Outs {
                Outs out = gru(in[0], in[1], in[2], in[3], in[4], {.direction = "reverse"});
                for (const Tensor &t :
                     gru(in[0], in[1], in[2], in[3], {.linear_before_reset = true}))
                  out.push_back(t);
                return out;
              }};
  c["rnn"] = {{normal({3, 2, 4}, 1), normal({1, 3, 4}, 2), normal({1, 3, 3}, 3)},
              [](const Ins &in) -> Outs { return rnn(in[0], in[1], in[2]); }};
  c["conv"] = {{normal({1, 2, 5, 5}, 1), normal({4, 2, 3, 3}, 2), normal({4}, 3)},
               [](const Ins &in) -> Outs {
                 return {conv(in[0], in[1]),
                         conv(in[0], in[1], in[2], {.strides = {2, 2}, .pads = {1, 1, 1, 1}})};
               }};
  c["conv_transpose"] = {{normal({1, 2, 3, 3}, 1), normal({2, 3, 2, 2}, 2), normal({3}, 3)},
                         [](const Ins &in) -> Outs {
                           return {conv_transpose(in[0], in[1]),
                                   conv_transpose(in[0], in[1], in[2], {.strides = {2, 2}})};
                         }};
  c["avg_pool"] = {img, [](const Ins &in) -> Outs {
                     return {avg_pool(in[0], {.kernel = {3, 3}, .strides = {2, 2}})};
                   }};
  c["max_pool"] = {img, [](const Ins &in) -> Outs {
                     return {max_pool(in[0], {.kernel = {2, 2}, .strides = {2, 2}})};
                   }};
  c["global_avg_pool"] = {img, [](const Ins &in) -> Outs { return {global_avg_pool(in[0])}; }};

  // Data movement.
  c["concat"] = {{normal({2, 1}, 1), normal({2, 3}, 2), normal({2, 2}, 3)},
                 [](const Ins &in) -> Outs {
                   return {concat({in[0], in[1], in[2]}, {.axis = 1})};
                 }};
  c["expand"] = {{normal({3, 1}, 1)}, [](const Ins &in) -> Outs {
                   return {expand(in[0], {.shape = {2, 3, 4}})};
                 }};
  c["flatten"] = {{normal({2, 3, 4}, 1)}, [](const Ins &in) -> Outs {
                    return {flatten(in[0]), flatten(in[0], {.axis = 2})};
                  }};
  c["gather"] = {{normal({5, 3}, 1), tensorOfInts({4, 0, 2, 2}, {2, 2})},
                 [](const Ins &in) -> Outs {
                   return {gather(in[0], in[1]), gather(in[0], in[1], {.axis = 0})};
                 }};
  c["gather_elements"] = {
      {normal({3, 4}, 1), tensorOfInts({0, 3, -1, 1, 2, 0}, {3, 2})},
      [](const Ins &in) -> Outs { return {gather_elements(in[0], in[1], {.axis = 1})}; }};
  c["gather_nd"] = {{normal({3, 4}, 1), tensorOfInts({2, 1, 0, -1}, {2, 2})},
                    [](const Ins &in) -> Outs { return {gather_nd(in[0], in[1])}; }};
  c["scatter_elements"] = {
      {normal({3, 4}, 1), tensorOfInts({0, 3, 1, 1}, {2, 2}), normal({2, 2}, 2)},
      [](const Ins &in) -> Outs {
        return {scatter_elements(in[0], in[1], in[2], {.axis = 1}),
                scatter_elements(in[0], in[1], in[2], {.axis = 1, .reduction = "add"})};
      }};
  c["scatter_nd"] = {{normal({3, 4}, 1), tensorOfInts({2, 0, 2}, {3, 1}), normal({3, 4}, 2)},
                     [](const Ins &in) -> Outs {
                       return {scatter_nd(in[0], in[1], in[2], {.reduction = "max"})};
                     }};
  c["top_k"] = {{normal({3, 5}, 1)}, [](const Ins &in) -> Outs {
                  Outs out = top_k(in[0], {.k = 2});
                  for (const Tensor &t : top_k(in[0], {.k = 3, .axis = 0, .largest = false}))
                    out.push_back(t);
                  return out;
                }};
  c["nonzero"] = {{tensor({0, 1.5, 0, -2, 0, 3}, {2, 3}), boolean({1, 0, 0, 1})},
                  [](const Ins &in) -> Outs {
                    return {nonzero(in[0]), nonzero(in[1])};
                  }};
  c["pad"] = {x23, [](const Ins &in) -> Outs {
                return {pad(in[0], {.pads = {1, 0, 0, 2}, .value = 9.0}),
                        pad(in[0], {.pads = {0, 1, 0, 1}, .mode = "edge"})};
              }};
  c["reshape"] = {x23, [](const Ins &in) -> Outs { return {reshape(in[0], {.shape = {3, 2}})}; }};
  c["resize"] = {{normal({1, 1, 2, 2}, 1)}, [](const Ins &in) -> Outs {
                   return {resize(in[0], {.scales = {1, 1, 2, 2}}),
                           resize(in[0], {.mode = "linear", .sizes = {1, 1, 3, 3}})};
                 }};
  c["shape"] = {x23, [](const Ins &in) -> Outs { return {shape(in[0])}; }};
  c["slice"] = {
      {normal({4, 5}, 1)}, [](const Ins &in) -> Outs {
        return {slice(in[0], {.starts = {1, 0}, .ends = {3, 5}, .axes = {0, 1}, .steps = {1, 2}})};
      }};
  // Regions: each branch once; a loop that carries and scans.
  c["if"] = {x23, [](const Ins &in) -> Outs {
               GraphAttr twice = region(R"(graph @twice(%a: f32[2,3]) -> (f32[2,3]) {
  %b = add(%a, %a) : f32[2,3]
  return %b
})");
               GraphAttr negate = region(R"(graph @negate(%a: f32[2,3]) -> (f32[2,3]) {
  %b = neg(%a) : f32[2,3]
  return %b
})");
               Outs out;
               for (bool cond : {true, false})
                 for (const Tensor &t :
                      if_({tensor({cond ? 1.0 : 0.0}, {}, DType::Bool), in[0]},
                          {.then_branch = twice, .else_branch = negate, .num_outputs = 1}))
                   out.push_back(t);
               return out;
             }};
  c["loop"] = {
      x23, [](const Ins &in) -> Outs {
        GraphAttr body = region(
            R"(graph @body(%i: i64[], %c: bool[], %a: f32[2,3]) -> (bool[], f32[2,3], f32[2,3]) {
  %f = cast(%i) {to = f32} : f32[]
  %b = add(%a, %f) : f32[2,3]
  return %c, %b, %a
})");
        return loop({tensorOfInts({3}, {}), tensor({1}, {}, DType::Bool), in[0]},
                    {.body = body, .num_carried = 1, .num_outputs = 2});
      }};
  c["split"] = {{normal({4, 6}, 1)}, [](const Ins &in) -> Outs {
                  Outs out = split(in[0], {.axis = 1, .num_outputs = 3});
                  for (const Tensor &t : split(in[0], {.axis = 0, .sizes = {1, 3}}))
                    out.push_back(t);
                  return out;
                }};
  c["squeeze"] = {{normal({1, 3, 1}, 1)}, [](const Ins &in) -> Outs {
                    return {squeeze(in[0]), squeeze(in[0], {.axes = {0}})};
                  }};
  c["transpose"] = {x23, [](const Ins &in) -> Outs {
                      return {transpose(in[0]), transpose(in[0], {.perm = {1, 0}})};
                    }};
  c["unsqueeze"] = {x23, [](const Ins &in) -> Outs {
                      return {unsqueeze(in[0], {.axes = {0, 3}})};
                    }};

  // Ops without operands, combined with an input so the graph has one.
  c["constant"] = {x23, [](const Ins &in) -> Outs {
                     Tensor k = tensor({1, 2, 3, 4, 5, 6}, {2, 3});
                     return {add(in[0], constant({.value = k}))};
                   }};
  c["constant_of_shape"] = {
      x23, [](const Ins &in) -> Outs {
        return {add(in[0], constant_of_shape({.shape = {2, 3}, .value = 1.5}))};
      }};
  c["iota"] = {
      x23, [](const Ins &in) -> Outs {
        return {add(
            in[0],
            iota({.shape = {2, 3}, .axis = 1, .start = -1, .delta = 0.5, .dtype = DType::F32}))};
      }};
  c["range"] = {
      {normal({4}, 1)}, [](const Ins &in) -> Outs {
        return {add(in[0], range({.start = 0, .limit = 2, .delta = 0.5, .dtype = DType::F32}))};
      }};
  return c;
}

TEST(TraceOps, EveryOpOfTheTableHasACase) {
  auto cases = opCases();
  for (const OpInfo &info : allOps())
    EXPECT_TRUE(cases.count(std::string(info.mnemonic)))
        << "op '" << info.mnemonic << "' has no case in TraceOpsTest.cpp opCases()";
  EXPECT_EQ(cases.size(), allOps().size()) << "a case names an op that is not in the table";
}

class TraceEachOp : public ::testing::TestWithParam<std::string> {};

TEST_P(TraceEachOp, TracedGraphEqualsEager) {
  auto cases = opCases();
  auto it = cases.find(GetParam());
  ASSERT_NE(it, cases.end()) << "no case for op '" << GetParam() << "'";
  const OpCase &c = it->second;

  Outs eager = c.fn(c.inputs);
  auto graph = trace(c.fn, c.inputs);
  ASSERT_TRUE(graph);
  DiagnosticEngine diag;
  ScopedDiagnosticCollector collected(diag);
  ASSERT_TRUE(succeeded(verify(*graph, diag))) << collected.str();
  std::string text = printGraph(*graph);
  EXPECT_NE(text.find("= " + GetParam()), std::string::npos) << text;

  auto traced = interpret(*graph, c.inputs, diag);
  ASSERT_TRUE(traced.succeeded()) << collected.str();
  ASSERT_EQ(traced->size(), eager.size());
  for (size_t i = 0; i < eager.size(); ++i)
    EXPECT_TRUE(eager[i].bitwiseEqual((*traced)[i]))
        << GetParam() << " output " << i << ": eager " << eager[i].str() << ", traced "
        << (*traced)[i].str() << "\n"
        << text;
}

std::vector<std::string> allMnemonics() {
  std::vector<std::string> names;
  for (const OpInfo &info : allOps())
    names.emplace_back(info.mnemonic);
  return names;
}

INSTANTIATE_TEST_SUITE_P(AllOps, TraceEachOp, ::testing::ValuesIn(allMnemonics()),
                         [](const ::testing::TestParamInfo<std::string> &p) { return p.param; });

} // namespace
} // namespace kiln
