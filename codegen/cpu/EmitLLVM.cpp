//===- EmitLLVM.cpp - Kernel IR to LLVM IR --------------------------------===//
//
// Lowers one codegen::Kernel to an LLVM module with IRBuilder:
//
//   define void @name(ptr %buffers, i64 %begin, i64 %end)      ; the ABI
//     loads each buffer pointer (and, for a kernel with run-time sizes,
//     the pointer to its sizes after them) and calls
//   define internal void @name.body(ptr noalias %in0, ..., ptr noalias %out0,
//                                   [ptr %sizes,] i64 %begin, i64 %end)
//     for o in [max(begin,0), min(end,numOuter)):
//       i_0..i_{n-1} = row-major digits of o
//       stage s (Reduce): acc = identity; for j in [0,inner): acc = acc op v(j)
//       stage s (Map):    for j in [0,inner): stores (in several loops
//                         where a condition on j changes, InnerIndex.cpp)
//
// The body's noalias arguments tell the vectorizer that buffers do not
// overlap (after inlining they become alias scopes). Scalar DAG nodes are
// emitted inside the loop of each stage that needs them; LICM hoists what
// does not depend on the inner index.
//
// Types in registers: f32, f64 as themselves; f16 and bf16 as float, rounded
// back to their dtype after every node (the semantics of evaluateScalars);
// the mini floats (f8e4m3fn, ..., f4e2m1fn) as float, decoded from their
// byte by a table and encoded by encodeMiniFloat; integers as iN of their
// width, the sub-byte ones (i4, u4, i2, u2) in an i8 that a conversion
// saturates or wraps at their own width; bool as i1 (i8 in memory).
//
// Floating-point flags: arithmetic carries `contract` (FMA); reductions add
// `reassoc nsz` so they vectorize. Nothing carries nnan/ninf, except the
// maxnum of a max/min reduction, whose NaN case is tracked by a separate
// or-reduced flag (LLVM 16 does not vectorize llvm.maximum reductions).
//
//===----------------------------------------------------------------------===//

#include "codegen/cpu/CpuJit.h"
#include "codegen/cpu/KernelEmitter.h"
#include "ir/DTypeCodec.h"

#include <llvm/IR/Constants.h>
#include <llvm/IR/DerivedTypes.h>
#include <llvm/IR/Function.h>
#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Intrinsics.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/MDBuilder.h>
#include <llvm/IR/Module.h>

#include <algorithm>
#include <functional>
#include <limits>
#include <sstream>
#include <unordered_map>

namespace kiln::codegen::cpu {

// Registers hold a value of its compute dtype (DTypes.def): a float narrower
// than 32 bits is widened to float, f64 stays double, an integer is held at
// its storage width (a sub-byte one sign- or zero-extended in a byte), bool
// as i1.
llvm::Type *KernelEmitter::regType(DType t) {
  if (t == DType::Bool)
    return b_.getInt1Ty();
  if (isFloat(t))
    return computeDType(t) == DType::F64 ? b_.getDoubleTy() : b_.getFloatTy();
  return b_.getIntNTy(static_cast<unsigned>(8 * dtypeSize(t)));
}

// Memory holds an element in its storage bytes: f32, f64 and integers as
// they are in registers; the narrower floats and bool as integers of their
// storage width, converted by loadElement / storeElement.
llvm::Type *KernelEmitter::memType(DType t) {
  if (computeDType(t) == t && t != DType::Bool)
    return regType(t);
  return b_.getIntNTy(static_cast<unsigned>(8 * dtypeSize(t)));
}

// The float of each code of a mini float (a constant table in the module;
// the format's code counts are at most 256).
Value *KernelEmitter::decodeMiniFloat(DType t, Value *code) {
  const MiniFloatFormat &f = *miniFloatFormat(t);
  const unsigned codes = 1u << (1 + f.expBits + f.manBits);
  const std::string name = "kiln.decode." + std::string(dtypeName(t));
  llvm::ArrayType *ty = llvm::ArrayType::get(b_.getFloatTy(), codes);
  auto *table = m_.getNamedGlobal(name);
  if (!table) {
    std::vector<llvm::Constant *> values;
    for (unsigned c = 0; c < codes; ++c)
      values.push_back(
          llvm::ConstantFP::get(b_.getFloatTy(), miniFloatToFloat(f, static_cast<uint8_t>(c))));
    table = new llvm::GlobalVariable(m_, ty, /*isConstant=*/true, llvm::GlobalValue::PrivateLinkage,
                                     llvm::ConstantArray::get(ty, values), name);
  }
  // Only the format's bits index the table (a u8 buffer byte of an f4e2m1fn
  // input may carry others, which the codec ignores too).
  Value *index = b_.CreateAnd(b_.CreateZExt(code, b_.getInt32Ty()), codes - 1);
  return b_.CreateLoad(b_.getFloatTy(), b_.CreateInBoundsGEP(ty, table, {b_.getInt32(0), index}));
}

// floatToMiniFloat (ir/DType.cpp) on a float register: saturate, round to
// nearest even (subnormals by scaling their step to 1), rebias; NaN and an
// IEEE format's inf are their codes.
Value *KernelEmitter::encodeMiniFloat(DType t, Value *v) {
  const MiniFloatFormat &f = *miniFloatFormat(t);
  const unsigned signBit = 1u << (f.expBits + f.manBits);
  llvm::Type *i32 = b_.getInt32Ty();
  Value *bits = b_.CreateBitCast(v, i32);
  Value *sign =
      b_.CreateSelect(b_.CreateICmpSLT(bits, b_.getInt32(0)), b_.getInt32(signBit), b_.getInt32(0));
  Value *a = b_.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, v);
  a = b_.CreateBinaryIntrinsic(llvm::Intrinsic::minnum, a,
                               llvm::ConstantFP::get(b_.getFloatTy(), miniFloatMax(f)));
  const float step = std::ldexp(1.0f, f.bias - 1 + static_cast<int>(f.manBits));
  // Scaled below 2^(manBits+1), so adding 2^23 rounds it to an integer
  // (nearest even) in any SSE level, without a roundeven libcall.
  llvm::Constant *two23 = llvm::ConstantFP::get(b_.getFloatTy(), 8388608.0);
  Value *scaled = b_.CreateFMul(a, llvm::ConstantFP::get(b_.getFloatTy(), step));
  Value *sub = b_.CreateFPToUI(b_.CreateFSub(b_.CreateFAdd(scaled, two23), two23), i32);
  const unsigned drop = 23 - f.manBits;
  Value *abits = b_.CreateBitCast(a, i32);
  Value *odd = b_.CreateAnd(b_.CreateLShr(abits, drop), 1);
  Value *rounded = b_.CreateAdd(abits, b_.CreateAdd(odd, b_.getInt32((1u << (drop - 1)) - 1)));
  Value *normal = b_.CreateSub(b_.CreateLShr(rounded, drop),
                               b_.getInt32(static_cast<unsigned>(127 - f.bias) << f.manBits));
  Value *isSub =
      b_.CreateFCmpOLT(a, llvm::ConstantFP::get(b_.getFloatTy(), std::ldexp(1.0f, 1 - f.bias)));
  Value *code = b_.CreateSelect(isSub, sub, normal);
  if (f.special == MiniFloatFormat::FNUZ) // no -0
    sign = b_.CreateSelect(b_.CreateICmpEQ(code, b_.getInt32(0)), b_.getInt32(0), sign);
  code = b_.CreateOr(code, sign);
  Value *nan =
      b_.CreateSelect(b_.CreateICmpNE(sign, b_.getInt32(0)), b_.getInt32(miniFloatNaN(f, true)),
                      b_.getInt32(miniFloatNaN(f, false)));
  code = b_.CreateSelect(b_.CreateFCmpUNO(v, v), nan, code);
  if (f.special == MiniFloatFormat::IEEE) {
    Value *isInf = b_.CreateFCmpOEQ(b_.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, v),
                                    llvm::ConstantFP::getInfinity(b_.getFloatTy()));
    code = b_.CreateSelect(isInf, b_.CreateOr(sign, b_.getInt32(miniFloatInf(f))), code);
  }
  return b_.CreateTrunc(code, b_.getInt8Ty());
}

// Rounds a float register value to f16/bf16 precision (round to nearest
// even, as floatToHalf/floatToBf16 do) or to a mini float's value (encoded
// and decoded, floatToMiniFloat's saturation included); other types pass
// through.
Value *KernelEmitter::roundTo(DType t, Value *v) {
  if (t == DType::F16)
    return b_.CreateFPExt(b_.CreateFPTrunc(v, b_.getHalfTy()), b_.getFloatTy());
  if (t == DType::BF16) {
    Value *bits = b_.CreateBitCast(v, b_.getInt32Ty());
    Value *lsb = b_.CreateAnd(b_.CreateLShr(bits, 16), 1);
    Value *rounded = b_.CreateAdd(bits, b_.CreateAdd(lsb, b_.getInt32(0x7fff)));
    rounded = b_.CreateAnd(rounded, b_.getInt32(0xffff0000u));
    Value *quiet = b_.CreateAnd(b_.CreateOr(bits, b_.getInt32(0x00400000)), 0xffff0000u);
    Value *isNan = b_.CreateFCmpUNO(v, v);
    return b_.CreateBitCast(b_.CreateSelect(isNan, quiet, rounded), b_.getFloatTy());
  }
  if (miniFloatFormat(t))
    return decodeMiniFloat(t, encodeMiniFloat(t, v));
  return v;
}

Value *KernelEmitter::loadElement(DType t, Value *ptr) {
  llvm::Type *mt = memType(t);
  Value *raw = b_.CreateLoad(mt, ptr);
  switch (t) {
  case DType::F16:
    return b_.CreateFPExt(b_.CreateBitCast(raw, b_.getHalfTy()), b_.getFloatTy());
  case DType::BF16:
    return b_.CreateBitCast(b_.CreateShl(b_.CreateZExt(raw, b_.getInt32Ty()), 16), b_.getFloatTy());
  case DType::Bool:
    return b_.CreateICmpNE(raw, b_.getInt8(0));
  default:
    return miniFloatFormat(t) ? decodeMiniFloat(t, raw) : raw;
  }
}

void KernelEmitter::storeElement(DType t, Value *v, Value *ptr) {
  switch (t) {
  case DType::F16:
    v = b_.CreateBitCast(b_.CreateFPTrunc(v, b_.getHalfTy()), b_.getInt16Ty());
    break;
  case DType::BF16:
    v = b_.CreateTrunc(b_.CreateLShr(b_.CreateBitCast(roundTo(t, v), b_.getInt32Ty()), 16),
                       b_.getInt16Ty());
    break;
  case DType::Bool:
    v = b_.CreateZExt(v, b_.getInt8Ty());
    break;
  default:
    if (miniFloatFormat(t))
      v = encodeMiniFloat(t, v);
    break;
  }
  b_.CreateStore(v, ptr);
}

Value *KernelEmitter::constantOf(DType t, double f, int64_t i) {
  if (isFloat(t))
    return llvm::ConstantFP::get(regType(t), roundThroughDType(t, f));
  if (t == DType::Bool)
    return b_.getInt1(i != 0);
  return llvm::ConstantInt::get(regType(t), static_cast<uint64_t>(wrapThroughDType(t, i)), true);
}

// Cast semantics (ir/ScalarExpr.h): float->int truncates toward zero and
// saturates (NaN gives 0), x->bool is x != 0 (NaN is true), bool->x is 0/1.
Value *KernelEmitter::convert(Value *v, DType from, DType to) {
  if (from == to)
    return v;
  llvm::Type *dst = regType(to);
  if (to == DType::Bool) {
    if (isFloat(from))
      return b_.CreateFCmpUNE(v, llvm::ConstantFP::get(v->getType(), 0.0));
    return b_.CreateICmpNE(v, llvm::ConstantInt::get(v->getType(), 0));
  }
  if (from == DType::Bool) {
    if (isFloat(to))
      return b_.CreateUIToFP(v, dst);
    return b_.CreateZExt(v, dst);
  }
  if (isFloat(from) && isFloat(to)) {
    if (v->getType() != dst)
      v = v->getType()->isDoubleTy() ? b_.CreateFPTrunc(v, dst) : b_.CreateFPExt(v, dst);
    return roundTo(to, v);
  }
  // An integer narrower than its register (i4 in an i8) saturates or wraps
  // at its own width, then widens.
  llvm::Type *width = b_.getIntNTy(dtypeBits(to));
  auto widen = [&](Value *r) {
    return width == dst ? r : b_.CreateIntCast(r, dst, isSignedInt(to));
  };
  if (isFloat(from)) {
    llvm::Intrinsic::ID id =
        isSignedInt(to) ? llvm::Intrinsic::fptosi_sat : llvm::Intrinsic::fptoui_sat;
    return widen(b_.CreateIntrinsic(id, {width, v->getType()}, {v}));
  }
  if (isFloat(to)) {
    // i64 -> f32 goes through double, as the interpreter does (the other
    // integer types are exact in double, so one rounding is the same).
    llvm::Type *via = from == DType::I64 ? b_.getDoubleTy() : dst;
    Value *r = isSignedInt(from) ? b_.CreateSIToFP(v, via) : b_.CreateUIToFP(v, via);
    if (via != dst)
      r = b_.CreateFPTrunc(r, dst);
    return roundTo(to, r);
  }
  return widen(b_.CreateIntCast(v, width, isSignedInt(from)));
}

Value *KernelEmitter::mathCall(MathFn fn, DType t, Value *a, Value *bArg) {
  if (isFloat(t)) {
    llvm::FunctionCallee callee = getMathFunction(m_, fn, a->getType(), isa_);
    Value *r = bArg ? b_.CreateCall(callee, {a, bArg}) : b_.CreateCall(callee, {a});
    return roundTo(t, r);
  }
  // Integer operands: compute in double and convert back (saturating).
  Value *da = convert(a, t, DType::F64);
  Value *db = bArg ? convert(bArg, t, DType::F64) : nullptr;
  llvm::FunctionCallee callee = getMathFunction(m_, fn, b_.getDoubleTy(), isa_);
  Value *r = db ? b_.CreateCall(callee, {da, db}) : b_.CreateCall(callee, {da});
  return convert(r, DType::F64, t);
}

Value *KernelEmitter::get(ScalarRef r) {
  if (!r.valid() || static_cast<size_t>(r.id) >= k_.dag.nodes().size())
    return failValue("invalid scalar reference %" + std::to_string(r.id));
  Value *&slot = memo_[static_cast<size_t>(r.id)];
  if (!slot && !resolved_.empty()) {
    const int32_t same = resolved_[static_cast<size_t>(r.id)];
    if (same == kFalse || same == kTrue)
      return slot = b_.getInt1(same == kTrue);
    if (same >= 0) {
      Value *v = get(ScalarRef{same});
      return memo_[static_cast<size_t>(r.id)] = v;
    }
  }
  if (!slot && table_[static_cast<size_t>(r.id)] && innerIndex_ && !fillingTables_)
    slot = loadFromTable(r);
  if (!slot && k_.dag.node(r).op == ScalarOp::Select && !triedSelect_[static_cast<size_t>(r.id)])
    slot = emitSelectedLoad(r);
  if (!slot)
    slot = emitNode(k_.dag.node(r));
  return slot;
}

// Leaves first (they read the emitter's state), then the operands in order,
// then the op's hook from ir/ScalarOps.def (EmitScalar.cpp).
Value *KernelEmitter::emitNode(const ScalarNode &n) {
  if (scalarClass(n.op) == ScalarClass::Leaf)
    return scalarHook(n.op)(*this, n, nullptr, n.type);
  unsigned arity = scalarArity(n.op);
  Value *args[3] = {nullptr, nullptr, nullptr};
  for (unsigned i = 0; i < arity; ++i)
    if (!(args[i] = get(n.args[i])))
      return nullptr;
  DType argType = arity > 0 ? k_.dag.type(n.args[0]) : n.type;
  return scalarHook(n.op)(*this, n, args, argType);
}

Value *KernelEmitter::emitIndex(const ScalarNode &n) {
  if (n.slot == k_.innerSlot()) {
    if (!innerIndex_)
      return failValue("the inner index is used outside a stage");
    return innerIndex_;
  }
  if (n.slot < 0 || static_cast<size_t>(n.slot) >= outerIndex_.size())
    return failValue("index slot " + std::to_string(n.slot) + " out of range");
  return outerIndex_[static_cast<size_t>(n.slot)];
}

Value *KernelEmitter::emitLoad(const ScalarNode &n) {
  if (n.slot < 0 || static_cast<size_t>(n.slot) >= k_.inputs.size())
    return failValue("load of input " + std::to_string(n.slot) + " out of range");
  if (k_.inputs[static_cast<size_t>(n.slot)].dtype != n.type)
    return failValue("load type differs from input " + std::to_string(n.slot) + "'s dtype");
  Value *offset = get(n.args[0]);
  if (!offset)
    return nullptr;
  Value *ptr = b_.CreateInBoundsGEP(memType(n.type), buffers_[static_cast<size_t>(n.slot)], offset);
  return loadElement(n.type, ptr);
}

Value *KernelEmitter::emitSize(const ScalarNode &n) {
  if (n.slot < 0 || static_cast<size_t>(n.slot) >= sizes_.size())
    return failValue("size slot " + std::to_string(n.slot) + " out of range");
  return sizes_[static_cast<size_t>(n.slot)];
}

Value *KernelEmitter::extentValue(const DimExpr &e) {
  // Extents are polynomials over the symbols (codegen/RunTimeSizes.cpp
  // builds no other kind), with signed coefficients (S-1): no `nuw`.
  Value *sum = b_.getInt64(e.constant());
  for (const DimTerm &t : e.terms()) {
    Value *prod = b_.getInt64(t.coeff);
    for (const DimAtomPtr &a : t.factors) {
      auto it = a->kind == DimAtom::Kind::Symbol
                    ? std::find(k_.symbols.begin(), k_.symbols.end(), a->name)
                    : k_.symbols.end();
      if (it == k_.symbols.end())
        return failValue("the extent " + e.str() + " is not a polynomial over the kernel's sizes");
      prod =
          b_.CreateMul(prod, sizes_[static_cast<size_t>(it - k_.symbols.begin())], "", false, true);
    }
    sum = b_.CreateAdd(sum, prod, "", false, true);
  }
  return sum;
}

Value *KernelEmitter::emitStageValue(const ScalarNode &n) {
  if (n.slot < 0 || static_cast<size_t>(n.slot) >= stageValues_.size() ||
      !stageValues_[static_cast<size_t>(n.slot)])
    return failValue("stage value " + std::to_string(n.slot) + " used before it is computed");
  return stageValues_[static_cast<size_t>(n.slot)];
}

// Note [Rows computed by one code path]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Float sum and product reductions carry `reassoc`, so LLVM may fold a row
// in any order, and it picks the order per copy of the code: when an inner
// loop is short enough to unroll fully, the loop vectorizer vectorizes the
// outer loop across rows (each lane folds its row in order) while the
// scalar remainder rows are SLP-vectorized into a tree reduction. A row's
// bits then depend on whether it fell in the vector body, i.e. on the
// range [begin, end) it was run in: on the thread split and on in-place
// versus out-of-place compiles (their alias checks differ). So the outer
// loop of a kernel with such a reduction is never vectorized, interleaved
// or unrolled: every row runs the same code. Max and min reductions are
// exact in any order and keep the outer vectorization (softmax over 7
// columns: its sum stage makes it one of these kernels).
// tests/unit/codegen_cpu: RowBitsDoNotDependOnTheRange checks it.
bool KernelEmitter::reassociatesReductions() const {
  for (const Stage &st : k_.stages)
    if (st.kind == Stage::Kind::Reduce &&
        (st.reduce == ReduceKind::Sum || st.reduce == ReduceKind::Prod) &&
        isFloat(k_.dag.node(st.value).type))
      return true;
  return false;
}

// for (iv = lo; iv < hi; ++iv) with loop-carried values; returns the carried
// values at exit. Inner loops get the schedule's vector width hint.
std::vector<Value *> KernelEmitter::emitLoop(Value *lo, Value *hi, const std::string &name,
                                             const std::vector<Value *> &init, const LoopBody &body,
                                             bool innerLoop) {
  llvm::Function *fn = b_.GetInsertBlock()->getParent();
  llvm::BasicBlock *pre = b_.GetInsertBlock();
  auto *header = llvm::BasicBlock::Create(ctx_, name + ".header", fn);
  auto *bodyBlock = llvm::BasicBlock::Create(ctx_, name + ".body", fn);
  auto *exit = llvm::BasicBlock::Create(ctx_, name + ".exit", fn);
  b_.CreateBr(header);

  b_.SetInsertPoint(header);
  llvm::PHINode *iv = b_.CreatePHI(i64(), 2, name);
  iv->addIncoming(lo, pre);
  std::vector<llvm::PHINode *> phis;
  std::vector<Value *> carried;
  for (Value *v : init) {
    llvm::PHINode *p = b_.CreatePHI(v->getType(), 2, name + ".acc");
    p->addIncoming(v, pre);
    phis.push_back(p);
    carried.push_back(p);
  }
  b_.CreateCondBr(b_.CreateICmpSLT(iv, hi), bodyBlock, exit);

  b_.SetInsertPoint(bodyBlock);
  std::vector<Value *> next = body(iv, carried);
  Value *ivNext = b_.CreateAdd(iv, b_.getInt64(1), name + ".next", true, true);
  llvm::BranchInst *latch = b_.CreateBr(header);
  llvm::BasicBlock *latchBlock = b_.GetInsertBlock();
  iv->addIncoming(ivNext, latchBlock);
  for (size_t i = 0; i < phis.size(); ++i)
    phis[i]->addIncoming(next.size() == phis.size() ? next[i] : phis[i], latchBlock);

  llvm::SmallVector<llvm::Metadata *, 4> ops;
  auto hint = [&](const char *key, llvm::Constant *value) {
    ops.push_back(llvm::MDNode::get(
        ctx_, {llvm::MDString::get(ctx_, key), llvm::ConstantAsMetadata::get(value)}));
  };
  if (innerLoop && s_.vectorWidth > 0) {
    hint("llvm.loop.vectorize.width", b_.getInt32(static_cast<uint32_t>(s_.vectorWidth)));
    hint("llvm.loop.vectorize.enable", b_.getTrue());
  }
  // A short range of a split inner loop is one vector loop, not
  // interleaved or unrolled (Note [Inner loops split where a condition
  // changes]).
  auto *loC = llvm::dyn_cast<llvm::ConstantInt>(lo);
  auto *hiC = llvm::dyn_cast<llvm::ConstantInt>(hi);
  if (innerLoop && splitRange_ && loC && hiC &&
      hiC->getSExtValue() - loC->getSExtValue() <= kShortInnerRange) {
    hint("llvm.loop.interleave.count", b_.getInt32(1));
    ops.push_back(llvm::MDNode::get(ctx_, {llvm::MDString::get(ctx_, "llvm.loop.unroll.disable")}));
  }
  if (!innerLoop && reassociatesReductions()) {
    // Note [Rows computed by one code path].
    hint("llvm.loop.vectorize.enable", b_.getFalse());
    hint("llvm.loop.interleave.count", b_.getInt32(1));
    ops.push_back(llvm::MDNode::get(ctx_, {llvm::MDString::get(ctx_, "llvm.loop.unroll.disable")}));
  }
  if (!ops.empty()) {
    llvm::TempMDTuple self = llvm::MDNode::getTemporary(ctx_, std::nullopt);
    ops.insert(ops.begin(), self.get());
    llvm::MDNode *loopId = llvm::MDNode::getDistinct(ctx_, ops);
    loopId->replaceOperandWith(0, loopId);
    latch->setMetadata(llvm::LLVMContext::MD_loop, loopId);
  }

  b_.SetInsertPoint(exit);
  return carried;
}

Value *KernelEmitter::reduceIdentity(ReduceKind kind, DType t) {
  if (isFloat(t)) {
    double inf = std::numeric_limits<double>::infinity();
    switch (kind) {
    case ReduceKind::Sum:
      return llvm::ConstantFP::get(regType(t), 0.0);
    case ReduceKind::Prod:
      return llvm::ConstantFP::get(regType(t), 1.0);
    case ReduceKind::Max:
      return llvm::ConstantFP::get(regType(t), -inf);
    case ReduceKind::Min:
      return llvm::ConstantFP::get(regType(t), inf);
    }
  }
  switch (kind) {
  case ReduceKind::Sum:
    return constantOf(t, 0.0, 0);
  case ReduceKind::Prod:
    return constantOf(t, 0.0, 1);
  case ReduceKind::Max:
    return constantOf(t, 0.0, intLowest(t));
  case ReduceKind::Min:
    return constantOf(t, 0.0, intHighest(t));
  }
  return nullptr;
}

Value *KernelEmitter::reduceCombine(ReduceKind kind, DType t, Value *acc, Value *v) {
  if (isFloat(t)) {
    llvm::FastMathFlags fmf;
    fmf.setAllowReassoc(true);
    fmf.setNoSignedZeros(true);
    fmf.setAllowContract(true);
    llvm::IRBuilder<>::FastMathFlagGuard guard(b_);
    b_.setFastMathFlags(fmf);
    switch (kind) {
    case ReduceKind::Sum:
      return b_.CreateFAdd(acc, v);
    case ReduceKind::Prod:
      return b_.CreateFMul(acc, v);
    case ReduceKind::Max:
    case ReduceKind::Min: {
      // maxnum/minnum with nnan (a reduction LLVM 16 vectorizes); NaN inputs
      // are caught by the separate flag in emitReduceStage.
      fmf.setNoNaNs(true);
      b_.setFastMathFlags(fmf);
      return b_.CreateBinaryIntrinsic(
          kind == ReduceKind::Max ? llvm::Intrinsic::maxnum : llvm::Intrinsic::minnum, acc, v);
    }
    }
  }
  if (t == DType::Bool)
    return kind == ReduceKind::Sum || kind == ReduceKind::Max ? b_.CreateOr(acc, v)
                                                              : b_.CreateAnd(acc, v);
  bool s = isSignedInt(t);
  switch (kind) {
  case ReduceKind::Sum:
    return b_.CreateAdd(acc, v);
  case ReduceKind::Prod:
    return b_.CreateMul(acc, v);
  case ReduceKind::Max:
    return b_.CreateBinaryIntrinsic(s ? llvm::Intrinsic::smax : llvm::Intrinsic::umax, acc, v);
  case ReduceKind::Min:
    return b_.CreateBinaryIntrinsic(s ? llvm::Intrinsic::smin : llvm::Intrinsic::umin, acc, v);
  }
  return nullptr;
}

void KernelEmitter::emitReduceStage(size_t stageIndex, const Stage &st) {
  if (!st.value.valid() || static_cast<size_t>(st.value.id) >= k_.dag.nodes().size()) {
    fail("reduce stage " + std::to_string(stageIndex) + " has no value");
    return;
  }
  DType t = k_.dag.type(st.value);
  bool trackNan = isFloat(t) && (st.reduce == ReduceKind::Max || st.reduce == ReduceKind::Min);
  std::vector<Value *> init{reduceIdentity(st.reduce, t)};
  if (trackNan)
    init.push_back(b_.getFalse());
  clearMemo();
  std::vector<Value *> result = emitLoop(
      b_.getInt64(0), innerExtent_, "reduce" + std::to_string(stageIndex), init,
      [&](Value *j, const std::vector<Value *> &carried) -> std::vector<Value *> {
        innerIndex_ = j;
        Value *v = get(st.value);
        if (!v)
          return {};
        std::vector<Value *> next{reduceCombine(st.reduce, t, carried[0], v)};
        if (trackNan)
          next.push_back(b_.CreateOr(carried[1], b_.CreateFCmpUNO(v, v)));
        return next;
      },
      true);
  innerIndex_ = nullptr;
  clearMemo();
  Value *r = result[0];
  if (trackNan)
    r = b_.CreateSelect(result[1], llvm::ConstantFP::getNaN(r->getType()), r);
  stageValues_[stageIndex] = roundTo(t, r);
}

bool KernelEmitter::emitStores(const Stage &st) {
  for (const Store &store : st.stores) {
    if (store.output < 0 || static_cast<size_t>(store.output) >= k_.outputs.size())
      return fail("store to output " + std::to_string(store.output) + " out of range");
    DType t = k_.outputs[static_cast<size_t>(store.output)].dtype;
    Value *offset = get(store.offset);
    Value *value = get(store.value);
    if (!offset || !value)
      return false;
    if (k_.dag.type(store.value) != t)
      return fail("store of " + std::string(dtypeName(k_.dag.type(store.value))) + " to " +
                  std::string(dtypeName(t)) + " output " + std::to_string(store.output));
    Value *ptr = b_.CreateInBoundsGEP(
        memType(t), buffers_[k_.inputs.size() + static_cast<size_t>(store.output)], offset);
    storeElement(t, value, ptr);
  }
  return true;
}

void KernelEmitter::emitMapStage(const Stage &st) {
  clearMemo();
  if (st.outerOnly) {
    // Once per outer point; the inner index is not available.
    emitStores(st);
    clearMemo();
    return;
  }
  // One loop over [0, inner), or one per range where no condition on the
  // inner index changes (Note [Inner loops split where a condition
  // changes] in InnerIndex.cpp).
  std::vector<int64_t> ranges = innerBreaks(st);
  const bool split = !ranges.empty();
  ranges.insert(ranges.begin(), 0);
  ranges.push_back(k_.inner);
  for (size_t r = 0; r + 1 < ranges.size() && error_.empty(); ++r) {
    if (split)
      resolveFor(ranges[r], ranges[r + 1]);
    splitRange_ = split;
    emitLoop(
        b_.getInt64(ranges[r]), split ? b_.getInt64(ranges[r + 1]) : innerExtent_, "map", {},
        [&](Value *j, const std::vector<Value *> &) -> std::vector<Value *> {
          innerIndex_ = j;
          emitStores(st);
          return {};
        },
        true);
    splitRange_ = false;
    innerIndex_ = nullptr;
    clearMemo();
  }
  resolved_.clear();
}

bool KernelEmitter::emit(const std::string &symbol) {
  size_t numBuffers = k_.inputs.size() + k_.outputs.size();
  llvm::Type *ptrTy = b_.getPtrTy();

  // The body: noalias buffer arguments, the sizes, then begin and end.
  const bool sized = k_.hasRunTimeSizes();
  std::vector<llvm::Type *> bodyParams(numBuffers + (sized ? 1 : 0), ptrTy);
  bodyParams.push_back(i64());
  bodyParams.push_back(i64());
  auto *bodyFn = llvm::Function::Create(llvm::FunctionType::get(b_.getVoidTy(), bodyParams, false),
                                        llvm::GlobalValue::InternalLinkage, symbol + ".body", m_);
  bodyFn->setDoesNotThrow();
  if (unsigned bits = isa_.preferredVectorBits())
    bodyFn->addFnAttr("prefer-vector-width", std::to_string(bits));
  // An input written in place (Schedule::inPlaceInput) is stored through
  // and so is not readonly; the output's own pointer is then unused.
  std::vector<bool> writtenInPlace(k_.inputs.size(), false);
  for (int32_t in : s_.inPlaceInput)
    if (in >= 0 && static_cast<size_t>(in) < k_.inputs.size())
      writtenInPlace[static_cast<size_t>(in)] = true;
  for (size_t i = 0; i < numBuffers; ++i) {
    unsigned a = static_cast<unsigned>(i);
    bodyFn->addParamAttr(a, llvm::Attribute::NoAlias);
    bodyFn->addParamAttr(a, llvm::Attribute::NoCapture);
    if (i >= k_.inputs.size())
      bodyFn->addParamAttr(a, llvm::Attribute::WriteOnly);
    else if (!writtenInPlace[i])
      bodyFn->addParamAttr(a, llvm::Attribute::ReadOnly);
    bodyFn->getArg(a)->setName(i < k_.inputs.size() ? "in" + std::to_string(i)
                                                    : "out" + std::to_string(i - k_.inputs.size()));
  }
  const unsigned rangeArg = static_cast<unsigned>(numBuffers + (sized ? 1 : 0));
  if (sized) {
    bodyFn->addParamAttr(rangeArg - 1, llvm::Attribute::NoAlias);
    bodyFn->addParamAttr(rangeArg - 1, llvm::Attribute::ReadOnly);
    bodyFn->getArg(rangeArg - 1)->setName("sizes");
  }
  Value *begin = bodyFn->getArg(rangeArg);
  Value *end = bodyFn->getArg(rangeArg + 1);
  begin->setName("begin");
  end->setName("end");

  // The ABI entry point.
  auto *entryFn =
      llvm::Function::Create(llvm::FunctionType::get(b_.getVoidTy(), {ptrTy, i64(), i64()}, false),
                             llvm::GlobalValue::ExternalLinkage, symbol, m_);
  entryFn->setDoesNotThrow();
  if (unsigned bits = isa_.preferredVectorBits()) // also here: the body is inlined
    entryFn->addFnAttr("prefer-vector-width", std::to_string(bits));
  entryFn->getArg(0)->setName("buffers");
  entryFn->getArg(1)->setName("begin");
  entryFn->getArg(2)->setName("end");
  b_.SetInsertPoint(llvm::BasicBlock::Create(ctx_, "entry", entryFn));
  std::vector<Value *> callArgs;
  for (size_t i = 0; i < numBuffers + (sized ? 1 : 0); ++i) {
    Value *slot = b_.CreateConstInBoundsGEP1_64(ptrTy, entryFn->getArg(0), i);
    callArgs.push_back(b_.CreateLoad(ptrTy, slot, "buf" + std::to_string(i)));
  }
  callArgs.push_back(entryFn->getArg(1));
  callArgs.push_back(entryFn->getArg(2));
  b_.CreateCall(bodyFn, callArgs);
  b_.CreateRetVoid();

  // The body: clamp the range, loop over outer points.
  b_.SetInsertPoint(llvm::BasicBlock::Create(ctx_, "entry", bodyFn));
  for (size_t i = 0; i < numBuffers; ++i)
    buffers_.push_back(bodyFn->getArg(static_cast<unsigned>(i)));
  for (size_t o = 0; o < s_.inPlaceInput.size() && o < k_.outputs.size(); ++o)
    if (int32_t in = s_.inPlaceInput[o]; in >= 0 && static_cast<size_t>(in) < k_.inputs.size())
      buffers_[k_.inputs.size() + o] = buffers_[static_cast<size_t>(in)];
  memo_.assign(k_.dag.nodes().size(), nullptr);
  triedSelect_.assign(k_.dag.nodes().size(), false);
  readsInner_.assign(k_.dag.nodes().size(), 0);
  stageValues_.assign(k_.stages.size(), nullptr);
  // Extents: constants, or computed once from the sizes.
  for (size_t i = 0; sized && i < k_.symbols.size(); ++i)
    sizes_.push_back(
        b_.CreateLoad(i64(), b_.CreateConstInBoundsGEP1_64(i64(), bodyFn->getArg(rangeArg - 1), i),
                      k_.symbols[i]));
  Value *numOuter = b_.getInt64(1);
  for (size_t d = 0; d < k_.outer.size(); ++d) {
    outerExtents_.push_back(sized ? extentValue(k_.outerDims[d]) : b_.getInt64(k_.outer[d]));
    if (!outerExtents_.back())
      return false;
    numOuter = b_.CreateMul(numOuter, outerExtents_.back(), "", false, true);
  }
  innerExtent_ = sized ? extentValue(k_.innerDim) : b_.getInt64(k_.inner);
  if (!innerExtent_)
    return false;
  Value *lo = b_.CreateBinaryIntrinsic(llvm::Intrinsic::smax, begin, b_.getInt64(0));
  Value *hi = b_.CreateBinaryIntrinsic(llvm::Intrinsic::smin, end, numOuter);
  planTables();
  fillTables();
  // Row-major digits of `o` (constant divisors: multiply-shift).
  auto digits = [&](Value *o) {
    std::vector<Value *> out(k_.outer.size(), nullptr);
    Value *rest = o;
    for (size_t d = k_.outer.size(); d-- > 0;) {
      if (d == 0) {
        out[d] = rest;
      } else {
        out[d] = b_.CreateURem(rest, outerExtents_[d], "i" + std::to_string(d));
        rest = b_.CreateUDiv(rest, outerExtents_[d]);
      }
    }
    if (!out.empty())
      out[0]->setName("i0");
    return out;
  };
  // With run-time extents the divisions are instructions of 20-40 cycles:
  // the digits are carried from one outer point to the next instead (an
  // odometer), divided out once at the range's start.
  const bool odometer = sized && k_.outer.size() > 1;
  std::vector<Value *> start = odometer ? digits(lo) : std::vector<Value *>{};
  emitLoop(
      lo, hi, "outer", start,
      [&](Value *o, const std::vector<Value *> &carried) -> std::vector<Value *> {
        outerIndex_ = odometer ? carried : digits(o);
        stageValues_.assign(k_.stages.size(), nullptr);
        for (size_t si = 0; si < k_.stages.size() && error_.empty(); ++si) {
          const Stage &st = k_.stages[si];
          if (st.kind == Stage::Kind::Reduce)
            emitReduceStage(si, st);
          else
            emitMapStage(st);
        }
        if (!odometer)
          return {};
        // The next point: the last digit counts up and carries.
        std::vector<Value *> next(carried.size());
        Value *carry = b_.getInt64(1);
        for (size_t d = carried.size(); d-- > 0;) {
          Value *sum = b_.CreateAdd(carried[d], carry, "", true, true);
          if (d == 0) {
            next[d] = sum;
            break;
          }
          Value *wrap = b_.CreateICmpEQ(sum, outerExtents_[d]);
          next[d] = b_.CreateSelect(wrap, b_.getInt64(0), sum);
          carry = b_.CreateZExt(wrap, i64());
        }
        return next;
      },
      false);
  b_.CreateRetVoid();
  return error_.empty();
}

std::unique_ptr<llvm::Module> emitKernelModule(const Kernel &k, const Schedule &s,
                                               const std::string &symbol, const VectorMathIsa &isa,
                                               llvm::LLVMContext &ctx, std::string &error) {
  // A kernel with run-time sizes marks its non-constant extents -1.
  const int64_t symbolic = k.hasRunTimeSizes() ? -1 : 0;
  for (int64_t d : k.outer)
    if (d < symbolic) {
      error = "negative outer extent " + std::to_string(d);
      return nullptr;
    }
  if (k.inner < symbolic) {
    error = "negative inner extent " + std::to_string(k.inner);
    return nullptr;
  }
  if (k.hasRunTimeSizes() && (k.outerDims.size() != k.outer.size())) {
    error = "a kernel with run-time sizes needs an expression per outer extent";
    return nullptr;
  }
  auto m = std::make_unique<llvm::Module>(symbol, ctx);
  KernelEmitter emitter(k, s, isa, *m);
  if (!emitter.emit(symbol)) {
    error = emitter.error();
    return nullptr;
  }
  return m;
}

} // namespace kiln::codegen::cpu
