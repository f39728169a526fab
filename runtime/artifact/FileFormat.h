//===- FileFormat.h - The framing Kiln's compiled files share ---*- C++ -*-===//
//
// A framed file (an artifact, Artifact.h; a symbolic artifact,
// codegen/SymbolicArtifact.h; a CUDA artifact, runtime/cuda/CudaArtifact.h)
// is
//
//   [0, 64)         Header: an 8-byte magic naming the kind, its format
//                   version, where the metadata and the data are, and a
//                   64-bit checksum of the whole frame (this field read
//                   as 0): a check against damage, not a signature;
//   metadata        protobuf (Artifact.proto), of the kind's message;
//   data            from a page boundary: blobs, each 64-byte aligned.
//
// writeFramed writes one; checkFramed checks one (magic, version, sizes,
// checksum) before anything reads its metadata. Files are written through
// a temporary file renamed over the target (writeFileAtomically) and read
// by mapping them (mapFile).
//
//===----------------------------------------------------------------------===//
#pragma once

#include "runtime/Executable.h"
#include "runtime/artifact/Artifact.pb.h"

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace kiln::runtime::framing {

/// The kinds of framed file, by magic.
inline constexpr char kArtifactMagic[8] = {'K', 'I', 'L', 'N', 'A', 'R', 'T', '\0'};
inline constexpr char kSymbolicMagic[8] = {'K', 'I', 'L', 'N', 'S', 'Y', 'M', '\0'};
inline constexpr char kCudaMagic[8] = {'K', 'I', 'L', 'N', 'G', 'P', 'U', '\0'};

inline constexpr size_t kHeaderBytes = 64;
inline constexpr size_t kPage = 4096;
inline constexpr size_t kBlobAlign = 64;

struct Header {
  char magic[8];
  uint32_t format;
  uint32_t headerBytes;
  uint64_t metaOffset, metaBytes, dataOffset, dataBytes;
  uint64_t checksum; ///< Hasher over the file, this field read as 0
  uint64_t reserved;
};
static_assert(sizeof(Header) == kHeaderBytes);

inline size_t alignUp(size_t v, size_t a) {
  return (v + a - 1) / a * a;
}

/// FNV-1a over 64-bit words (the tail zero-padded): each word step is a
/// bijection of the state, so any change confined to one word changes the
/// result. A corruption check, not a signature.
class Hasher {
public:
  void update(const void *data, size_t n);
  uint64_t finish();

private:
  void mix(uint64_t w) { h_ = (h_ ^ w) * 0x100000001b3ull; }
  void flush();
  uint64_t h_ = 0xcbf29ce484222325ull;
  uint8_t pending_[8] = {};
  size_t fill_ = 0;
};

/// The data part being assembled: chunks at 64-aligned offsets (the bytes
/// are not copied: they must live until the file is written).
struct DataPart {
  struct Chunk {
    const void *data;
    size_t size, offset;
  };
  std::vector<Chunk> chunks;
  size_t end = 0;
  /// Places `size` bytes at the next multiple of `align` (a power of two).
  void add(const void *data, size_t size, artifact::Blob *blob, size_t align = kBlobAlign);
};

Status writeAll(int fd, const void *data, size_t n);

/// Writes a frame of kind `magic` at `fd`'s position: header, `meta`, and
/// `data` from the next page boundary; `written` gets its size.
Status writeFramed(int fd, const char (&magic)[8], uint32_t format, const std::string &meta,
                   const DataPart &data, uint64_t &written);

/// Creates `path` through a temporary file next to it that `write` fills
/// and that is renamed over `path` once complete (a failure leaves what was
/// there); created 0666 so that the process's umask applies (mkstemp would
/// make it 0600).
Status writeFileAtomically(const std::string &path, const std::function<Status(int fd)> &write);

/// A file mapped read-only; what points into it keeps it alive.
struct Mapping {
  void *base = nullptr;
  size_t size = 0;
  ~Mapping();
};

/// Maps the file at `path` read-only; `fail` words the errors.
Status mapFile(const std::string &path, std::shared_ptr<Mapping> &out,
               const std::function<Status(const std::string &)> &fail);

/// Checks the frame in [bytes, bytes + size): its magic is `magic` (else
/// "not a KIND (no MAGIC magic)", `kind` naming what was expected), its
/// format `format`, its sizes fit and its checksum matches. On success
/// `h` is its header. The error has no prefix (the caller names the file).
Status checkFramed(const uint8_t *bytes, size_t size, const char (&magic)[8], uint32_t format,
                   const std::string &kind, Header &h);

/// The checks of what a file was compiled by and for: written by this Kiln
/// (`kilnVersion`), for a CPU whose features (`features`, LLVM's string)
/// this machine has; the error names `cpuRequested` and `cpu`.
Status checkCompiledFor(const std::string &kilnVersion, const std::string &cpuRequested,
                        const std::string &cpu, const std::string &features);

/// The elements of a tensor of `shape` read from a file, or nullopt when
/// its shape is corrupt: a negative dim, one of 2^40 or more, or 2^44
/// elements or more in all (no model has such a tensor).
std::optional<int64_t> elementsOfStored(std::span<const int64_t> shape);

/// True when the file at `path` starts with `magic`.
bool hasMagic(const std::string &path, const char (&magic)[8]);

/// The bytes of `b` in the data part [data, data + dataBytes), when it
/// lies inside at a 64-byte aligned offset.
std::optional<std::span<const uint8_t>> blobIn(const uint8_t *data, uint64_t dataBytes,
                                               const artifact::Blob &b);

} // namespace kiln::runtime::framing
