//===- AttentionStep.cpp - Attention as one library call -----------------===//
#include "runtime/dnnl/AttentionStep.h"

#include "runtime/ByteStream.h"

#include <algorithm>
#include <cstdlib>
#include <limits>
#include <unordered_map>

namespace kiln::runtime::onednn {

using dnnl::memory;

namespace {
/// Its scratchpad is the caller's (user mode), so that runs from several
/// threads at once never share one.
dnnl::softmax_forward::primitive_desc softmaxPd(const memory::desc &md) {
  const int axis = static_cast<int>(md.dims().size()) - 1;
  dnnl::softmax_forward::desc d(dnnl::prop_kind::forward_inference, md, axis);
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  return dnnl::softmax_forward::primitive_desc(d, attr, cpuEngine());
}
} // namespace

AttentionStep::AttentionStep(std::string name,
                             std::shared_ptr<const runtime::ExternStep> scoresStep,
                             std::vector<int32_t> scoresArgs,
                             std::shared_ptr<const runtime::ExternStep> weightedStep,
                             std::vector<int32_t> weightedArgs, dims scores, int32_t scoresBuffer)
    : name_(std::move(name)), scoresStep_(std::move(scoresStep)),
      weightedStep_(std::move(weightedStep)), scoresArgs_(std::move(scoresArgs)),
      weightedArgs_(std::move(weightedArgs)), scores_(std::move(scores)),
      scoresBuffer_(scoresBuffer), scoresMd_(plainMd(scores_)), createdThreads_(currentThreads()) {
  dnnl::softmax_forward::primitive_desc pd = softmaxPd(scoresMd_);
  softmaxImpl_ = pd.impl_info_str();
  softmaxScratchMd_ = pd.scratchpad_desc();
  softmax_ = dnnl::softmax_forward(pd);
}

AttentionStep::~AttentionStep() = default;

runtime::Status AttentionStep::run(std::span<void *const> buffers,
                                   const runtime::StepContext &ctx) const {
  auto bind = [&](const std::vector<int32_t> &args) {
    std::vector<void *> out;
    out.reserve(args.size());
    for (int32_t a : args)
      out.push_back(buffers[static_cast<size_t>(a)]);
    return out;
  };
  std::vector<void *> first = bind(scoresArgs_);
  if (runtime::Status st = scoresStep_->run(first, ctx); !st.ok())
    return st;
  {
    ScopedThreads threads(std::max(1, std::min(ctx.threads, createdThreads_)));
    try {
      memory m(scoresMd_, cpuEngine(), buffers[static_cast<size_t>(scoresBuffer_)]);
      std::unordered_map<int, memory> args{{DNNL_ARG_SRC, m}, {DNNL_ARG_DST, m}};
      if (softmaxScratchMd_.get_size() > 0)
        args.emplace(DNNL_ARG_SCRATCHPAD, memory(softmaxScratchMd_, cpuEngine(),
                                                 threadScratch(softmaxScratchMd_.get_size())));
      softmax_.execute(threadStream(), args);
      threadStream().wait();
    } catch (const dnnl::error &e) {
      return runtime::Status::failure("oneDNN softmax of attention step '" + name_ +
                                      "' failed: " + e.what());
    }
  }
  std::vector<void *> second = bind(weightedArgs_);
  return weightedStep_->run(second, ctx);
}

bool AttentionStep::save(runtime::SavedStep &out, std::string &why) const {
  runtime::SavedStep first, second;
  if (!scoresStep_->save(first, why) || !weightedStep_->save(second, why))
    return false;
  ByteWriter w;
  w.str(name_);
  w.pod<int32_t>(createdThreads_);
  w.vec(scores_);
  w.pod<int32_t>(scoresBuffer_);
  for (const auto &[step, args] : {std::pair{&first, &scoresArgs_}, {&second, &weightedArgs_}}) {
    w.str(step->kind);
    w.str(step->payload);
    w.vec(*args);
    w.pod<uint32_t>(static_cast<uint32_t>(step->blobs.size()));
    out.blobs.insert(out.blobs.end(), step->blobs.begin(), step->blobs.end());
  }
  out.kind = kAttentionKind;
  out.payload = w.take();
  return true;
}

uint64_t AttentionStep::constantBytes() const {
  return scoresStep_->constantBytes() + weightedStep_->constantBytes();
}

std::shared_ptr<const runtime::ExternStep>
loadAttentionStep(std::string_view payload, std::span<const std::span<const uint8_t>> blobs,
                  std::span<const size_t> bufferBytes, std::shared_ptr<const void> owner,
                  std::string &why) {
  ByteReader r(payload);
  std::string name = r.str();
  const int32_t threads = r.pod<int32_t>();
  dims scores = r.vec<int64_t>();
  // The scores' size, overflow-checked and capped (a crafted payload must
  // not ask for terabytes).
  const int64_t kMaxScores = int64_t(1) << 34;
  int64_t elements = 1;
  bool ok = r.ok() && !scores.empty() && scores.size() <= 12;
  for (int64_t d : scores) {
    ok = ok && d > 0 && elements <= kMaxScores / d;
    if (ok)
      elements *= d;
  }
  const int32_t scoresBuffer = r.pod<int32_t>();
  ok = ok && scoresBuffer >= 0 && static_cast<size_t>(scoresBuffer) < bufferBytes.size() &&
       bufferBytes[static_cast<size_t>(scoresBuffer)] >=
           static_cast<size_t>(elements) * sizeof(float);
  if (!ok) {
    why = "a corrupt attention step (its scores' dims or buffer)";
    return nullptr;
  }
  std::shared_ptr<const runtime::ExternStep> steps[2];
  std::vector<int32_t> args[2];
  size_t blobAt = 0;
  for (int k = 0; k < 2; ++k) {
    std::string kind = r.str(), sub = r.str();
    args[k] = r.vec<int32_t>();
    const uint32_t numBlobs = r.pod<uint32_t>();
    if (!r.ok() || kind == kAttentionKind || numBlobs > blobs.size() - blobAt) {
      why = "a corrupt attention step";
      return nullptr;
    }
    std::vector<size_t> subBytes;
    for (int32_t a : args[k]) {
      if (a < 0 || static_cast<size_t>(a) >= bufferBytes.size()) {
        why = "a corrupt attention step (buffer " + std::to_string(a) + ")";
        return nullptr;
      }
      subBytes.push_back(bufferBytes[static_cast<size_t>(a)]);
    }
    steps[k] = loadStep(kind, sub, blobs.subspan(blobAt, numBlobs), subBytes, owner, why);
    if (!steps[k])
      return nullptr;
    blobAt += numBlobs;
  }
  if (!r.done() || blobAt != blobs.size()) {
    why = "a corrupt attention step";
    return nullptr;
  }
  try {
    ScopedThreads scoped(std::clamp(threads, 1, 4096));
    return std::make_shared<AttentionStep>(std::move(name), std::move(steps[0]), std::move(args[0]),
                                           std::move(steps[1]), std::move(args[1]),
                                           std::move(scores), scoresBuffer);
  } catch (const dnnl::error &e) {
    why = std::string("oneDNN cannot rebuild a saved attention step: ") + e.what();
    return nullptr;
  }
}

} // namespace kiln::runtime::onednn
