//===- RecurrentStep.cpp - One recurrent layer as a oneDNN RNN call -------===//
#include "runtime/dnnl/RecurrentStep.h"

#include "runtime/ByteStream.h"
#include "runtime/dnnl/DnnlSteps.h"
#include "runtime/dnnl/RecurrentKernel.h"

#include <algorithm>
#include <cstring>
#include <unordered_map>

namespace kiln::runtime::onednn {

using dnnl::memory;
using tag = memory::format_tag;

int64_t RecurrentSpec::gates() const {
  return cell == Cell::Lstm ? 4 : cell == Cell::Rnn ? 1 : 3;
}

const char *RecurrentSpec::cellName() const {
  switch (cell) {
  case Cell::Lstm:
    return "lstm";
  case Cell::Gru:
    return "gru";
  case Cell::LbrGru:
    return "lbr_gru";
  case Cell::Rnn:
    return "rnn_tanh";
  }
  return "?";
}

namespace {

memory::desc f32Md(const dims &d, tag t) {
  return memory::desc(d, memory::data_type::f32, t);
}

dnnl::rnn_direction directionOf(RecurrentSpec::Direction d) {
  switch (d) {
  case RecurrentSpec::Direction::Forward:
    return dnnl::rnn_direction::unidirectional_left2right;
  case RecurrentSpec::Direction::Reverse:
    return dnnl::rnn_direction::unidirectional_right2left;
  case RecurrentSpec::Direction::Bidirectional:
    break;
  }
  return dnnl::rnn_direction::bidirectional_concat;
}

size_t alignUp(size_t n) {
  return (n + 63) / 64 * 64;
}

} // namespace

RecurrentStep::RecurrentStep(std::string name, const RecurrentSpec &spec,
                             std::vector<float> weightsLayer, std::vector<float> weightsIter,
                             std::vector<float> bias)
    : name_(std::move(name)), spec_(spec), weightsLayer_(std::move(weightsLayer)),
      weightsIter_(std::move(weightsIter)), bias_(std::move(bias)) {
  const RecurrentSpec &s = spec_;
  if (s.impl == RecurrentSpec::Impl::Kiln) {
    if (!RecurrentKernel::supports(s.cell))
      throw dnnl::error(dnnl_unimplemented, "Kiln's recurrent kernel does not compute this cell");
    kernel_ = std::make_unique<RecurrentKernel>(s, weightsLayer_, weightsIter_, bias_);
    impl_ = std::string("kiln:") + kernel_->isa();
    return;
  }
  const int64_t d = s.dirs(), g = s.gates(), h = s.hidden;
  srcLayerMd_ = f32Md({s.seq, s.batch, s.input}, tag::tnc);
  dstLayerMd_ = f32Md({s.seq, s.batch, d * h}, tag::tnc);
  dstIterMd_ = f32Md({1, d, s.batch, h}, tag::ldnc);
  srcIterMd_ = s.hasH0 ? dstIterMd_ : memory::desc();
  const memory::desc srcIterC = s.hasC0 ? dstIterMd_ : memory::desc();
  const memory::desc wl = f32Md({1, d, s.input, g, h}, tag::any);
  const memory::desc wi = f32Md({1, d, h, g, h}, tag::any);
  const memory::desc bm = f32Md({1, d, s.biasGates(), h}, tag::ldgo);
  const auto prop = dnnl::prop_kind::forward_inference;
  const auto dir = directionOf(s.direction);
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  dnnl::engine &eng = cpuEngine();
  ScopedThreads threads(s.threads);
  dnnl::primitive_desc pd;
  switch (s.cell) {
  case RecurrentSpec::Cell::Lstm: {
    dnnl::lstm_forward::primitive_desc p(
        dnnl::lstm_forward::desc(prop, dir, srcLayerMd_, srcIterMd_, srcIterC, wl, wi, bm,
                                 dstLayerMd_, dstIterMd_, dstIterMd_),
        attr, eng);
    prim_ = dnnl::lstm_forward(p);
    pd = p;
    break;
  }
  case RecurrentSpec::Cell::Gru: {
    dnnl::gru_forward::primitive_desc p(dnnl::gru_forward::desc(prop, dir, srcLayerMd_, srcIterMd_,
                                                                wl, wi, bm, dstLayerMd_,
                                                                dstIterMd_),
                                        attr, eng);
    prim_ = dnnl::gru_forward(p);
    pd = p;
    break;
  }
  case RecurrentSpec::Cell::LbrGru: {
    dnnl::lbr_gru_forward::primitive_desc p(dnnl::lbr_gru_forward::desc(prop, dir, srcLayerMd_,
                                                                        srcIterMd_, wl, wi, bm,
                                                                        dstLayerMd_, dstIterMd_),
                                            attr, eng);
    prim_ = dnnl::lbr_gru_forward(p);
    pd = p;
    break;
  }
  case RecurrentSpec::Cell::Rnn: {
    dnnl::vanilla_rnn_forward::primitive_desc p(
        dnnl::vanilla_rnn_forward::desc(prop, dnnl::algorithm::eltwise_tanh, dir, srcLayerMd_,
                                        srcIterMd_, wl, wi, bm, dstLayerMd_, dstIterMd_),
        attr, eng);
    prim_ = dnnl::vanilla_rnn_forward(p);
    pd = p;
    break;
  }
  }
  scratchMd_ = pd.scratchpad_desc();
  workspaceMd_ = pd.query_md(dnnl::query::exec_arg_md, DNNL_ARG_WORKSPACE);
  impl_ = pd.impl_info_str();
  const memory::desc wlPrim = pd.query_md(dnnl::query::exec_arg_md, DNNL_ARG_WEIGHTS_LAYER);
  const memory::desc wiPrim = pd.query_md(dnnl::query::exec_arg_md, DNNL_ARG_WEIGHTS_ITER);
  dnnl::stream stream(eng);
  auto pack = [&](std::vector<float> &plain, const dims &dm, const memory::desc &prim) {
    memory user(f32Md(dm, tag::ldigo), eng, plain.data());
    memory packed(prim, eng);
    dnnl::reorder(user, packed).execute(stream, user, packed);
    return packed;
  };
  packedLayer_ = pack(weightsLayer_, {1, d, s.input, g, h}, wlPrim);
  packedIter_ = pack(weightsIter_, {1, d, h, g, h}, wiPrim);
  stream.wait();
  biasMem_ = memory(bm, eng, bias_.data());
}

struct RecurrentStep::Binding {
  std::unordered_map<int, memory> args;
};

RecurrentStep::~RecurrentStep() = default;

std::unique_ptr<RecurrentStep::Binding> RecurrentStep::takeBinding() const {
  if (std::unique_ptr<Binding> kept = bindings_.take())
    return kept;
  dnnl::engine &eng = cpuEngine();
  auto b = std::make_unique<Binding>();
  b->args = {
      {DNNL_ARG_SRC_LAYER, memory(srcLayerMd_, eng, nullptr)},
      {DNNL_ARG_WEIGHTS_LAYER, packedLayer_},
      {DNNL_ARG_WEIGHTS_ITER, packedIter_},
      {DNNL_ARG_BIAS, biasMem_},
      {DNNL_ARG_DST_LAYER, memory(dstLayerMd_, eng, nullptr)},
      {DNNL_ARG_DST_ITER, memory(dstIterMd_, eng, nullptr)},
      {DNNL_ARG_SCRATCHPAD, memory(scratchMd_, eng, nullptr)},
  };
  if (workspaceMd_.get_size() > 0)
    b->args.emplace(DNNL_ARG_WORKSPACE, memory(workspaceMd_, eng, nullptr));
  if (spec_.hasH0)
    b->args.emplace(DNNL_ARG_SRC_ITER, memory(srcIterMd_, eng, nullptr));
  if (spec_.hasC0)
    b->args.emplace(DNNL_ARG_SRC_ITER_C, memory(dstIterMd_, eng, nullptr));
  if (spec_.cell == RecurrentSpec::Cell::Lstm)
    b->args.emplace(DNNL_ARG_DST_ITER_C, memory(dstIterMd_, eng, nullptr));
  return b;
}

std::string RecurrentStep::detail() const {
  static const char *const kDirections[] = {"forward", "reverse", "bidirectional"};
  return impl_ + " " + spec_.cellName() + " " + kDirections[static_cast<int>(spec_.direction)] +
         " seq " + std::to_string(spec_.seq) + " batch " + std::to_string(spec_.batch) +
         " hidden " + std::to_string(spec_.hidden) + " threads " + std::to_string(spec_.threads);
}

runtime::Status RecurrentStep::run(std::span<void *const> buffers,
                                   const runtime::StepContext &ctx) const {
  const RecurrentSpec &s = spec_;
  if (kernel_) {
    size_t next = 0;
    auto in = [&] { return static_cast<const float *>(buffers[next++]); };
    const float *x = in(), *h0 = s.hasH0 ? in() : nullptr, *c0 = s.hasC0 ? in() : nullptr;
    float *out[3] = {};
    for (size_t i = 0; next < buffers.size(); ++i)
      out[i] = static_cast<float *>(buffers[next++]);
    if (!kernel_->run(x, h0, c0, out[0], out[1], out[2],
                      std::max(1, std::min(ctx.threads, s.threads))))
      return runtime::Status::failure(name_ + ": out of memory for its scratch");
    return runtime::Status::success();
  }
  ScopedThreads threads(std::max(1, std::min(ctx.threads, s.threads)));
  try {
    size_t next = 0;
    void *x = buffers[next++];
    void *h0 = s.hasH0 ? buffers[next++] : nullptr;
    void *c0 = s.hasC0 ? buffers[next++] : nullptr;
    void *y = buffers[next++];
    void *yh = buffers[next++];
    void *yc = s.cell == RecurrentSpec::Cell::Lstm ? buffers[next++] : nullptr;
    // One scratch block: oneDNN's scratchpad, its workspace, and the
    // [S, B, 2H] output of a bidirectional layer.
    const bool bidir = s.dirs() == 2;
    const size_t scratchBytes = alignUp(scratchMd_.get_size());
    const size_t workspaceBytes = alignUp(workspaceMd_.get_size());
    const size_t layerBytes = bidir ? dstLayerMd_.get_size() : 0;
    char *scratch =
        static_cast<char *>(threadScratch(scratchBytes + workspaceBytes + layerBytes + 64));
    void *dstLayer = bidir ? scratch + scratchBytes + workspaceBytes : y;
    std::unique_ptr<Binding> b = takeBinding();
    auto bind = [&](int arg, void *p) { b->args.at(arg).set_data_handle(p); };
    bind(DNNL_ARG_SRC_LAYER, x);
    bind(DNNL_ARG_DST_LAYER, dstLayer);
    bind(DNNL_ARG_DST_ITER, yh);
    bind(DNNL_ARG_SCRATCHPAD, scratch);
    if (workspaceBytes > 0)
      bind(DNNL_ARG_WORKSPACE, scratch + scratchBytes);
    if (h0)
      bind(DNNL_ARG_SRC_ITER, h0);
    if (c0)
      bind(DNNL_ARG_SRC_ITER_C, c0);
    if (yc)
      bind(DNNL_ARG_DST_ITER_C, yc);
    dnnl::stream &stream = threadStream();
    prim_.execute(stream, b->args);
    stream.wait();
    bindings_.give(std::move(b));
    if (bidir) {
      // [S, B, 2, H] -> [S, 2, B, H].
      const int64_t h = s.hidden, b = s.batch;
      const float *from = static_cast<const float *>(dstLayer);
      float *to = static_cast<float *>(y);
      for (int64_t t = 0; t < s.seq; ++t)
        for (int64_t n = 0; n < b; ++n)
          for (int64_t d = 0; d < 2; ++d)
            std::memcpy(to + ((t * 2 + d) * b + n) * h, from + ((t * b + n) * 2 + d) * h,
                        static_cast<size_t>(h) * sizeof(float));
    }
  } catch (const dnnl::error &e) {
    return runtime::Status::failure(std::string("onednn: ") + e.what());
  } catch (const std::exception &e) {
    return runtime::Status::failure(std::string("onednn step: ") + e.what());
  }
  return runtime::Status::success();
}

uint64_t RecurrentStep::constantBytes() const {
  // The plain weights are kept for save(); the runnable copies beside them.
  const uint64_t plain = (weightsLayer_.size() + weightsIter_.size()) * sizeof(float);
  if (kernel_)
    return plain + kernel_->bytes();
  return plain + packedLayer_.get_desc().get_size() + packedIter_.get_desc().get_size() +
         bias_.size() * sizeof(float);
}

bool RecurrentStep::save(runtime::SavedStep &out, std::string &) const {
  ByteWriter w;
  w.str(name_);
  // Field by field: the struct's padding would make artifacts differ.
  w.pod<int32_t>(static_cast<int32_t>(spec_.cell));
  w.pod<int32_t>(static_cast<int32_t>(spec_.direction));
  w.pod<int32_t>(static_cast<int32_t>(spec_.impl));
  for (int64_t v : {spec_.seq, spec_.batch, spec_.input, spec_.hidden})
    w.pod(v);
  w.pod<uint8_t>(spec_.hasH0);
  w.pod<uint8_t>(spec_.hasC0);
  w.pod(spec_.threads);
  out.kind = kRecurrentKind;
  out.payload = w.take();
  for (const std::vector<float> *v : {&weightsLayer_, &weightsIter_, &bias_})
    out.blobs.emplace_back(reinterpret_cast<const uint8_t *>(v->data()), v->size() * sizeof(float));
  return true;
}

std::shared_ptr<const runtime::ExternStep>
loadRecurrentStep(std::string_view payload, std::span<const std::span<const uint8_t>> blobs,
                  std::span<const size_t> bufferBytes, std::string &why) {
  ByteReader r(payload);
  std::string name = r.str();
  RecurrentSpec s;
  const auto cell = r.pod<uint32_t>(), direction = r.pod<uint32_t>(), impl = r.pod<uint32_t>();
  s.impl = static_cast<RecurrentSpec::Impl>(std::min<uint32_t>(impl, 2));
  s.cell = static_cast<RecurrentSpec::Cell>(std::min<uint32_t>(cell, 4));
  s.direction = static_cast<RecurrentSpec::Direction>(std::min<uint32_t>(direction, 3));
  s.seq = r.pod<int64_t>();
  s.batch = r.pod<int64_t>();
  s.input = r.pod<int64_t>();
  s.hidden = r.pod<int64_t>();
  s.hasH0 = r.pod<uint8_t>() != 0;
  s.hasC0 = r.pod<uint8_t>() != 0;
  s.threads = r.pod<int32_t>();
  constexpr int64_t kLimit = int64_t(1) << 24;
  auto inRange = [&](int64_t v) { return v >= 1 && v < kLimit; };
  bool ok = r.done() && cell <= 3 && direction <= 2 && impl <= 1 && inRange(s.seq) &&
            inRange(s.batch) && inRange(s.input) && inRange(s.hidden) && s.threads >= 1 &&
            s.threads <= 4096 && (!s.hasC0 || (s.hasH0 && s.cell == RecurrentSpec::Cell::Lstm)) &&
            blobs.size() == 3;
  const int64_t d = s.dirs(), g = ok ? s.gates() : 0, h = s.hidden;
  // Bytes of `n` floats for the product of `factors`; 0 (never a valid
  // size here) when it would pass 2^40 elements (a damaged payload).
  auto bytes = [](std::initializer_list<int64_t> factors) -> size_t {
    int64_t n = 1;
    for (int64_t v : factors)
      if (__builtin_mul_overflow(n, v, &n) || n > (int64_t(1) << 40))
        return 0;
    return static_cast<size_t>(n) * sizeof(float);
  };
  ok = ok && bytes({d, s.input, g, h}) != 0 && bytes({d, h, g, h}) != 0 &&
       bytes({s.seq, s.batch, s.input}) != 0 && bytes({s.seq, d, s.batch, h}) != 0 &&
       blobs[0].size() == bytes({d, s.input, g, h}) && blobs[1].size() == bytes({d, h, g, h}) &&
       blobs[2].size() == bytes({d, s.biasGates(), h});
  // The buffers: x, h0?, c0?, y, y_h, y_c?.
  std::vector<size_t> want{bytes({s.seq, s.batch, s.input})};
  const size_t state = bytes({d, s.batch, h});
  if (s.hasH0)
    want.push_back(state);
  if (s.hasC0)
    want.push_back(state);
  want.push_back(bytes({s.seq, d, s.batch, h}));
  want.push_back(state);
  if (s.cell == RecurrentSpec::Cell::Lstm)
    want.push_back(state);
  ok = ok && bufferBytes.size() == want.size();
  for (size_t i = 0; ok && i < want.size(); ++i)
    ok = bufferBytes[i] >= want[i];
  if (!ok) {
    why = "a corrupt oneDNN recurrent step" + (name.empty() ? "" : " '" + name + "'");
    return nullptr;
  }
  auto floats = [](std::span<const uint8_t> b) {
    std::vector<float> v(b.size() / sizeof(float));
    std::memcpy(v.data(), b.data(), b.size());
    return v;
  };
  try {
    return std::make_shared<RecurrentStep>(std::move(name), s, floats(blobs[0]), floats(blobs[1]),
                                           floats(blobs[2]));
  } catch (const dnnl::error &e) {
    why = std::string("oneDNN cannot rebuild a saved recurrent step: ") + e.what();
    return nullptr;
  } catch (const std::exception &e) { // std::bad_alloc for the weights
    why = std::string("cannot rebuild a saved recurrent step: ") + e.what();
    return nullptr;
  }
}

} // namespace kiln::runtime::onednn
