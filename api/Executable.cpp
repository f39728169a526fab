//===- Executable.cpp - Load, save and run compiled models ---------------===//
//
// The runtime's half of the embedding API (include/kiln/Executable.h):
// artifacts and size sets are loaded and saved by runtime/artifact, runs go
// to the runtime executable of the size the inputs have; runtime Statuses
// become a kiln::Error with their message. Links no compiler: an Executable
// that compiles per size gets its specializations from the Specializer that
// kiln::compile (api/Kiln.cpp) put in it.
//
//===----------------------------------------------------------------------===//
#include "api/ExecutableImpl.h"

#include "runtime/reference/HostTensors.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

namespace kiln {

namespace detail {

std::string sizesStr(const Sizes &sizes) {
  std::string s;
  for (const auto &[name, size] : sizes)
    s += (s.empty() ? "" : ", ") + name + "=" + std::to_string(size);
  return s;
}

Sizes parseSizes(const std::string &text) {
  Sizes out;
  size_t at = 0;
  while (at < text.size()) {
    size_t end = text.find(", ", at);
    if (end == std::string::npos)
      end = text.size();
    const std::string item = text.substr(at, end - at);
    if (size_t eq = item.find('='); eq != std::string::npos)
      out[item.substr(0, eq)] = std::strtoll(item.c_str() + eq + 1, nullptr, 10);
    at = end + 2;
  }
  return out;
}

std::vector<PortInfo> portsOf(const std::vector<runtime::ArtifactPort> &ports) {
  std::vector<PortInfo> out;
  for (const runtime::ArtifactPort &p : ports)
    out.push_back({p.name, p.dtype, p.dims});
  return out;
}

} // namespace detail

const Compiled &Executable::Impl::forInputs(std::span<const Tensor> inputs,
                                            std::shared_ptr<const Compiled> &hold) const {
  if (perSize) {
    hold = perSize->forInputs(inputs);
    return *hold;
  }
  if (set.empty() || inputs.size() != one->exe->numInputs())
    return *one; // its run reports a wrong input count
  std::vector<std::vector<int64_t>> shapes;
  for (const Tensor &t : inputs)
    shapes.push_back(t.shape());
  std::string given, sizes;
  for (const auto &[s, compiled] : set) {
    if (compiled->exe->takesShapes(shapes))
      return *compiled;
    sizes += (sizes.empty() ? "" : "; ") + sizesStr(s);
  }
  for (const Tensor &t : inputs)
    given += (given.empty() ? "" : ", ") + t.type().str();
  throw Error("no size of this size set fits the inputs (" + given + "); it was compiled for " +
              sizes);
}

Executable Executable::Impl::wrap(std::shared_ptr<const Impl> impl) {
  Executable e;
  e.impl_ = std::move(impl);
  return e;
}

Executable::Executable() = default;
Executable::~Executable() = default;

Executable Executable::load(const std::string &path) {
  std::vector<runtime::ArtifactSetMember> members;
  if (runtime::Status st = runtime::loadArtifactSet(path, members); !st.ok())
    throw Error(st.error);
  auto impl = std::make_shared<Impl>();
  for (runtime::ArtifactSetMember &m : members) {
    auto compiled = std::make_shared<Compiled>();
    compiled->exe = std::move(m.exe);
    compiled->info = std::move(m.info);
    if (!m.sizes.empty()) // a size set, even of one size
      impl->set.emplace_back(parseSizes(m.sizes), compiled);
    if (!impl->one)
      impl->one = std::move(compiled);
  }
  return Impl::wrap(std::move(impl));
}

void Executable::save(const std::string &path) const {
  auto refuseStaged = [](const Compiled &c) {
    if (c.staged)
      throw Error("cannot save a model compiled in stages (" + c.staged->summary() +
                  "): an artifact holds compiled code only");
  };
  if (impl_->perSize || !impl_->set.empty()) {
    // A size set of the specializations kept (Note [Size sets]).
    KeptSizes kept = impl_->perSize ? impl_->perSize->keptCompiled() : impl_->set;
    if (kept.empty())
      throw Error("cannot save a model that compiles per size before it has run (" +
                  impl_->perSize->summary() +
                  "): run it at each size to keep, then save (a size set); or saveSymbolic "
                  "(every size of its ranges); or compile with every symbol in "
                  "CompileOptions::dims");
    if (impl_->perSize && runtime::isSymbolicArtifactFile(path))
      throw Error("cannot save over '" + path +
                  "': it is a symbolic artifact, and save() writes the sizes run so far (a size "
                  "set); write the size set elsewhere, or use saveSymbolic (save_symbolic in "
                  "Python)");
    for (const auto &[sizes, compiled] : kept)
      refuseStaged(*compiled);
    std::sort(kept.begin(), kept.end(),
              [](const auto &a, const auto &b) { return a.first < b.first; });
    std::vector<std::string> labels;
    for (const auto &[sizes, compiled] : kept)
      labels.push_back(sizesStr(sizes));
    std::vector<runtime::ArtifactSetEntry> entries;
    for (size_t i = 0; i < kept.size(); ++i)
      entries.push_back({labels[i], kept[i].second->exe.get(), &kept[i].second->info});
    if (runtime::Status st = runtime::saveArtifactSet(entries, path); !st.ok())
      throw Error(st.error);
    return;
  }
  refuseStaged(*impl_->one);
  if (runtime::Status st = runtime::saveArtifact(*impl_->one->exe, impl_->one->info, path);
      !st.ok())
    throw Error(st.error);
}

void Executable::saveSymbolic(const std::string &path) const {
  if (!impl_->perSize)
    throw Error("cannot save '" + path + "' as a symbolic artifact: the model is compiled for " +
                (impl_->set.empty() ? std::string("one size") : "the sizes of a size set") +
                "; compile it with symbols left out of CompileOptions::dims");
  impl_->perSize->saveSymbolic(path);
}

namespace {
std::vector<Tensor> runCompiled(const Compiled &c, const std::vector<Tensor> &inputs) {
  if (c.staged)
    return c.staged->run(inputs);
  std::vector<runtime::HostTensor> in, out;
  in.reserve(inputs.size());
  for (const Tensor &t : inputs)
    in.push_back(runtime::toHostTensor(t));
  if (runtime::Status st = c.exe->run(in, out); !st.ok())
    throw Error(st.error);
  std::vector<Tensor> result;
  result.reserve(out.size());
  for (const runtime::HostTensor &t : out)
    result.push_back(runtime::fromHostTensor(t));
  return result;
}
} // namespace

std::vector<Tensor> Executable::run(const std::vector<Tensor> &inputs) const {
  std::shared_ptr<const Compiled> hold;
  return runCompiled(impl_->forInputs(inputs, hold), inputs);
}

void Executable::runInto(const std::vector<Tensor> &inputs, std::vector<Tensor> &outputs) const {
  std::shared_ptr<const Compiled> hold; // one specialization for the check and the run
  const Compiled &c = impl_->forInputs(inputs, hold);
  if (c.staged)
    throw Error("runInto: the model's output sizes are decided by its run (" + c.staged->summary() +
                "); use run()");
  const std::vector<PortInfo> want = portsOf(c.info.outputs);
  if (outputs.size() != want.size())
    throw Error("runInto: " + std::to_string(outputs.size()) +
                " output tensors given, the model has " + std::to_string(want.size()));
  for (size_t k = 0; k < want.size(); ++k)
    if (outputs[k].dtype() != want[k].dtype || outputs[k].shape() != want[k].shape)
      throw Error("runInto: output " + std::to_string(k) + " ('" + want[k].name + "') is " +
                  outputs[k].type().str() + ", the model writes " +
                  runtime::typeString(want[k].dtype, want[k].shape));
  std::vector<Tensor> got = runCompiled(c, inputs);
  for (size_t k = 0; k < got.size(); ++k)
    std::memcpy(outputs[k].mutableRawData(), got[k].rawData(), got[k].byteSize());
}

std::vector<PortInfo> Executable::inputs() const {
  if (!impl_->perSize && impl_->one->staged)
    return impl_->one->staged->inputs();
  return impl_->perSize ? impl_->perSize->inputs() : portsOf(impl_->one->info.inputs);
}
std::vector<PortInfo> Executable::outputs() const {
  if (!impl_->perSize && impl_->one->staged)
    return impl_->one->staged->outputs();
  return impl_->perSize ? impl_->perSize->outputs() : portsOf(impl_->one->info.outputs);
}
std::string Executable::summary() const {
  if (impl_->perSize)
    return impl_->perSize->summary();
  if (impl_->set.empty())
    return impl_->one->info.summary;
  std::string s = "a size set of " + std::to_string(impl_->set.size()) + " sizes (";
  for (size_t i = 0; i < impl_->set.size(); ++i)
    s +=
        (i ? "; " : "") + sizesStr(impl_->set[i].first) + ": " + impl_->set[i].second->info.summary;
  return s + ")";
}
std::vector<std::map<std::string, int64_t>> Executable::specializations() const {
  std::vector<std::map<std::string, int64_t>> out;
  for (const auto &[sizes, compiled] : impl_->perSize ? impl_->perSize->keptCompiled() : impl_->set)
    out.push_back(sizes);
  return out;
}

} // namespace kiln
