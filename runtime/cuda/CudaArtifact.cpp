//===- CudaArtifact.cpp - CUDA models saved to and loaded from disk -------===//

#include "runtime/cuda/CudaArtifact.h"
#include "ir/DType.h"
#include "runtime/Version.h"
#include "runtime/artifact/FileFormat.h"

#include <set>

namespace kiln::runtime::cuda {
namespace {

using namespace framing;

/// Bumped by any change of the layout or of CudaArtifact in Artifact.proto
/// that is not a pure addition.
constexpr uint32_t kCudaFormatVersion = 1;

using Role = CudaModelSpec::Buffer::Role;

artifact::CudaBuffer::Role roleToProto(Role r) {
  switch (r) {
  case Role::Input:
    return artifact::CudaBuffer::INPUT;
  case Role::Output:
    return artifact::CudaBuffer::OUTPUT;
  case Role::Constant:
    return artifact::CudaBuffer::CONSTANT;
  case Role::Temp:
    break;
  }
  return artifact::CudaBuffer::TEMP;
}

std::optional<Role> roleFromProto(int r) {
  switch (r) {
  case artifact::CudaBuffer::INPUT:
    return Role::Input;
  case artifact::CudaBuffer::OUTPUT:
    return Role::Output;
  case artifact::CudaBuffer::CONSTANT:
    return Role::Constant;
  case artifact::CudaBuffer::TEMP:
    return Role::Temp;
  default:
    return std::nullopt;
  }
}

} // namespace

bool saveCudaArtifact(const CudaArtifact &a, const std::string &path, std::string &error) {
  const CudaModelSpec &s = a.spec;
  artifact::CudaArtifact meta;
  DataPart data;
  meta.set_kiln_version(kilnVersion());
  meta.set_model(a.model);
  meta.set_arch(s.arch);
  meta.set_nvrtc_version(a.nvrtcVersion);
  data.add(s.image.data(), s.image.size(), meta.mutable_cubin());
  data.add(s.ptx.data(), s.ptx.size(), meta.mutable_ptx());
  data.add(a.source.data(), a.source.size(), meta.mutable_source());
  for (const CudaModelSpec::Buffer &b : s.buffers) {
    artifact::CudaBuffer *out = meta.add_buffers();
    out->set_role(roleToProto(b.role));
    out->set_name(b.name);
    out->set_dtype(std::string(dtypeName(b.dtype)));
    for (int64_t d : b.shape)
      out->add_shape(d);
    out->set_index(b.index);
    out->set_offset(b.offset);
    out->set_bytes(b.bytes);
    if (b.role == Role::Constant)
      data.add(b.data.data(), b.data.size(), out->mutable_data());
  }
  for (const CudaModelSpec::Step &st : s.steps) {
    artifact::CudaStep *out = meta.add_steps();
    out->set_function(st.function);
    for (int32_t b : st.buffers)
      out->add_buffers(b);
    out->set_grid(st.grid);
    out->set_block(st.block);
    out->set_synchronizes(st.synchronizes);
    for (int64_t v : st.sizes)
      out->add_sizes(v);
    if (st.kind == CudaModelSpec::Step::Kind::Gemm) {
      const GemmCall &g = st.gemm;
      artifact::CudaGemm *pg = out->mutable_gemm();
      pg->set_batch(g.batch);
      pg->set_m(g.m);
      pg->set_n(g.n);
      pg->set_k(g.k);
      pg->set_trans_a(g.transA);
      pg->set_trans_b(g.transB);
      pg->set_stride_a(g.strideA);
      pg->set_stride_b(g.strideB);
      pg->set_stride_c(g.strideC);
      pg->set_stride_d(g.strideD);
      pg->set_alpha(g.alpha);
      pg->set_beta(g.beta);
      pg->set_has_c(g.hasC);
      pg->set_has_bias(g.hasBias);
    } else if (st.kind == CudaModelSpec::Step::Kind::Conv) {
      const ConvCall &c = st.conv;
      artifact::CudaConv *pc = out->mutable_conv();
      for (int64_t v : {c.n, c.c, c.h, c.w, c.k, c.r, c.s, c.outH, c.outW})
        pc->add_sizes(v);
      for (int64_t v : {c.padH, c.padW, c.strideH, c.strideW, c.dilationH, c.dilationW, c.group})
        pc->add_window(v);
      pc->set_has_bias(c.hasBias);
      pc->set_relu(c.relu);
      pc->set_has_residual(c.hasResidual);
    } else if (st.kind == CudaModelSpec::Step::Kind::Pool) {
      const PoolCall &p = st.pool;
      artifact::CudaPool *pp = out->mutable_pool();
      pp->set_average(p.kind == PoolCall::Kind::Average);
      pp->set_count_pad(p.countPad);
      for (int64_t v : {p.n, p.c, p.h, p.w, p.r, p.s, p.outH, p.outW})
        pp->add_sizes(v);
      for (int64_t v : {p.padH, p.padW, p.strideH, p.strideW})
        pp->add_window(v);
    }
  }
  meta.set_arena_bytes(s.arenaBytes);
  meta.set_num_inputs(s.numInputs);
  meta.set_num_outputs(s.numOutputs);
  std::string metaBytes;
  if (!meta.SerializeToString(&metaBytes)) {
    error = "cannot serialize the CUDA artifact's metadata";
    return false;
  }
  Status st = writeFileAtomically(path, [&](int fd) {
    uint64_t written = 0;
    return writeFramed(fd, kCudaMagic, kCudaFormatVersion, metaBytes, data, written);
  });
  error = st.error;
  return st.ok();
}

bool loadCudaArtifact(const std::string &path, CudaArtifact &a, std::string &error) {
  const std::string label = "CUDA artifact '" + path + "'";
  auto fail = [&](const std::string &what) {
    error = label + ": " + what;
    return false;
  };
  std::shared_ptr<Mapping> map;
  if (Status st = mapFile(
          path, map, [&](const std::string &what) { return Status::failure(label + ": " + what); });
      !st.ok()) {
    error = st.error;
    return false;
  }
  const auto *bytes = static_cast<const uint8_t *>(map->base);
  Header h;
  if (Status st =
          checkFramed(bytes, map->size, kCudaMagic, kCudaFormatVersion, "Kiln CUDA artifact", h);
      !st.ok())
    return fail(st.error);
  artifact::CudaArtifact meta;
  if (!meta.ParseFromArray(bytes + h.metaOffset, static_cast<int>(h.metaBytes)))
    return fail("corrupt metadata");
  if (meta.kiln_version() != kilnVersion())
    return fail("written by Kiln " + meta.kiln_version() + "; this is Kiln " + kilnVersion() +
                ": compile the model again");
  const uint8_t *dataBase = bytes + h.dataOffset;
  auto blob = [&](const artifact::Blob &b, const char *what, std::string &out) {
    auto span = blobIn(dataBase, h.dataBytes, b);
    if (!span)
      return fail(std::string("its ") + what + " lies outside the file");
    out.assign(reinterpret_cast<const char *>(span->data()), span->size());
    return true;
  };
  CudaArtifact out;
  CudaModelSpec &s = out.spec;
  out.model = meta.model();
  out.kilnVersion = meta.kiln_version();
  out.nvrtcVersion = meta.nvrtc_version();
  out.fileBytes = map->size;
  s.arch = meta.arch();
  if (!blob(meta.cubin(), "CUBIN", s.image) || !blob(meta.ptx(), "PTX", s.ptx) ||
      !blob(meta.source(), "CUDA C", out.source))
    return false;
  if (s.arch < 10 || (s.image.empty() && s.ptx.empty()))
    return fail("it holds no module (compute capability " + std::to_string(s.arch) + ")");
  s.arenaBytes = meta.arena_bytes();
  s.numInputs = meta.num_inputs();
  s.numOutputs = meta.num_outputs();
  if (s.numInputs < 0 || s.numOutputs < 0 || s.numInputs > meta.buffers_size() ||
      s.numOutputs > meta.buffers_size())
    return fail("corrupt metadata: " + std::to_string(s.numInputs) + " inputs and " +
                std::to_string(s.numOutputs) + " outputs in " +
                std::to_string(meta.buffers_size()) + " buffers");
  std::set<int32_t> inputsSeen, outputsSeen;
  for (const artifact::CudaBuffer &pb : meta.buffers()) {
    CudaModelSpec::Buffer b;
    b.name = pb.name();
    const std::string where = "buffer '" + b.name + "'";
    auto role = roleFromProto(pb.role());
    auto dtype = dtypeFromName(pb.dtype());
    auto elements = elementsOfStored({pb.shape().data(), static_cast<size_t>(pb.shape_size())});
    if (!role || !dtype || !elements)
      return fail("corrupt metadata: " + where + " has an unknown role, type or shape");
    b.role = *role;
    b.dtype = *dtype;
    b.shape.assign(pb.shape().begin(), pb.shape().end());
    b.bytes = pb.bytes();
    b.offset = pb.offset();
    b.index = pb.index();
    if (b.bytes != static_cast<uint64_t>(*elements) * dtypeSize(b.dtype))
      return fail("corrupt metadata: " + where + " holds " + std::to_string(b.bytes) +
                  " bytes for its type's " +
                  std::to_string(static_cast<uint64_t>(*elements) * dtypeSize(b.dtype)));
    if (b.role == Role::Constant) {
      if (!blob(pb.data(), ("constant of " + where).c_str(), b.data))
        return false;
      if (b.data.size() != b.bytes)
        return fail("corrupt metadata: the constant of " + where + " has " +
                    std::to_string(b.data.size()) + " bytes, not " + std::to_string(b.bytes));
    } else if (b.offset > s.arenaBytes || b.bytes > s.arenaBytes - b.offset) {
      return fail("corrupt metadata: " + where + " ends past the arena");
    } else if (b.offset % 16 != 0) { // kernels access 16 bytes at a time
      return fail("corrupt metadata: " + where + " is at arena offset " + std::to_string(b.offset) +
                  ", not a multiple of 16");
    }
    if (b.role == Role::Input || b.role == Role::Output) {
      const int32_t count = b.role == Role::Input ? s.numInputs : s.numOutputs;
      std::set<int32_t> &seen = b.role == Role::Input ? inputsSeen : outputsSeen;
      if (b.index < 0 || b.index >= count || !seen.insert(b.index).second)
        return fail("corrupt metadata: " + where + " is port " + std::to_string(b.index) + " of " +
                    std::to_string(count) + ", or a port twice");
    }
    s.buffers.push_back(std::move(b));
  }
  if (inputsSeen.size() != static_cast<size_t>(s.numInputs) ||
      outputsSeen.size() != static_cast<size_t>(s.numOutputs))
    return fail("corrupt metadata: an input or output has no buffer");
  for (const artifact::CudaStep &ps : meta.steps()) {
    CudaModelSpec::Step st;
    st.function = ps.function();
    st.grid = ps.grid();
    st.block = ps.block();
    st.synchronizes = ps.synchronizes();
    st.sizes.assign(ps.sizes().begin(), ps.sizes().end());
    for (int32_t b : ps.buffers()) {
      if (b < 0 || b >= static_cast<int32_t>(s.buffers.size()))
        return fail("corrupt metadata: step '" + st.function + "' names buffer " +
                    std::to_string(b) + " of " + std::to_string(s.buffers.size()));
      st.buffers.push_back(b);
    }
    if (ps.has_gemm()) {
      const artifact::CudaGemm &pg = ps.gemm();
      st.kind = CudaModelSpec::Step::Kind::Gemm;
      st.gemm = GemmCall{pg.batch(),   pg.m(),        pg.n(),        pg.k(),        pg.trans_a(),
                         pg.trans_b(), pg.stride_a(), pg.stride_b(), pg.stride_c(), pg.stride_d(),
                         pg.alpha(),   pg.beta(),     pg.has_c(),    pg.has_bias()};
    }
    if (ps.has_conv()) {
      const artifact::CudaConv &pc = ps.conv();
      if (pc.sizes_size() != 9 || pc.window_size() != 7)
        return fail("corrupt metadata: step '" + st.function + "' has a convolution of " +
                    std::to_string(pc.sizes_size()) + " sizes");
      st.kind = CudaModelSpec::Step::Kind::Conv;
      const auto &z = pc.sizes();
      const auto &w = pc.window();
      // clang-format off
      st.conv = ConvCall{z[0], z[1], z[2], z[3], z[4], z[5], z[6], z[7], z[8],
                         w[0], w[1], w[2], w[3], w[4], w[5], w[6],
                         pc.has_bias(), pc.relu(), pc.has_residual()};
      // clang-format on
    }
    if (ps.has_pool()) {
      const artifact::CudaPool &pp = ps.pool();
      if (pp.sizes_size() != 8 || pp.window_size() != 4)
        return fail("corrupt metadata: step '" + st.function + "' has a pool of " +
                    std::to_string(pp.sizes_size()) + " sizes");
      st.kind = CudaModelSpec::Step::Kind::Pool;
      const auto &z = pp.sizes();
      const auto &w = pp.window();
      st.pool = PoolCall{pp.average() ? PoolCall::Kind::Average : PoolCall::Kind::Max,
                         pp.count_pad(),
                         z[0],
                         z[1],
                         z[2],
                         z[3],
                         z[4],
                         z[5],
                         z[6],
                         z[7],
                         w[0],
                         w[1],
                         w[2],
                         w[3]};
    }
    if (st.function.empty() || (st.kind == CudaModelSpec::Step::Kind::Kernel &&
                                (st.grid == 0 || st.block == 0 || st.block > 1024)))
      return fail("corrupt metadata: step '" + st.function + "' launches " +
                  std::to_string(st.grid) + " blocks of " + std::to_string(st.block) + " threads");
    s.steps.push_back(std::move(st));
  }
  a = std::move(out);
  return true;
}

} // namespace kiln::runtime::cuda
