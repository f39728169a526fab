//===- MlirExport.cpp - Kiln graphs as MLIR 16 modules --------------------===//
//
// Note [MLIR export]
// A graph is one func.func; each node is written by its family's exporter
// (ExportOps.cpp, ExportMovement.cpp) as upstream ops, built with MLIR's
// builders, so the module is MLIR's own data structure and its verifier
// checks it before it is printed:
//   - types: each dtype its MLIR element type, integers signless (u8 is i8:
//     the ops on it are the unsigned ones), bool i1; a symbolic dim is `?`;
//   - sizes: every symbol is read once at the function's entry from an
//     argument dim that is exactly it (tensor.dim); a size expression over
//     symbols (`2*S+1`, `(S+7)/8`) is arith over those index values; a `?`
//     (a value-dependent size) is read from an operand of the node that has
//     it;
//   - a node with no upstream form is a func.call of a private declaration
//     `@kiln.<op>` (one per op and signature) carrying the node's
//     attributes in `kiln.attrs`; a graph attribute (if, loop) is written
//     as a private function of its own, named in that dictionary, so the
//     bodies are in the module too.
// Nothing here decides numerics: elementwise bodies come from the op's
// scalar semantics (ir/ScalarExpr.h), one hook per primitive
// (EmitScalar.cpp).
//
//===----------------------------------------------------------------------===//

#include "codegen/mlir/Internal.h"
#include "ir/DTypeCodec.h"

#include <mlir/IR/AsmState.h>
#include <mlir/IR/BuiltinDialect.h>
#include <mlir/IR/Diagnostics.h>
#include <mlir/IR/DialectResourceBlobManager.h>
#include <mlir/IR/Verifier.h>
#include <mlir/Parser/Parser.h>

#include <llvm/Support/MemoryBuffer.h>
#include <llvm/Support/SourceMgr.h>
#include <llvm/Support/raw_ostream.h>

#include <cctype>

namespace kiln::mlirgen {

using mlir::Value;

mlir::Type Exporter::elementType(DType t, const Location &l) {
  switch (t) {
  case DType::F32:
    return b.getF32Type();
  case DType::F16:
    return b.getF16Type();
  case DType::BF16:
    return b.getBF16Type();
  case DType::F64:
    return b.getF64Type();
  case DType::Bool:
    return b.getI1Type();
  case DType::F8E4M3FN:
    return b.getFloat8E4M3FNType();
  case DType::F8E5M2:
    return b.getFloat8E5M2Type();
  case DType::I8:
  case DType::U8:
  case DType::I16:
  case DType::U16:
  case DType::I32:
  case DType::U32:
  case DType::I64:
    return b.getIntegerType(static_cast<unsigned>(8 * dtypeSize(t)));
  case DType::I4:
  case DType::U4:
  case DType::I2:
  case DType::U2: // their value bits (a byte each in Kiln's buffers)
    return b.getIntegerType(dtypeBits(t));
  default:
    diag.emitError(l) << "MLIR 16 has no element type for dtype " << dtypeName(t);
    return {};
  }
}

mlir::RankedTensorType Exporter::tensorType(const TensorType &t, const Location &l) {
  mlir::Type e = elementType(t.dtype, l);
  if (!e)
    return {};
  llvm::SmallVector<int64_t> dims;
  for (const Dim &d : t.shape)
    dims.push_back(d.isStatic() ? d.size() : mlir::ShapedType::kDynamic);
  return mlir::RankedTensorType::get(dims, e);
}

mlir::Location Exporter::loc(const Location &l) {
  switch (l.kind()) {
  case Location::Kind::FileLineCol:
    return mlir::FileLineColLoc::get(&ctx_, l.file(), l.line(), l.col());
  case Location::Kind::Name:
    return mlir::NameLoc::get(b.getStringAttr(l.nameStr()));
  case Location::Kind::Fused: {
    llvm::SmallVector<mlir::Location> parts;
    for (const Location &c : l.children())
      parts.push_back(loc(c));
    return mlir::FusedLoc::get(&ctx_, parts);
  }
  case Location::Kind::Unknown:
    break;
  }
  return b.getUnknownLoc();
}

Value Exporter::indexConstant(int64_t v) {
  return b.create<mlir::arith::ConstantIndexOp>(b.getUnknownLoc(), v);
}

Value Exporter::dimExprValue(const DimExpr &e, const Location &l) {
  mlir::Location at = b.getUnknownLoc();
  Value sum = indexConstant(e.constant());
  for (const DimTerm &t : e.terms()) {
    Value product = indexConstant(t.coeff);
    for (const DimAtomPtr &a : t.factors) {
      Value f;
      switch (a->kind) {
      case DimAtom::Kind::Symbol: {
        auto it = symbols.find(a->name);
        if (it == symbols.end()) {
          diag.emitError(l) << "the size '" << a->name
                            << "' is no dim of an input: the MLIR function cannot compute it";
          return {};
        }
        f = it->second;
        break;
      }
      case DimAtom::Kind::FloorDiv:
      case DimAtom::Kind::Mod: {
        Value x = dimExprValue(*a->lhs, l);
        if (!x)
          return {};
        Value d = indexConstant(a->divisor);
        Value q = b.create<mlir::arith::FloorDivSIOp>(at, x, d);
        f = a->kind == DimAtom::Kind::FloorDiv
                ? q
                : b.create<mlir::arith::SubIOp>(at, x, b.create<mlir::arith::MulIOp>(at, q, d))
                      .getResult();
        break;
      }
      case DimAtom::Kind::Min:
      case DimAtom::Kind::Max: {
        Value x = dimExprValue(*a->lhs, l), y = dimExprValue(*a->rhs, l);
        if (!x || !y)
          return {};
        f = a->kind == DimAtom::Kind::Min ? b.create<mlir::arith::MinSIOp>(at, x, y).getResult()
                                          : b.create<mlir::arith::MaxSIOp>(at, x, y).getResult();
        break;
      }
      }
      product = b.create<mlir::arith::MulIOp>(at, product, f);
    }
    sum = b.create<mlir::arith::AddIOp>(at, sum, product);
  }
  return sum;
}

Value Exporter::dimValue(const Dim &d, const Location &l) {
  if (d.isStatic())
    return indexConstant(d.size());
  std::optional<DimExpr> e = d.expr();
  if (!e) {
    diag.emitError(l) << "a size of '?' (known only when the graph runs) that no operand gives: "
                         "the MLIR export cannot compute it";
    return {};
  }
  return dimExprValue(*e, l);
}

bool Exporter::dynamicSizes(const TensorType &t, const Location &l,
                            llvm::SmallVectorImpl<Value> &out) {
  for (const Dim &d : t.shape)
    if (!d.isStatic()) {
      Value v = dimValue(d, l);
      if (!v)
        return false;
      out.push_back(v);
    }
  return true;
}

Value Exporter::empty(const TensorType &t, const Location &l) {
  mlir::RankedTensorType type = tensorType(t, l);
  llvm::SmallVector<Value> sizes;
  if (!type || !dynamicSizes(t, l, sizes))
    return {};
  return b.create<mlir::tensor::EmptyOp>(loc(l), type.getShape(), type.getElementType(), sizes);
}

Value Exporter::scalarConstant(DType t, double v) {
  mlir::Type e = elementType(t, Location());
  mlir::Location at = b.getUnknownLoc();
  // As Tensor::setDouble stores `v`: floats rounded (mini floats
  // saturated), integers truncated and saturated, NaN 0.
  if (isFloat(t))
    return b.create<mlir::arith::ConstantOp>(at, b.getFloatAttr(e, roundThroughDType(t, v)));
  if (t == DType::Bool)
    return b.create<mlir::arith::ConstantOp>(at, b.getBoolAttr(v != 0));
  return b.create<mlir::arith::ConstantOp>(at, b.getIntegerAttr(e, floatThroughDType(t, v)));
}

Value Exporter::filled(const TensorType &t, double v, const Location &l) {
  Value init = empty(t, l);
  if (!init)
    return {};
  return b.create<mlir::linalg::FillOp>(loc(l), scalarConstant(t.dtype, v), init).getResult(0);
}

namespace {

/// A tensor's bytes as an MLIR elements attribute: inline when small (and
/// always for bools, whose blob layout MLIR packs), else a resource blob.
mlir::ElementsAttr elementsOf(Exporter &x, const Tensor &t, mlir::RankedTensorType type,
                              const std::string &name) {
  llvm::ArrayRef<char> bytes(static_cast<const char *>(t.rawData()), t.byteSize());
  if (t.dtype() == DType::Bool) {
    llvm::SmallVector<bool> bits;
    for (int64_t i = 0; i < t.numel(); ++i)
      bits.push_back(bytes[static_cast<size_t>(i)] != 0);
    return mlir::DenseElementsAttr::get(type, bits);
  }
  if (t.numel() == 0)
    return mlir::DenseElementsAttr::get(type, llvm::ArrayRef<mlir::Attribute>());
  if (t.numel() <= x.options.inlineElements)
    return mlir::DenseElementsAttr::getFromRawBuffer(type, bytes);
  // A resource key is an identifier: other characters become `_`.
  std::string key = name.empty() ? "constant" : name;
  for (char &c : key)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '.')
      c = '_';
  if (std::isdigit(static_cast<unsigned char>(key[0])) || key[0] == '.')
    key = "_" + key;
  auto &blobs = mlir::DenseResourceElementsHandle::getManagerInterface(type.getContext());
  return mlir::DenseResourceElementsAttr::get(
      type, blobs.insert(key, mlir::HeapAsmResourceBlob::allocateAndCopyWithAlign(
                                  bytes, dtypeSize(t.dtype()))));
}

mlir::Attribute attributeOf(Exporter &x, const Attribute &a, const std::string &what,
                            const Location &l);

} // namespace

/// A graph (the model's, or an if/loop body) as a function of the module.
FailureOr<mlir::func::FuncOp> exportFunction(Exporter &x, const Graph &g, const std::string &name,
                                             bool isPrivate);

namespace {

std::string functionTypeKey(mlir::FunctionType t) {
  std::string s;
  llvm::raw_string_ostream os(s);
  t.print(os);
  return os.str();
}

mlir::Attribute attributeOf(Exporter &x, const Attribute &a, const std::string &what,
                            const Location &l) {
  mlir::OpBuilder &b = x.b;
  return std::visit(
      [&](const auto &v) -> mlir::Attribute {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, int64_t>) {
          return b.getI64IntegerAttr(v);
        } else if constexpr (std::is_same_v<T, double>) {
          return b.getF64FloatAttr(v);
        } else if constexpr (std::is_same_v<T, bool>) {
          return b.getBoolAttr(v);
        } else if constexpr (std::is_same_v<T, std::string>) {
          return b.getStringAttr(v);
        } else if constexpr (std::is_same_v<T, std::vector<int64_t>>) {
          return b.getDenseI64ArrayAttr(v);
        } else if constexpr (std::is_same_v<T, std::vector<double>>) {
          return b.getDenseF64ArrayAttr(v);
        } else if constexpr (std::is_same_v<T, DType>) {
          return b.getStringAttr(std::string(dtypeName(v)));
        } else if constexpr (std::is_same_v<T, Tensor>) {
          mlir::RankedTensorType type = x.tensorType(TensorType(v.dtype(), v.shape()), l);
          if (!type)
            return {};
          return elementsOf(x, v, type, what);
        } else if constexpr (std::is_same_v<T, std::vector<DimExpr>>) {
          // Sizes: integers, or the expression's text where it has symbols.
          llvm::SmallVector<mlir::Attribute> items;
          for (const DimExpr &e : v)
            items.push_back(e.isConstant() ? mlir::Attribute(b.getI64IntegerAttr(e.constant()))
                                           : mlir::Attribute(b.getStringAttr(e.str())));
          return b.getArrayAttr(items);
        } else {
          static_assert(std::is_same_v<T, GraphAttr>);
          auto f = exportFunction(x, *v, what, true);
          if (failed(f))
            return {};
          return mlir::FlatSymbolRefAttr::get(f->getSymNameAttr());
        }
      },
      a);
}

} // namespace

LogicalResult Exporter::call(const Node &n) {
  mlir::Location at = loc(n.loc());
  llvm::SmallVector<Value> operands;
  llvm::SmallVector<mlir::Type> operandTypes, resultTypes;
  for (const kiln::Value *v : n.operands()) {
    operands.push_back(value(v));
    operandTypes.push_back(operands.back().getType());
  }
  for (unsigned i = 0; i < n.numResults(); ++i) {
    mlir::RankedTensorType t = tensorType(n.result(i)->type(), n.loc());
    if (!t)
      return failure();
    resultTypes.push_back(t);
  }
  // Attributes first: a graph attribute adds a function to the module.
  llvm::SmallVector<mlir::NamedAttribute> attrs;
  for (unsigned i = 0; i < n.info().attrs.size(); ++i) {
    std::string what = std::string(n.mnemonic()) + "." + std::string(n.info().attrs[i].name);
    mlir::Attribute a = attributeOf(*this, n.attr(i), what, n.loc());
    if (!a)
      return failure();
    attrs.push_back(b.getNamedAttr(n.info().attrs[i].name, a));
  }
  mlir::FunctionType type = b.getFunctionType(operandTypes, resultTypes);
  std::string key = std::string(n.mnemonic()) + " " + functionTypeKey(type);
  auto it = callees_.find(key);
  if (it == callees_.end()) {
    // Created detached: the symbol table inserts it and renames a second
    // signature of the op.
    std::string name = "kiln." + std::string(n.mnemonic());
    auto decl = mlir::func::FuncOp::create(b.getUnknownLoc(), name, type);
    decl.setPrivate();
    mlir::SymbolTable(module).insert(decl);
    it = callees_.emplace(key, decl).first;
  }
  auto callOp = b.create<mlir::func::CallOp>(at, it->second, operands);
  callOp->setAttr("kiln.attrs", b.getDictionaryAttr(attrs));
  for (unsigned i = 0; i < n.numResults(); ++i)
    define(n.result(i), callOp.getResult(i));
  calls.insert(std::string(n.mnemonic()));
  return success();
}

namespace {

LogicalResult exportConstant(Exporter &x, const Node &n) {
  const Tensor &t = ConstantOp(n).value();
  mlir::RankedTensorType type = x.tensorType(n.result()->type(), n.loc());
  if (!type)
    return failure();
  if (x.options.constantsAsArguments && x.topLevel && t.numel() > x.options.inlineElements &&
      t.dtype() != DType::Bool) {
    mlir::Block &entry = x.function.front();
    x.define(n.result(), entry.addArgument(type, x.loc(n.loc())));
    x.constantArgs.push_back(t);
    return success();
  }
  std::string name = ConstantOp(n).name();
  if (name.empty())
    name = n.result()->name();
  mlir::ElementsAttr attr = elementsOf(x, t, type, name);
  x.define(n.result(), x.b.create<mlir::arith::ConstantOp>(x.loc(n.loc()), type,
                                                           mlir::cast<mlir::TypedAttr>(attr)));
  return success();
}

LogicalResult exportNode(Exporter &x, const Node &n) {
  switch (n.kind()) {
  case OpKind::Constant:
    return exportConstant(x, n);
  case OpKind::MatMul:
    return exportMatMul(x, n);
  case OpKind::Gemm:
    return exportGemm(x, n);
  case OpKind::Conv:
    return exportConv(x, n);
  case OpKind::MaxPool:
  case OpKind::AvgPool:
  case OpKind::GlobalAvgPool:
    return exportPool(x, n);
  case OpKind::ReduceMax:
  case OpKind::ReduceMin:
  case OpKind::ReduceSum:
  case OpKind::ReduceMean:
  case OpKind::ReduceProd:
    return exportReduction(x, n);
  case OpKind::Softmax:
  case OpKind::LogSoftmax:
  case OpKind::LayerNorm:
  case OpKind::BatchNorm:
    return exportNormalization(x, n);
  default:
    break;
  }
  if (n.hasTrait(Elementwise))
    return exportElementwise(x, n);
  bool handled = false;
  if (failed(exportMovement(x, n, handled)))
    return failure();
  return handled ? success() : x.call(n);
}

} // namespace

FailureOr<mlir::func::FuncOp> exportFunction(Exporter &x, const Graph &g, const std::string &name,
                                             bool isPrivate) {
  mlir::OpBuilder::InsertionGuard guard(x.b);
  llvm::SmallVector<mlir::Type> ins, outs;
  Location graphLoc = Location::name(g.name());
  for (const kiln::Value *v : g.inputs()) {
    mlir::RankedTensorType t = x.tensorType(v->type(), graphLoc);
    if (!t)
      return failure();
    ins.push_back(t);
  }
  for (const kiln::Value *v : g.outputs()) {
    mlir::RankedTensorType t = x.tensorType(v->type(), graphLoc);
    if (!t)
      return failure();
    outs.push_back(t);
  }
  // Detached, then inserted by the symbol table (renamed when a body of
  // another node has the name).
  auto f = mlir::func::FuncOp::create(x.b.getUnknownLoc(), name, x.b.getFunctionType(ins, outs));
  if (isPrivate)
    f.setPrivate();
  mlir::SymbolTable(x.module).insert(f);
  mlir::Block *entry = f.addEntryBlock();
  x.b.setInsertionPointToStart(entry);
  mlir::func::FuncOp outerFunction = x.function;
  const bool outerTop = x.topLevel;
  x.function = f;
  x.topLevel = !isPrivate;

  // The function's own sizes: each symbol from the first argument dim that
  // is exactly it.
  std::map<std::string, Value> outer;
  std::swap(outer, x.symbols);
  for (unsigned i = 0; i < g.numInputs(); ++i) {
    x.define(g.input(i), entry->getArgument(i));
    const Shape &s = g.input(i)->type().shape;
    for (size_t d = 0; d < s.size(); ++d)
      if (!s[d].symbol().empty() && !x.symbols.count(s[d].symbol()))
        x.symbols[s[d].symbol()] = x.b.create<mlir::tensor::DimOp>(
            x.b.getUnknownLoc(), entry->getArgument(i), static_cast<int64_t>(d));
  }
  bool ok = true;
  for (const Node *n : g.nodes())
    if (failed(exportNode(x, *n))) {
      ok = false;
      break;
    }
  if (ok) {
    llvm::SmallVector<Value> results;
    for (const kiln::Value *v : g.outputs())
      results.push_back(x.value(v));
    if (!isPrivate)
      for (const auto &[flag, l] : x.indexChecks) {
        results.push_back(flag);
        outs.push_back(flag.getType());
      }
    x.b.create<mlir::func::ReturnOp>(x.b.getUnknownLoc(), results);
    // Constants that became arguments: the type grows, and they are
    // read-only for bufferization.
    f.setType(x.b.getFunctionType(entry->getArgumentTypes(), outs));
    if (entry->getNumArguments() != ins.size()) {
      for (unsigned i = static_cast<unsigned>(ins.size()); i < entry->getNumArguments(); ++i)
        f.setArgAttr(i, "bufferization.writable", x.b.getBoolAttr(false));
    }
  }
  x.function = outerFunction;
  x.topLevel = outerTop;
  std::swap(outer, x.symbols);
  if (!ok)
    return failure();
  return f;
}

void loadDialects(mlir::MLIRContext &ctx) {
  ctx.loadDialect<mlir::arith::ArithDialect, mlir::func::FuncDialect, mlir::linalg::LinalgDialect,
                  mlir::math::MathDialect, mlir::tensor::TensorDialect>();
}

DiagnosticBridge::DiagnosticBridge(mlir::MLIRContext &ctx, DiagnosticEngine &diag,
                                   Location fallback)
    : handler_(&ctx, [&diag, fallback](mlir::Diagnostic &d) {
        Location l = fallback;
        if (auto flc = mlir::dyn_cast<mlir::FileLineColLoc>(d.getLocation()))
          l = Location::fileLineCol(flc.getFilename().str(), flc.getLine(), flc.getColumn());
        Severity s = d.getSeverity() == mlir::DiagnosticSeverity::Error     ? Severity::Error
                     : d.getSeverity() == mlir::DiagnosticSeverity::Warning ? Severity::Warning
                                                                            : Severity::Note;
        diag.emit(s, l) << "MLIR: " << d.str();
        return mlir::success();
      }) {}

mlir::OwningOpRef<mlir::ModuleOp>
buildModule(mlir::MLIRContext &ctx, const Graph &g, const MlirExportOptions &options,
            DiagnosticEngine &diag, std::vector<std::string> &calls,
            std::vector<Tensor> *constantArgs, std::vector<Location> *indexChecks) {
  loadDialects(ctx);
  Exporter x(ctx, options, diag);
  mlir::OwningOpRef<mlir::ModuleOp> module = mlir::ModuleOp::create(x.b.getUnknownLoc());
  x.module = *module;
  if (failed(exportFunction(x, g, g.name(), false)))
    return {};
  if (mlir::failed(mlir::verify(*module))) {
    diag.emitError(Location::name(g.name())) << "the MLIR module written for graph '" << g.name()
                                             << "' does not verify (a bug in the export)";
    return {};
  }
  calls.assign(x.calls.begin(), x.calls.end());
  if (constantArgs)
    *constantArgs = x.constantArgs;
  if (indexChecks)
    for (const auto &[flag, l] : x.indexChecks)
      indexChecks->push_back(l);
  return module;
}

FailureOr<MlirExport> exportMlir(const Graph &g, const MlirExportOptions &options,
                                 DiagnosticEngine &diag) {
  mlir::MLIRContext ctx;
  DiagnosticBridge bridge(ctx, diag, Location::name(g.name()));
  MlirExport out;
  mlir::OwningOpRef<mlir::ModuleOp> module = buildModule(ctx, g, options, diag, out.calls);
  if (!module)
    return failure();
  llvm::raw_string_ostream os(out.text);
  mlir::OpPrintingFlags flags;
  if (options.printLocs)
    flags.enableDebugInfo(true, false);
  module->print(os, flags);
  os.flush();
  return out;
}

LogicalResult verifyMlir(std::string_view text, const std::string &bufferName,
                         DiagnosticEngine &diag) {
  mlir::MLIRContext ctx;
  loadDialects(ctx);
  DiagnosticBridge bridge(ctx, diag, Location::file(bufferName));
  mlir::ParserConfig config(&ctx);
  auto sources = std::make_shared<llvm::SourceMgr>();
  sources->AddNewSourceBuffer(
      llvm::MemoryBuffer::getMemBuffer(llvm::StringRef(text.data(), text.size()), bufferName),
      llvm::SMLoc());
  mlir::OwningOpRef<mlir::ModuleOp> module = mlir::parseSourceFile<mlir::ModuleOp>(sources, config);
  if (!module)
    return failure();
  return mlir::succeeded(mlir::verify(*module)) ? success() : failure();
}

} // namespace kiln::mlirgen
