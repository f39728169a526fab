//===- SymbolicArtifact.cpp - Models compiled once for ranges of sizes ----===//
//
// Note [Symbolic artifacts]
// ~~~~~~~~~~~~~~~~~~~~~~~~~
// An executable has static shapes: its memory plan and oneDNN calls are
// made for one set of sizes (Note [Compiling per size] in api/Kiln.cpp).
// What a compile for a range shares between sizes is its kernels with
// run-time sizes. A symbolic artifact keeps exactly that: the graph, the
// options and those kernels' code; a run at a size builds its executable
// from them, as `kiln compile --dim batch=1..64` builds each size after
// compiling the kernels once. Storing a plan per size instead is a size
// set (`--dim batch=1,8,64`), which the runtime alone runs.
//
// The graph is stored as its .kir text with the blobs elided and their
// bytes in the data part, 64-byte aligned, so that loading parses the text
// and borrows the constants from the mapping (ParseOptions::blobs). A
// kernel is stored as what findSharedKernel matches (name, group
// signature, layout, ranges, buffers with their dims as expressions over
// the symbols, extents) and its ELF objects, linked at load by the
// artifact's loader (runtime/artifact/ElfLoader.h); its kernel IR is not,
// only its text for --emit=kernels. The Kiln version must match, as for an
// artifact: the graph's text, the group signatures and the kernels' ABI
// are this version's. The --cpu is restored as asked: for `native`, what
// a size compiles (oneDNN's ISA, a kernel that stays per size) is for the
// machine that loads the file, which must have the features the stored
// kernels need (checked at load); naming the saving machine's CPU instead
// could ask for features a loading VM hides. Sizes compiled from the file
// skip the compile cache: each takes tens of ms, and an entry per size
// would copy every constant the file maps.
//
//===----------------------------------------------------------------------===//
#include "codegen/SymbolicArtifact.h"

#include "codegen/RunTimeSizes.h"
#include "codegen/cpu/CpuTarget.h"
#include "codegen/cpu/dnnl/DnnlIsa.h"
#include "ir/Interpreter.h"
#include "ir/Parser.h"
#include "ir/Printer.h"
#include "runtime/artifact/Artifact.h"
#include "runtime/artifact/ElfLoader.h"
#include "runtime/artifact/FileFormat.h"
#include "runtime/dnnl/DnnlSteps.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <set>

namespace kiln::codegen {
namespace {

using namespace runtime::framing;

/// Bumped by any change of the layout or of Symbolic (Artifact.proto)
/// that is not a pure addition.
constexpr uint32_t kSymbolicFormat = 1;

void putDim(const DimExpr &d, artifact::SymbolicDim *out) {
  if (d.isConstant())
    out->set_constant(d.constant());
  else
    out->set_expr(d.str());
}

std::optional<DimExpr> getDim(const artifact::SymbolicDim &d) {
  if (d.expr().empty())
    return DimExpr(d.constant());
  DiagnosticEngine quiet;
  auto type = parseTensorType("i64[" + d.expr() + "]", quiet);
  if (failed(type) || type->shape.size() != 1)
    return std::nullopt;
  return type->shape[0].expr();
}

void putRange(const SymbolRange &r, artifact::SymbolRange *out) {
  out->set_name(r.name);
  out->set_min(r.min);
  out->set_max(r.max);
}

SymbolRange getRange(const artifact::SymbolRange &r) {
  return {r.name(), r.min(), r.max()};
}

template <typename Ranges> std::vector<SymbolRange> getRanges(const Ranges &rs) {
  std::vector<SymbolRange> out;
  for (const artifact::SymbolRange &r : rs)
    out.push_back(getRange(r));
  return out;
}

/// The text `g` is stored as (blobs elided; `blobs` gets their contents).
std::string storedText(const Graph &g, std::map<std::string, Tensor> &blobs) {
  PrintOptions print;
  print.printLocs = true;
  print.elideBlobs = true;
  print.blobsOut = &blobs;
  return printGraph(g, print);
}

} // namespace

std::optional<CompileOptions> withSizes(const CompileOptions &options, const Graph &g,
                                        const std::map<std::string, int64_t> &sizes, int threads,
                                        std::string &why) {
  CompileOptions o = options;
  o.threads = threads > 0 ? threads : o.threads;
  const std::set<std::string> symbols = inputSymbols(g);
  for (const auto &[name, n] : sizes) {
    const std::string size = name + "=" + std::to_string(n);
    auto fixed = o.dims.find(name);
    auto range = std::find_if(o.ranges.begin(), o.ranges.end(),
                              [&](const SymbolRange &r) { return r.name == name; });
    if (!symbols.count(name))
      why = size + " names no symbolic dim of the model's inputs";
    else if (fixed != o.dims.end() && fixed->second != n)
      why = size + ": the artifact was compiled with " + name + "=" + std::to_string(fixed->second);
    else if (range != o.ranges.end() && (n < range->min || n > range->max))
      why = size + " is outside the artifact's range " + std::to_string(range->min) + ".." +
            std::to_string(range->max);
    if (!why.empty())
      return std::nullopt;
    o.dims[name] = n;
  }
  return o;
}

FailureOr<std::unique_ptr<Module>> asStored(const Graph &g, DiagnosticEngine &diag) {
  std::map<std::string, Tensor> blobs;
  const std::string text = storedText(g, blobs);
  ParseOptions parse;
  parse.filename = "<the graph as stored>";
  parse.blobs = &blobs;
  return parseModule(text, diag, parse);
}

LogicalResult saveSymbolicArtifact(const Graph &g, const CompileOptions &options,
                                   const SharedKernels &shared, const std::set<std::string> &open,
                                   const std::string &model, const std::string &path,
                                   DiagnosticEngine &diag) {
  const Location loc = Location::file(path);
  auto target = cpu::resolveCpuTarget(options.cpu, diag);
  if (failed(target))
    return failure();
  artifact::Symbolic meta;
  DataPart data;
  meta.set_kiln_version(runtime::kilnVersion());
  meta.set_dnnl_version(runtime::onednn::version());
  meta.set_model(model);
  meta.set_cpu_requested(target->requested);
  meta.set_cpu(target->cpu);
  meta.set_cpu_features(target->features);
  meta.set_dnnl_isa(options.useLibraries ? cpu::oneDnnIsaFor(*target) : "");

  std::map<std::string, Tensor> blobs; // alive until written
  meta.set_graph(storedText(g, blobs));
  for (const auto &[name, t] : blobs) {
    artifact::Symbolic::Constant *c = meta.add_constants();
    c->set_name(name);
    c->set_dtype(std::string(dtypeName(t.dtype())));
    for (int64_t d : t.shape())
      c->add_shape(d);
    data.add(t.rawData(), t.byteSize(), c->mutable_data());
  }

  meta.set_threads(options.threads);
  for (const SymbolRange &r : options.ranges) // a fixed size's range no longer applies
    if (!options.dims.count(r.name))
      putRange(r, meta.add_ranges());
  for (const auto &[name, n] : options.dims)
    putRange({name, n, n}, meta.add_dims());
  meta.set_pipeline(options.pipeline);
  meta.set_use_libraries(options.useLibraries);
  meta.set_use_kernels(options.useKernels);
  meta.set_fuse(options.fuse);
  meta.set_no_kernel_sharing(!options.shareKernels);
  meta.set_dnnl_layout(static_cast<int32_t>(options.dnnlLayout));
  meta.set_recurrent(static_cast<int32_t>(options.recurrent));
  meta.set_opt_level(options.optLevel);

  for (const SymbolRange &r : shared.ranges)
    putRange(r, meta.add_kernel_ranges());
  for (const auto &[name, sk] : shared.byName) {
    const Kernel &k = sk.kernel;
    artifact::SharedKernel *out = meta.add_kernels();
    out->set_name(name);
    out->set_signature(sk.signature);
    out->set_layout(sk.layout);
    for (const SymbolRange &r : sk.ranges)
      putRange(r, out->add_ranges());
    for (const std::string &s : k.symbols)
      out->add_symbols(s);
    for (size_t i = 0; i < k.inputs.size() + k.outputs.size(); ++i) {
      const bool in = i < k.inputs.size();
      const KernelBuffer &b = in ? k.inputs[i] : k.outputs[i - k.inputs.size()];
      artifact::SharedKernel::Buffer *ob = in ? out->add_inputs() : out->add_outputs();
      ob->set_name(b.name);
      ob->set_dtype(std::string(dtypeName(b.dtype)));
      for (const DimExpr &d : k.bufferDims.at(i))
        putDim(d, ob->add_dims());
    }
    for (const DimExpr &d : k.outerDims)
      putDim(d, out->add_outer_dims());
    putDim(k.innerDim, out->mutable_inner_dim());
    out->set_text(sk.text);
    auto putCode = [&](const std::shared_ptr<const runtime::KernelObject> &o, int32_t input,
                       artifact::KernelCode *code) {
      code->set_symbol(o->symbol);
      code->set_in_place_input(input);
      data.add(o->elf.data(), o->elf.size(), code->mutable_object());
    };
    if (!sk.object || std::any_of(sk.inPlace.begin(), sk.inPlace.end(),
                                  [](const SharedKernel::InPlace &p) { return !p.object; })) {
      diag.emitError(loc) << "cannot save kernel '" << name << "': it has no object code";
      return failure();
    }
    putCode(sk.object, -1, out->mutable_code());
    for (const SharedKernel::InPlace &p : sk.inPlace)
      putCode(p.object, p.input, out->add_in_place());
  }
  for (const auto &[kernel, why] : shared.perSize) {
    artifact::Symbolic::PerSize *p = meta.add_per_size();
    p->set_kernel(kernel);
    p->set_why(why);
  }
  meta.set_narrowed_because(shared.narrowedBecause);
  meta.set_seconds(shared.seconds);
  for (const std::string &s : open)
    meta.add_open(s);

  std::string metaBytes;
  if (!meta.SerializeToString(&metaBytes)) {
    diag.emitError(loc) << "cannot serialize the symbolic artifact's metadata";
    return failure();
  }
  runtime::Status st = writeFileAtomically(path, [&](int fd) {
    uint64_t written = 0;
    return writeFramed(fd, kSymbolicMagic, kSymbolicFormat, metaBytes, data, written);
  });
  if (!st.ok()) {
    diag.emitError(loc) << st.error;
    return failure();
  }
  return success();
}

FailureOr<SymbolicModel> loadSymbolicArtifact(const std::string &path, DiagnosticEngine &diag) {
  const Location loc = Location::file(path);
  auto fail = [&](const std::string &what) {
    diag.emitError(loc) << "symbolic artifact: " << what;
    return failure();
  };
  std::shared_ptr<Mapping> map;
  if (runtime::Status st =
          mapFile(path, map, [](const std::string &w) { return runtime::Status::failure(w); });
      !st.ok())
    return fail(st.error);
  const auto *bytes = static_cast<const uint8_t *>(map->base);
  Header h;
  if (runtime::Status st = checkFramed(bytes, map->size, kSymbolicMagic, kSymbolicFormat,
                                       "symbolic Kiln artifact", h);
      !st.ok())
    return fail(st.error);
  artifact::Symbolic meta;
  if (!meta.ParseFromArray(bytes + h.metaOffset, static_cast<int>(h.metaBytes)))
    return fail("corrupt metadata");
  if (runtime::Status st = checkCompiledFor(meta.kiln_version(), meta.cpu_requested(), meta.cpu(),
                                            meta.cpu_features());
      !st.ok())
    return fail(st.error);
  if (!meta.dnnl_isa().empty() && meta.dnnl_version() != runtime::onednn::version())
    return fail("compiled with oneDNN " + meta.dnnl_version() + "; this Kiln runs oneDNN " +
                runtime::onednn::version() + ": compile the model again");
  const uint8_t *dataBase = bytes + h.dataOffset;
  SymbolicModel m;
  m.fileBytes = map->size;
  m.model = meta.model();
  m.kilnVersion = meta.kiln_version();
  m.target = {meta.cpu_requested(), meta.cpu(), meta.cpu_features(), meta.dnnl_isa()};

  // The graph, its constants borrowed from the mapping.
  std::map<std::string, Tensor> blobs;
  for (const artifact::Symbolic::Constant &c : meta.constants()) {
    auto span = blobIn(dataBase, h.dataBytes, c.data());
    auto dtype = dtypeFromName(c.dtype());
    std::vector<int64_t> shape(c.shape().begin(), c.shape().end());
    const std::optional<int64_t> elements = elementsOfStored(shape);
    auto need = dtype && elements ? checkedByteSize(*elements, dtypeSize(*dtype), c.data().size())
                                  : std::nullopt;
    if (!span || !dtype || !need || *need != span->size())
      return fail("constant '" + c.name() + "' lies outside the file or does not fit its type");
    blobs.emplace(c.name(), Tensor::borrow(*dtype, shape, map, span->data()));
    m.constantBytes += span->size();
  }
  ParseOptions parse;
  parse.filename = path + " (its graph)";
  parse.blobs = &blobs;
  auto module = parseModule(meta.graph(), diag, parse); // its errors name the file
  if (failed(module))
    return failure();
  if ((*module)->graphs().size() != 1)
    return fail("it holds " + std::to_string((*module)->graphs().size()) + " graphs, not one");
  m.module = module.take();
  m.graph = m.module->graphs().front().get();

  CompileOptions &o = m.options;
  o.cpu = meta.cpu_requested();
  o.threads = meta.threads();
  o.ranges = getRanges(meta.ranges());
  for (const artifact::SymbolRange &r : meta.dims())
    o.dims[r.name()] = r.min();
  o.pipeline = meta.pipeline();
  o.useLibraries = meta.use_libraries();
  o.useKernels = meta.use_kernels();
  o.fuse = meta.fuse();
  o.shareKernels = !meta.no_kernel_sharing();
  if (meta.dnnl_layout() < 0 || meta.dnnl_layout() > static_cast<int>(LibraryLayout::Measure) ||
      meta.recurrent() < 0 || meta.recurrent() > static_cast<int>(RecurrentChoice::Measure) ||
      meta.threads() < 0 || meta.opt_level() < 0 || meta.opt_level() > 3)
    return fail("corrupt compile options");
  o.dnnlLayout = static_cast<LibraryLayout>(meta.dnnl_layout());
  o.recurrent = static_cast<RecurrentChoice>(meta.recurrent());
  o.optLevel = meta.opt_level();

  // The kernels: every object linked into one mapping.
  std::vector<std::string_view> objects;
  std::vector<const artifact::KernelCode *> codes;
  for (const artifact::SharedKernel &k : meta.kernels()) {
    codes.push_back(&k.code());
    for (const artifact::KernelCode &c : k.in_place())
      codes.push_back(&c);
  }
  for (const artifact::KernelCode *c : codes) {
    auto span = blobIn(dataBase, h.dataBytes, c->object());
    if (!span)
      return fail("the code of '" + c->symbol() + "' lies outside the file");
    objects.emplace_back(reinterpret_cast<const char *>(span->data()), span->size());
    m.codeBytes += span->size();
  }
  std::string why;
  std::shared_ptr<runtime::LoadedCode> code = runtime::LoadedCode::link(objects, why);
  if (!code)
    return fail(why);
  auto shared = std::make_shared<SharedKernels>();
  shared->ranges = getRanges(meta.kernel_ranges());
  size_t object = 0;
  auto codeOf = [&](const artifact::KernelCode &c, runtime::KernelFn &fn,
                    std::shared_ptr<const runtime::KernelObject> &obj) {
    fn = reinterpret_cast<runtime::KernelFn>(code->symbol(object, c.symbol()));
    obj = std::make_shared<runtime::KernelObject>(
        runtime::KernelObject{c.symbol(), std::string(objects[object])});
    ++object;
    return fn != nullptr;
  };
  for (const artifact::SharedKernel &in : meta.kernels()) {
    SharedKernel sk;
    sk.signature = in.signature();
    sk.layout = in.layout();
    sk.text = in.text();
    sk.ranges = getRanges(in.ranges());
    Kernel &k = sk.kernel; // what findSharedKernel reads: no body
    k.name = in.name();
    k.symbols.assign(in.symbols().begin(), in.symbols().end());
    bool ok = true;
    auto dims = [&](const auto &list, std::vector<DimExpr> &out) {
      for (const artifact::SymbolicDim &d : list) {
        auto e = getDim(d);
        ok = ok && e.has_value();
        out.push_back(e.value_or(DimExpr()));
      }
    };
    for (int i = 0; i < in.inputs_size() + in.outputs_size(); ++i) {
      const bool isInput = i < in.inputs_size();
      const auto &b = isInput ? in.inputs(i) : in.outputs(i - in.inputs_size());
      KernelBuffer kb;
      auto dtype = dtypeFromName(b.dtype());
      ok = ok && dtype.has_value();
      kb.dtype = dtype.value_or(DType::F32);
      kb.name = b.name();
      dims(b.dims(), k.bufferDims.emplace_back());
      for (const DimExpr &d : k.bufferDims.back())
        kb.shape.push_back(d.isConstant() ? d.constant() : -1);
      (isInput ? k.inputs : k.outputs).push_back(std::move(kb));
    }
    dims(in.outer_dims(), k.outerDims);
    for (const DimExpr &d : k.outerDims)
      k.outer.push_back(d.isConstant() ? d.constant() : -1);
    if (auto inner = getDim(in.inner_dim()))
      k.innerDim = *inner;
    else
      ok = false;
    k.inner = k.innerDim.isConstant() ? k.innerDim.constant() : -1;
    ok = ok && codeOf(in.code(), sk.fn, sk.object);
    for (const artifact::KernelCode &c : in.in_place()) {
      SharedKernel::InPlace &p = sk.inPlace.emplace_back();
      p.input = c.in_place_input();
      ok = ok && codeOf(c, p.fn, p.object);
    }
    // Every size the kernel reads is one findSharedKernel binds: a symbol
    // of its ranges (an expression over another would have no value).
    std::set<std::string> bound, used(k.symbols.begin(), k.symbols.end());
    for (const SymbolRange &r : sk.ranges)
      bound.insert(r.name);
    for (const std::vector<DimExpr> &dims : k.bufferDims)
      for (const DimExpr &d : dims)
        d.collectSymbols(used);
    for (const DimExpr &d : k.outerDims)
      d.collectSymbols(used);
    k.innerDim.collectSymbols(used);
    ok = ok && std::includes(bound.begin(), bound.end(), used.begin(), used.end());
    if (!ok)
      return fail("kernel '" + in.name() + "' is corrupt");
    shared->byName.emplace(in.name(), std::move(sk));
  }
  for (const artifact::Symbolic::PerSize &p : meta.per_size())
    shared->perSize.emplace_back(p.kernel(), p.why());
  shared->narrowedBecause = meta.narrowed_because();
  shared->seconds = meta.seconds();
  shared->owner = code;
  o.sharedKernels = std::move(shared);
  m.open.insert(meta.open().begin(), meta.open().end());
  return m;
}

} // namespace kiln::codegen
