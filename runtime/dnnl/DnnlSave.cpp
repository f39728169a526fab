//===- DnnlSave.cpp - oneDNN steps written to and read from artifacts ----===//
//
// A DnnlStep is saved as what recreates it: the primitive's kind and its
// operation's parameters (memory descriptors with the layouts the compiler
// chose, strides, pads, ...; rebuilt through oneDNN's checked initializers,
// never handed over as a raw struct), its post-ops, each argument's user and primitive
// memory descriptors, and the reordered constant weights as blobs. Loading
// creates the primitive again from those, under the thread count it was
// created with, and refuses (null, with the reason) when oneDNN now picks
// other layouts than the saved ones: the saved weights are in the old
// layout, so running would be a wrong answer, not a slow one. Descriptors
// are stored as raw structs, so an artifact is tied to the oneDNN version
// that wrote it (the artifact records it and its loader checks it).
//
//===----------------------------------------------------------------------===//
#include "runtime/ByteStream.h"
#include "runtime/dnnl/AttentionStep.h"
#include "runtime/dnnl/DnnlSteps.h"
#include "runtime/dnnl/RecurrentStep.h"

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <mutex>

namespace kiln::runtime::onednn {

using dnnl::memory;

namespace {

constexpr const char *kPrimitiveKind = "onednn.primitive";
constexpr const char *kReorderKind = "onednn.reorder";
constexpr const char *kConcatKind = "onednn.concat";

void putMd(ByteWriter &w, const memory::desc &md) {
  w.pod(md.data);
}

/// A descriptor as saved; a corrupt one (rank, kind or type out of range)
/// reads as the empty descriptor and makes `r` fail.
memory::desc getMd(ByteReader &r) {
  // The enum fields are checked as integers before the bytes become a
  // descriptor: loading an enum from a value outside its range is undefined.
  static_assert(sizeof(dnnl_data_type_t) == sizeof(int32_t) &&
                sizeof(dnnl_format_kind_t) == sizeof(int32_t));
  unsigned char raw[sizeof(dnnl_memory_desc_t)];
  r.bytes(raw, sizeof raw);
  int32_t dataType = 0, formatKind = 0;
  std::memcpy(&dataType, raw + offsetof(dnnl_memory_desc_t, data_type), sizeof dataType);
  std::memcpy(&formatKind, raw + offsetof(dnnl_memory_desc_t, format_kind), sizeof formatKind);
  if ((formatKind != dnnl_format_kind_undef && formatKind != dnnl_blocked &&
       formatKind != dnnl_format_kind_any) ||
      (dataType != dnnl_f32 && dataType != dnnl_data_type_undef)) {
    r.fail();
    return memory::desc();
  }
  dnnl_memory_desc_t d;
  std::memcpy(&d, raw, sizeof d);
  bool ok = d.ndims >= 0 && d.ndims <= DNNL_MAX_NDIMS && (d.ndims == 0 || d.data_type == dnnl_f32);
  constexpr int64_t kLimit = int64_t(1) << 40;
  for (int i = 0; ok && i < d.ndims; ++i)
    ok = d.dims[i] >= 0 && d.dims[i] < kLimit && d.padded_dims[i] >= d.dims[i] &&
         d.padded_dims[i] < kLimit && d.padded_offsets[i] >= 0 &&
         d.padded_offsets[i] <= d.padded_dims[i] - d.dims[i];
  ok = ok && d.offset0 >= 0 && d.offset0 < kLimit && d.extra.flags == 0;
  if (ok && d.format_kind == dnnl_blocked) {
    // What oneDNN's size computation divides by and indexes with.
    const dnnl_blocking_desc_t &b = d.format_desc.blocking;
    ok = b.inner_nblks >= 0 && b.inner_nblks <= DNNL_MAX_NDIMS;
    int64_t block[DNNL_MAX_NDIMS];
    std::fill(block, block + DNNL_MAX_NDIMS, 1);
    for (int i = 0; ok && i < b.inner_nblks; ++i) {
      ok = b.inner_blks[i] >= 1 && b.inner_blks[i] <= 1024 && b.inner_idxs[i] >= 0 &&
           b.inner_idxs[i] < d.ndims;
      if (ok)
        block[b.inner_idxs[i]] *= b.inner_blks[i];
    }
    for (int i = 0; ok && i < d.ndims; ++i)
      ok = b.strides[i] >= 0 && b.strides[i] < kLimit && block[i] <= kLimit &&
           d.padded_dims[i] % block[i] == 0;
  }
  if (!ok) {
    r.fail();
    return memory::desc();
  }
  return memory::desc(d);
}

/// Whether `arg` is one a step binds to a buffer or constant of its own:
/// the anchor's src, weights or bias, or a binary post-op's second source
/// (never its dst or scratchpad, which the step binds itself).
bool isOperandArg(int arg) {
  if (arg == DNNL_ARG_SRC || arg == DNNL_ARG_WEIGHTS || arg == DNNL_ARG_BIAS)
    return true;
  for (int i = 0; i < 32; ++i)
    if (arg == (DNNL_ARG_ATTR_MULTIPLE_POST_OP(i) | DNNL_ARG_SRC_1))
      return true;
  return false;
}

/// Whether `md` fits in buffer `id` of `bytes` (the step's buffers).
bool fits(const memory::desc &md, int64_t id, std::span<const size_t> bytes) {
  return id >= 0 && static_cast<size_t>(id) < bytes.size() &&
         md.get_size() <= std::max<size_t>(bytes[static_cast<size_t>(id)], 4);
}

/// The spatial parameters of an op descriptor, as saved.
void putDims(ByteWriter &w, const dnnl_dims_t d, int n) {
  w.vec(std::vector<int64_t>(d, d + n));
}

/// Reads putDims' values into `d` (n of them, each in [lo, 2^20)).
bool getDims(ByteReader &r, dnnl_dims_t d, int n, int64_t lo) {
  std::vector<int64_t> v = r.vec<int64_t>();
  if (!r.ok() || static_cast<int>(v.size()) != n)
    return false;
  for (int i = 0; i < n; ++i) {
    if (v[static_cast<size_t>(i)] < lo || v[static_cast<size_t>(i)] >= (int64_t(1) << 20))
      return false;
    d[i] = v[static_cast<size_t>(i)];
  }
  return true;
}

/// Writes the op descriptor of `pd` as its parameters (not the raw struct:
/// loading builds it again through oneDNN's own checked initializers, so a
/// damaged one is an error, not a crash inside oneDNN). False for a kind
/// artifacts do not store.
bool putOpDesc(ByteWriter &w, const_dnnl_primitive_desc_t pd, dnnl_primitive_kind_t kind) {
  const_dnnl_op_desc_t raw = nullptr;
  if (dnnl_primitive_desc_query(pd, dnnl_query_op_d, 0, &raw) != dnnl_success || !raw)
    return false;
  w.pod<int32_t>(kind);
  if (kind == dnnl_convolution || kind == dnnl_deconvolution) {
    const auto &d = *static_cast<const dnnl_convolution_desc_t *>(raw);
    const int n = std::max(0, d.src_desc.ndims - 2);
    w.pod<int32_t>(d.prop_kind);
    w.pod<int32_t>(d.alg_kind);
    for (const dnnl_memory_desc_t *md : {&d.src_desc, &d.weights_desc, &d.bias_desc, &d.dst_desc})
      w.pod(*md);
    putDims(w, d.strides, n);
    putDims(w, d.dilates, n);
    putDims(w, d.padding[0], n);
    putDims(w, d.padding[1], n);
    return true;
  }
  if (kind == dnnl_matmul) {
    const auto &d = *static_cast<const dnnl_matmul_desc_t *>(raw);
    for (const dnnl_memory_desc_t *md : {&d.src_desc, &d.weights_desc, &d.bias_desc, &d.dst_desc})
      w.pod(*md);
    return true;
  }
  if (kind == dnnl_pooling_v2) {
    const auto &d = *static_cast<const dnnl_pooling_v2_desc_t *>(raw);
    const int n = std::max(0, d.src_desc.ndims - 2);
    w.pod<int32_t>(d.prop_kind);
    w.pod<int32_t>(d.alg_kind);
    w.pod(d.src_desc);
    w.pod(d.dst_desc);
    putDims(w, d.strides, n);
    putDims(w, d.kernel, n);
    putDims(w, d.dilation, n);
    putDims(w, d.padding[0], n);
    putDims(w, d.padding[1], n);
    return true;
  }
  return false;
}

/// An op descriptor of any saved kind.
union OpDesc {
  dnnl_convolution_desc_t conv;
  dnnl_matmul_desc_t matmul;
  dnnl_pooling_v2_desc_t pool;
};

/// Reads putOpDesc's parameters and builds the descriptor with oneDNN's
/// initializer; false when they are corrupt or oneDNN refuses them.
bool getOpDesc(ByteReader &r, OpDesc &out) {
  const auto kind = static_cast<dnnl_primitive_kind_t>(r.pod<int32_t>());
  if (kind == dnnl_convolution || kind == dnnl_deconvolution) {
    const auto prop = static_cast<dnnl_prop_kind_t>(r.pod<int32_t>());
    const auto alg = static_cast<dnnl_alg_kind_t>(r.pod<int32_t>());
    const memory::desc src = getMd(r), wei = getMd(r), bias = getMd(r), dst = getMd(r);
    const int n = src.data.ndims - 2;
    dnnl_dims_t strides{}, dilates{}, padL{}, padR{};
    if (!r.ok() || n < 1 || n > 3 || prop != dnnl_forward_inference || !getDims(r, strides, n, 1) ||
        !getDims(r, dilates, n, 0) || !getDims(r, padL, n, 0) || !getDims(r, padR, n, 0))
      return false;
    auto init = kind == dnnl_convolution ? dnnl_dilated_convolution_forward_desc_init
                                         : dnnl_dilated_deconvolution_forward_desc_init;
    return init(&out.conv, prop, alg, &src.data, &wei.data, bias.data.ndims ? &bias.data : nullptr,
                &dst.data, strides, dilates, padL, padR) == dnnl_success;
  }
  if (kind == dnnl_matmul) {
    const memory::desc src = getMd(r), wei = getMd(r), bias = getMd(r), dst = getMd(r);
    return r.ok() &&
           dnnl_matmul_desc_init(&out.matmul, &src.data, &wei.data,
                                 bias.data.ndims ? &bias.data : nullptr, &dst.data) == dnnl_success;
  }
  if (kind == dnnl_pooling_v2) {
    const auto prop = static_cast<dnnl_prop_kind_t>(r.pod<int32_t>());
    const auto alg = static_cast<dnnl_alg_kind_t>(r.pod<int32_t>());
    const memory::desc src = getMd(r), dst = getMd(r);
    const int n = src.data.ndims - 2;
    dnnl_dims_t strides{}, kernel{}, dilation{}, padL{}, padR{};
    if (!r.ok() || n < 1 || n > 3 || prop != dnnl_forward_inference || !getDims(r, strides, n, 1) ||
        !getDims(r, kernel, n, 1) || !getDims(r, dilation, n, 0) || !getDims(r, padL, n, 0) ||
        !getDims(r, padR, n, 0))
      return false;
    return dnnl_pooling_v2_forward_desc_init(&out.pool, prop, alg, &src.data, &dst.data, strides,
                                             kernel, dilation, padL, padR) == dnnl_success;
  }
  return false;
}

/// The post-ops of `attr` written as (kind, params) rows.
void putPostOps(ByteWriter &w, const_dnnl_primitive_attr_t attr) {
  const_dnnl_post_ops_t po = nullptr;
  dnnl_primitive_attr_get_post_ops(attr, &po);
  const int n = po ? dnnl_post_ops_len(po) : 0;
  w.pod<int32_t>(n);
  for (int i = 0; i < n; ++i) {
    const dnnl_primitive_kind_t k = dnnl_post_ops_get_kind(po, i);
    w.pod<int32_t>(k);
    if (k == dnnl_sum) {
      float scale = 1.f;
      dnnl_post_ops_get_params_sum(po, i, &scale);
      w.pod(scale);
    } else if (k == dnnl_eltwise) {
      float scale = 1.f, alpha = 0.f, beta = 0.f;
      dnnl_alg_kind_t alg{};
      dnnl_post_ops_get_params_eltwise(po, i, &scale, &alg, &alpha, &beta);
      w.pod(scale);
      w.pod<int32_t>(alg);
      w.pod(alpha);
      w.pod(beta);
    } else if (k == dnnl_binary) {
      dnnl_alg_kind_t alg{};
      const dnnl_memory_desc_t *md = nullptr;
      dnnl_post_ops_get_params_binary(po, i, &alg, &md);
      w.pod<int32_t>(alg);
      w.pod(*md);
    }
  }
}

/// Reads putPostOps' rows back; false on a kind it does not know.
bool getPostOps(ByteReader &r, dnnl::post_ops &po) {
  const int32_t n = r.pod<int32_t>();
  for (int32_t i = 0; i < n && r.ok(); ++i) {
    const auto k = static_cast<dnnl_primitive_kind_t>(r.pod<int32_t>());
    if (k == dnnl_sum) {
      po.append_sum(r.pod<float>());
    } else if (k == dnnl_eltwise) {
      const float scale = r.pod<float>();
      const auto alg = static_cast<dnnl::algorithm>(r.pod<int32_t>());
      const float alpha = r.pod<float>(), beta = r.pod<float>();
      po.append_eltwise(scale, alg, alpha, beta);
    } else if (k == dnnl_binary) {
      const auto alg = static_cast<dnnl::algorithm>(r.pod<int32_t>());
      const memory::desc md = getMd(r);
      if (!r.ok())
        return false;
      po.append_binary(alg, md);
    } else {
      return false;
    }
  }
  return r.ok();
}

/// A reorder between two descriptors, or none when they are equal.
std::optional<dnnl::reorder> reorderIfNeeded(const memory::desc &from, const memory::desc &to) {
  if (from == to)
    return std::nullopt;
  return dnnl::reorder(dnnl::reorder::primitive_desc(cpuEngine(), from, cpuEngine(), to));
}

std::shared_ptr<const ExternStep> loadPrimitive(ByteReader &r,
                                                std::span<const std::span<const uint8_t>> blobs,
                                                std::span<const size_t> bufferBytes,
                                                std::shared_ptr<const void> owner,
                                                std::string &why) {
  auto step = std::make_shared<DnnlStep>();
  step->name = r.str();
  step->createdThreads = std::clamp(r.pod<int32_t>(), 1, 4096);
  OpDesc opDesc;
  std::memset(&opDesc, 0, sizeof(opDesc));
  if (!getOpDesc(r, opDesc)) {
    why = "a corrupt or refused operation in oneDNN step '" + step->name + "'";
    return nullptr;
  }
  dnnl::post_ops po;
  if (!getPostOps(r, po)) {
    why = "a corrupt post-op list in oneDNN step '" + step->name + "'";
    return nullptr;
  }
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  attr.set_post_ops(po);

  ScopedThreads threads(step->createdThreads);
  dnnl_primitive_desc_t rawPd = nullptr;
  if (dnnl_primitive_desc_create(&rawPd, &opDesc, attr.get(), cpuEngine().get(), nullptr) !=
      dnnl_success) {
    why = "oneDNN cannot create the primitive of step '" + step->name + "' on this machine";
    return nullptr;
  }
  dnnl::primitive_desc pd(rawPd);
  auto layoutChanged = [&](const char *what) {
    why = "oneDNN picks another " + std::string(what) + " layout for step '" + step->name +
          "' on this machine than the artifact was compiled with; compile the model here";
    return nullptr;
  };

  const uint32_t numRuntime = r.pod<uint32_t>();
  for (uint32_t i = 0; i < numRuntime && r.ok(); ++i) {
    RuntimeArg a{};
    a.arg = r.pod<int32_t>();
    a.buffer = r.pod<int32_t>();
    a.userMd = getMd(r);
    a.primMd = getMd(r);
    const bool reorders = r.pod<uint8_t>() != 0;
    a.expand = r.pod<uint8_t>() != 0;
    a.expandFrom = r.vec<int64_t>();
    a.expandTo = r.vec<int64_t>();
    a.scale = r.pod<float>();
    if (!r.ok())
      break;
    int64_t elements = 1;
    for (int64_t d : a.expandFrom)
      elements = elements < 0 || d < 0 || d > (int64_t(1) << 40) || elements > (int64_t(1) << 44)
                     ? -1
                     : elements * d;
    // An expanded operand is broadcast from expandFrom to expandTo: same
    // rank, each dim 1 or the target's, nothing empty.
    bool broadcastable = !a.expand || (a.expandFrom.size() == a.expandTo.size() &&
                                       !a.expandTo.empty() && a.expandTo.size() <= 12);
    for (size_t d = 0; a.expand && broadcastable && d < a.expandTo.size(); ++d)
      broadcastable = a.expandTo[d] >= 1 && a.expandTo[d] < (int64_t(1) << 32) &&
                      (a.expandFrom[d] == 1 || a.expandFrom[d] == a.expandTo[d]);
    const bool inBuffer =
        broadcastable && a.expand
            ? a.buffer >= 0 && static_cast<size_t>(a.buffer) < bufferBytes.size() &&
                  elements >= 0 &&
                  static_cast<size_t>(elements) * 4 <=
                      std::max<size_t>(bufferBytes[static_cast<size_t>(a.buffer)], 4) &&
                  product(a.expandTo) == product(a.userMd.dims())
            : fits(a.userMd, a.buffer, bufferBytes);
    if (!inBuffer) {
      why = "an operand of oneDNN step '" + step->name + "' does not fit its buffer";
      return nullptr;
    }
    if (!isOperandArg(a.arg) || std::any_of(step->runtimeArgs.begin(), step->runtimeArgs.end(),
                                            [&](const RuntimeArg &o) { return o.arg == a.arg; })) {
      why = "a corrupt operand of oneDNN step '" + step->name + "'";
      return nullptr;
    }
    // What the primitive reads through this argument is what the step
    // binds there (oneDNN reads by its own descriptor, not the memory's).
    if (pd.query_md(dnnl::query::exec_arg_md, a.arg) != (reorders ? a.primMd : a.userMd))
      return layoutChanged("operand");
    if (reorders)
      a.toPrim = reorderIfNeeded(a.userMd, a.primMd);
    step->runtimeArgs.push_back(std::move(a));
  }
  const uint32_t numConst = r.pod<uint32_t>();
  for (uint32_t i = 0; i < numConst && r.ok(); ++i) {
    const int32_t arg = r.pod<int32_t>();
    const memory::desc md = getMd(r);
    const uint32_t blob = r.pod<uint32_t>();
    if (!r.ok() || blob >= blobs.size() || blobs[blob].size() < md.get_size()) {
      why = "a constant of oneDNN step '" + step->name + "' is missing from the artifact";
      return nullptr;
    }
    if (!isOperandArg(arg) ||
        std::any_of(step->constArgs.begin(), step->constArgs.end(),
                    [&](const ConstArg &o) { return o.arg == arg; }) ||
        std::any_of(step->runtimeArgs.begin(), step->runtimeArgs.end(),
                    [&](const RuntimeArg &o) { return o.arg == arg; })) {
      why = "a corrupt constant of oneDNN step '" + step->name + "'";
      return nullptr;
    }
    if (pd.query_md(dnnl::query::exec_arg_md, arg) != md)
      return layoutChanged("weight");
    step->constArgs.push_back(
        {arg, memory(md, cpuEngine(), const_cast<uint8_t *>(blobs[blob].data()))});
  }
  step->outBuffer = r.pod<int32_t>();
  step->dstUserMd = getMd(r);
  step->dstPrimMd = getMd(r);
  step->sumBuffer = r.pod<int32_t>();
  step->sumUserMd = getMd(r);
  if (!r.done()) {
    why = "a corrupt oneDNN step '" + step->name + "'";
    return nullptr;
  }
  if (!fits(step->dstUserMd, step->outBuffer, bufferBytes) ||
      (step->sumBuffer >= 0 && !fits(step->sumUserMd, step->sumBuffer, bufferBytes))) {
    why = "the result of oneDNN step '" + step->name + "' does not fit its buffer";
    return nullptr;
  }
  if (pd.dst_desc() != step->dstPrimMd)
    return layoutChanged("result");
  step->dstFromPrim = reorderIfNeeded(step->dstPrimMd, step->dstUserMd);
  if (step->sumBuffer >= 0)
    step->sumToPrim = reorderIfNeeded(step->sumUserMd, step->dstPrimMd);
  step->scratchMd = pd.scratchpad_desc();
  step->prim = dnnl::primitive(pd);
  step->keepAlive.push_back(std::move(owner));
  return step;
}

} // namespace

bool DnnlStep::save(runtime::SavedStep &out, std::string &why) const {
  const_dnnl_primitive_desc_t pd = prim.get_primitive_desc();
  dnnl_primitive_kind_t kind{};
  const_dnnl_primitive_attr_t attr = nullptr;
  ByteWriter w;
  w.str(name);
  w.pod<int32_t>(createdThreads);
  if (dnnl_primitive_desc_query(pd, dnnl_query_primitive_kind, 0, &kind) != dnnl_success ||
      dnnl_primitive_desc_get_attr(pd, &attr) != dnnl_success || !putOpDesc(w, pd, kind)) {
    why = "oneDNN step '" + name + "' has a primitive kind artifacts do not store";
    return false;
  }
  putPostOps(w, attr);
  w.pod<uint32_t>(static_cast<uint32_t>(runtimeArgs.size()));
  for (const RuntimeArg &a : runtimeArgs) {
    w.pod<int32_t>(a.arg);
    w.pod<int32_t>(a.buffer);
    putMd(w, a.userMd);
    putMd(w, a.primMd);
    w.pod<uint8_t>(a.toPrim.has_value());
    w.pod<uint8_t>(a.expand);
    w.vec(a.expandFrom);
    w.vec(a.expandTo);
    w.pod(a.scale);
  }
  w.pod<uint32_t>(static_cast<uint32_t>(constArgs.size()));
  for (const ConstArg &c : constArgs) {
    const memory::desc md = c.mem.get_desc();
    w.pod<int32_t>(c.arg);
    putMd(w, md);
    w.pod<uint32_t>(static_cast<uint32_t>(out.blobs.size()));
    out.blobs.emplace_back(static_cast<const uint8_t *>(c.mem.get_data_handle()), md.get_size());
  }
  w.pod<int32_t>(outBuffer);
  putMd(w, dstUserMd);
  putMd(w, dstPrimMd);
  w.pod<int32_t>(sumBuffer);
  putMd(w, sumUserMd);
  out.kind = kPrimitiveKind;
  out.payload = w.take();
  return true;
}

uint64_t DnnlStep::constantBytes() const {
  uint64_t total = 0;
  for (const ConstArg &c : constArgs)
    total += c.mem.get_desc().get_size();
  return total;
}

bool ReorderStep::save(runtime::SavedStep &out, std::string &) const {
  ByteWriter w;
  w.str(name_);
  putMd(w, from_);
  putMd(w, to_);
  out.kind = kReorderKind;
  out.payload = w.take();
  return true;
}

bool ConcatStep::save(runtime::SavedStep &out, std::string &) const {
  ByteWriter w;
  w.str(name_);
  w.pod<int32_t>(createdThreads_);
  w.pod<uint32_t>(static_cast<uint32_t>(srcs_.size()));
  for (const memory::desc &md : srcs_)
    putMd(w, md);
  putMd(w, dst_);
  out.kind = kConcatKind;
  out.payload = w.take();
  return true;
}

std::shared_ptr<const runtime::ExternStep>
loadStep(const std::string &kind, std::string_view payload,
         std::span<const std::span<const uint8_t>> blobs, std::span<const size_t> bufferBytes,
         std::shared_ptr<const void> owner, std::string &why) {
  if (kind == kRecurrentKind)
    return loadRecurrentStep(payload, blobs, bufferBytes, why);
  if (kind == kAttentionKind)
    return loadAttentionStep(payload, blobs, bufferBytes, std::move(owner), why);
  ByteReader r(payload);
  try {
    if (kind == kPrimitiveKind)
      return loadPrimitive(r, blobs, bufferBytes, std::move(owner), why);
    if (kind == kReorderKind) {
      std::string name = r.str();
      memory::desc from = getMd(r), to = getMd(r);
      if (!r.done() || bufferBytes.size() != 2 || !fits(from, 0, bufferBytes) ||
          !fits(to, 1, bufferBytes)) {
        why = "a corrupt oneDNN reorder step";
        return nullptr;
      }
      return std::make_shared<ReorderStep>(std::move(name), from, to);
    }
    if (kind == kConcatKind) {
      std::string name = r.str();
      const int32_t threads = r.pod<int32_t>();
      std::vector<memory::desc> srcs(std::min<uint32_t>(r.pod<uint32_t>(), 4096));
      for (memory::desc &md : srcs)
        md = getMd(r);
      memory::desc dst = getMd(r);
      bool inBuffers = bufferBytes.size() == srcs.size() + 1 &&
                       fits(dst, static_cast<int64_t>(srcs.size()), bufferBytes);
      for (size_t i = 0; inBuffers && i < srcs.size(); ++i)
        inBuffers = fits(srcs[i], static_cast<int64_t>(i), bufferBytes);
      if (!r.done() || !inBuffers) {
        why = "a corrupt oneDNN concat step";
        return nullptr;
      }
      ScopedThreads scoped(std::max(1, threads));
      return std::make_shared<ConcatStep>(std::move(name), srcs, dst);
    }
  } catch (const dnnl::error &e) {
    why = std::string("oneDNN cannot rebuild a saved step: ") + e.what();
    return nullptr;
  }
  why = "unknown step kind '" + kind + "'";
  return nullptr;
}

namespace {

struct IsaName {
  const char *name;
  dnnl::cpu_isa isa;
};

const IsaName kIsaNames[] = {
    {"avx512_core_amx", dnnl::cpu_isa::avx512_core_amx},
    {"avx512_core_bf16", dnnl::cpu_isa::avx512_core_bf16},
    {"avx512_core_vnni", dnnl::cpu_isa::avx512_core_vnni},
    {"avx512_core", dnnl::cpu_isa::avx512_core},
    {"avx2_vnni", dnnl::cpu_isa::avx2_vnni},
    {"avx2", dnnl::cpu_isa::avx2},
    {"avx", dnnl::cpu_isa::avx},
    {"sse41", dnnl::cpu_isa::sse41},
};

std::mutex gIsaMutex;
std::string gCapped; ///< the ISA this process capped oneDNN at; empty: none
std::string gCappedFor;

} // namespace

runtime::Status capIsa(const std::string &isa, const std::string &forWhat) {
  std::lock_guard<std::mutex> lock(gIsaMutex);
  if (gCapped == isa)
    return runtime::Status::success();
  if (gCapped.empty() && isa == "all") {
    // Uncapped from now on: a later cap would not apply to primitives this
    // compile creates, so it is refused, naming this one.
    gCapped = isa;
    gCappedFor = forWhat;
    return runtime::Status::success();
  }
  if (!gCapped.empty())
    return runtime::Status::failure("this process already compiled for " + gCappedFor +
                                    " (oneDNN ISA " + gCapped +
                                    "); oneDNN takes one ISA cap per process, so " + forWhat +
                                    " (" + isa + ") needs a process of its own");
  const IsaName *row = nullptr;
  for (const IsaName &r : kIsaNames)
    if (isa == r.name)
      row = &r;
  if (!row)
    return runtime::Status::failure("unknown oneDNN ISA '" + isa + "' for " + forWhat);
  try {
    dnnl::set_max_cpu_isa(row->isa);
  } catch (const dnnl::error &e) {
    return runtime::Status::failure("cannot cap oneDNN at ISA " + isa + " for " + forWhat +
                                    ": oneDNN already ran in this process without a cap (" +
                                    e.what() + ")");
  }
  gCapped = isa;
  gCappedFor = forWhat;
  return runtime::Status::success();
}

std::string version() {
  const dnnl_version_t *v = dnnl_version();
  return "oneDNN " + std::to_string(v->major) + "." + std::to_string(v->minor) + "." +
         std::to_string(v->patch) + " (cpu runtime " +
         (v->cpu_runtime == DNNL_RUNTIME_OMP ? "OpenMP" : "other") + ")";
}

} // namespace kiln::runtime::onednn
