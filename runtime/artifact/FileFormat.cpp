//===- FileFormat.cpp - The framing Kiln's compiled files share -----------===//
#include "runtime/artifact/FileFormat.h"

#include "runtime/Version.h"
#include "runtime/artifact/Artifact.h"
#include "runtime/artifact/HostCpu.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>

#ifndef KILN_VERSION_STRING
#error "KILN_VERSION_STRING is defined by the build (CMakeLists.txt, project VERSION)"
#endif

namespace kiln::runtime {

const char *kilnVersion() {
  return KILN_VERSION_STRING;
}

} // namespace kiln::runtime

namespace kiln::runtime::framing {

void Hasher::update(const void *data, size_t n) {
  auto *p = static_cast<const uint8_t *>(data);
  if (fill_ > 0) {
    const size_t take = std::min(n, 8 - fill_);
    std::memcpy(pending_ + fill_, p, take);
    fill_ += take;
    p += take;
    n -= take;
    if (fill_ < 8)
      return;
    flush();
  }
  for (; n >= 8; n -= 8, p += 8) {
    uint64_t w;
    std::memcpy(&w, p, 8);
    mix(w);
  }
  std::memcpy(pending_, p, n);
  fill_ = n;
}

uint64_t Hasher::finish() {
  if (fill_ > 0) {
    std::memset(pending_ + fill_, 0, 8 - fill_);
    flush();
  }
  return h_;
}

void Hasher::flush() {
  uint64_t w;
  std::memcpy(&w, pending_, 8);
  mix(w);
  fill_ = 0;
}

void DataPart::add(const void *data, size_t size, artifact::Blob *blob, size_t align) {
  end = alignUp(end, align);
  chunks.push_back({data, size, end});
  blob->set_offset(end);
  blob->set_size(size);
  end += size;
}

Status writeAll(int fd, const void *data, size_t n) {
  auto *p = static_cast<const char *>(data);
  while (n > 0) {
    ssize_t w = ::write(fd, p, n);
    if (w < 0 && errno == EINTR)
      continue;
    if (w <= 0)
      return Status::failure(std::strerror(errno));
    p += w;
    n -= static_cast<size_t>(w);
  }
  return Status::success();
}

Status writeFramed(int fd, const char (&magic)[8], uint32_t format, const std::string &meta,
                   const DataPart &data, uint64_t &written) {
  Header h{};
  std::memcpy(h.magic, magic, 8);
  h.format = format;
  h.headerBytes = kHeaderBytes;
  h.metaOffset = kHeaderBytes;
  h.metaBytes = meta.size();
  h.dataOffset = alignUp(kHeaderBytes + meta.size(), kPage);
  h.dataBytes = data.end;
  // The file after the header: metadata, zero padding, the chunks with
  // zero padding between them. Hashed, then written, in the same order.
  static const char zeros[kPage] = {};
  auto forEachPiece = [&](auto &&piece) -> Status {
    if (Status st = piece(meta.data(), meta.size()); !st.ok())
      return st;
    size_t at = h.metaOffset + meta.size();
    auto pad = [&](size_t to) -> Status {
      while (at < to) {
        const size_t n = std::min(to - at, sizeof(zeros));
        if (Status st = piece(zeros, n); !st.ok())
          return st;
        at += n;
      }
      return Status::success();
    };
    if (Status st = pad(h.dataOffset); !st.ok())
      return st;
    for (const DataPart::Chunk &c : data.chunks) {
      if (Status st = pad(h.dataOffset + c.offset); !st.ok())
        return st;
      if (Status st = piece(c.data, c.size); !st.ok())
        return st;
      at += c.size;
    }
    return Status::success();
  };
  Hasher hasher;
  hasher.update(&h, sizeof(h)); // with checksum 0
  (void)forEachPiece([&](const void *p, size_t n) {
    hasher.update(p, n);
    return Status::success();
  });
  h.checksum = hasher.finish();
  Status st = writeAll(fd, &h, sizeof(h));
  if (st.ok())
    st = forEachPiece([&](const void *p, size_t n) { return writeAll(fd, p, n); });
  written = h.dataOffset + h.dataBytes;
  return st;
}

Status writeFileAtomically(const std::string &path, const std::function<Status(int fd)> &write) {
  static std::atomic<unsigned> counter{0};
  std::string tmp;
  int fd = -1;
  for (int attempt = 0; fd < 0 && attempt < 100; ++attempt) {
    tmp = path + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(counter++);
    fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd < 0 && errno != EEXIST)
      break;
  }
  if (fd < 0)
    return Status::failure("cannot write '" + path + "': " + std::strerror(errno) +
                           " (creating its temporary file '" + tmp + "')");
  Status st = write(fd);
  if (::close(fd) != 0 && st.ok())
    st = Status::failure(std::strerror(errno));
  if (st.ok() && std::rename(tmp.c_str(), path.c_str()) != 0)
    st = Status::failure(std::strerror(errno));
  if (!st.ok()) {
    std::remove(tmp.c_str());
    return Status::failure("cannot write '" + path + "': " + st.error);
  }
  return Status::success();
}

Mapping::~Mapping() {
  if (base)
    munmap(base, size);
}

Status mapFile(const std::string &path, std::shared_ptr<Mapping> &out,
               const std::function<Status(const std::string &)> &fail) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return fail(std::string("cannot open: ") + std::strerror(errno));
  struct stat sb {};
  if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
    ::close(fd);
    return fail("not a regular file");
  }
  auto map = std::make_shared<Mapping>();
  map->size = static_cast<size_t>(sb.st_size);
  if (map->size < kHeaderBytes) {
    ::close(fd);
    return fail("truncated (" + std::to_string(map->size) + " bytes; the header alone is " +
                std::to_string(kHeaderBytes) + ")");
  }
  void *p = mmap(nullptr, map->size, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (p == MAP_FAILED)
    return fail(std::string("cannot map: ") + std::strerror(errno));
  map->base = p;
  out = std::move(map);
  return Status::success();
}

Status checkFramed(const uint8_t *bytes, size_t size, const char (&magic)[8], uint32_t format,
                   const std::string &kind, Header &h) {
  if (size < kHeaderBytes)
    return Status::failure("truncated (" + std::to_string(size) + " bytes; the header alone is " +
                           std::to_string(kHeaderBytes) + ")");
  std::memcpy(&h, bytes, sizeof(h));
  if (std::memcmp(h.magic, magic, 8) != 0)
    return Status::failure("not a " + kind + " (no " + std::string(magic, 7) + " magic)");
  if (h.format != format)
    return Status::failure("format version " + std::to_string(h.format) + "; this Kiln (" +
                           kilnVersion() + ") reads version " + std::to_string(format) +
                           ": compile the model again");
  if (h.headerBytes != kHeaderBytes || h.metaOffset != kHeaderBytes ||
      h.metaBytes > size - kHeaderBytes || h.metaBytes > (uint64_t(1) << 30) ||
      h.dataOffset < h.metaOffset + h.metaBytes || h.dataOffset % kPage != 0 ||
      h.dataOffset > size || h.dataBytes != size - h.dataOffset)
    return Status::failure("truncated or corrupt: the header's sizes do not match the file's " +
                           std::to_string(size) + " bytes");
  Header unsummed = h;
  unsummed.checksum = 0;
  Hasher hasher;
  hasher.update(&unsummed, sizeof(unsummed));
  hasher.update(bytes + kHeaderBytes, size - kHeaderBytes);
  if (hasher.finish() != h.checksum)
    return Status::failure("corrupt: its checksum does not match its contents");
  return Status::success();
}

Status checkCompiledFor(const std::string &version, const std::string &cpuRequested,
                        const std::string &cpu, const std::string &features) {
  if (version != kilnVersion())
    return Status::failure("written by Kiln " + version + "; this is Kiln " + kilnVersion() +
                           ": compile the model again");
  const std::vector<std::string> missing = missingCpuFeatures(features);
  if (missing.empty())
    return Status::success();
  std::string list;
  for (const std::string &m : missing)
    list += (list.empty() ? "" : ", ") + m;
  return Status::failure("compiled for --cpu " + cpuRequested + " (" + cpu +
                         "), which needs CPU features this machine lacks (" + list +
                         "); compile it for this machine, or for an older --cpu");
}

std::optional<int64_t> elementsOfStored(std::span<const int64_t> shape) {
  int64_t elements = 1;
  for (int64_t d : shape) {
    if (d < 0 || d >= (int64_t(1) << 40) || (d > 0 && elements > (int64_t(1) << 44) / d))
      return std::nullopt;
    elements *= d;
  }
  return elements;
}

bool hasMagic(const std::string &path, const char (&magic)[8]) {
  std::FILE *f = std::fopen(path.c_str(), "rb");
  if (!f)
    return false;
  char got[8] = {};
  const bool ok = std::fread(got, 1, 8, f) == 8 && std::memcmp(got, magic, 8) == 0;
  std::fclose(f);
  return ok;
}

std::optional<std::span<const uint8_t>> blobIn(const uint8_t *data, uint64_t dataBytes,
                                               const artifact::Blob &b) {
  if (b.offset() % kBlobAlign != 0 || b.offset() > dataBytes || b.size() > dataBytes - b.offset())
    return std::nullopt;
  return std::span<const uint8_t>(data + b.offset(), b.size());
}

} // namespace kiln::runtime::framing
