//===- Artifact.h - Compiled models saved to and loaded from disk -*- C++ -*-===//
//
// A `.kiln` artifact is a compiled model (runtime::Executable) in one file,
// loadable without LLVM or the compiler:
//
//   [0, 64)         header: magic "KILNART\0", format version, where the
//                   metadata and the data are, and a 64-bit checksum of
//                   the whole file (this field read as 0): a check against
//                   damage, not a signature (anyone can recompute it);
//   metadata        protobuf (Artifact.proto): Kiln and oneDNN versions,
//                   target CPU and features, oneDNN ISA, input and output
//                   signature (symbolic dims named), buffers, steps, the
//                   memory plan, the kernel table;
//   data            from a page boundary: constants, the constants extern
//                   steps hold (oneDNN's reordered weights) and the kernels'
//                   ELF objects, each 64-byte aligned.
//
// Loading maps the file (mmap, read-only): constants are used where they
// lie, not copied; the kernels' objects are linked by runtime::LoadedCode
// (ElfLoader.h). Saving the same Executable twice gives the same bytes.
// Every check a loader can make comes before anything runs: magic, format
// version, size, checksum, Kiln and oneDNN versions, this CPU's features,
// the metadata's consistency (buffer ids, blob ranges), and then the
// executable's own memory-plan check (Executable::finalize).
//
//===----------------------------------------------------------------------===//
#pragma once

#include "runtime/Executable.h"
#include "runtime/Version.h"

#include <memory>
#include <span>
#include <string>
#include <vector>

namespace kiln::runtime {

/// An input or output as the model declares it.
struct ArtifactPort {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> dims;
  /// Per dim: its symbol ("batch") or "" for a static dim.
  std::vector<std::string> symbols;
};

/// What an artifact says about itself (`kiln inspect`).
struct ArtifactInfo {
  std::string kilnVersion, dnnlVersion;
  /// The model file it was compiled from (its file name).
  std::string model;
  TargetInfo target;
  std::vector<ArtifactPort> inputs, outputs;
  /// What was compiled ("3 kernels, 2 library calls, 0 fallbacks").
  std::string summary;
  /// What the compiler reported, replayed by a compile-cache hit
  /// (codegen/CompileCache.h).
  struct Report {
    int kernels = 0, libraryCalls = 0, fallbacks = 0;
    std::string target;
    std::vector<std::string> libraryLines, fallbackLines;
    uint64_t lowerBound = 0, naiveBytes = 0;
    int inPlace = 0;
    int32_t peakStep = -1;
  } report;
  uint64_t fileBytes = 0, constantBytes = 0, codeBytes = 0;
  size_t numKernels = 0, numSteps = 0;
};

/// True when the file at `path` starts with the artifact or size set magic.
bool isArtifactFile(const std::string &path);
/// True when it starts with a CUDA artifact's (runtime/cuda/CudaArtifact.h),
/// which the CUDA runtime loads, not loadArtifact.
bool isCudaArtifactFile(const std::string &path);
/// True when it starts with a symbolic artifact's (codegen/SymbolicArtifact.h),
/// which the compiler loads, not loadArtifact.
bool isSymbolicArtifactFile(const std::string &path);

/// Writes `exe` (finalized, every kernel step with its KernelObject, every
/// extern step saveable) to `path`, with `info`'s model, ports and summary
/// (versions and target come from here and from `exe`). Written to a
/// temporary file in the same folder and renamed over `path`, so a failed
/// save leaves what was there.
Status saveArtifact(const Executable &exe, const ArtifactInfo &info, const std::string &path);

/// Loads the artifact at `path`; on success `exe` is finalized and ready to
/// run, and `info` (when given) describes it. A size set is an error naming
/// loadArtifactSet.
Status loadArtifact(const std::string &path, std::unique_ptr<Executable> &exe,
                    ArtifactInfo *info = nullptr);

// Size sets (Note [Size sets] in Artifact.cpp): one model compiled at
// several sizes of its symbolic dims, in one file (`kiln compile --dim
// batch=1,8,64 -o`, kiln::Executable::save of a per-size model).

/// One size of a set to save.
struct ArtifactSetEntry {
  /// The sizes it was compiled at ("batch=8, seq=128").
  std::string sizes;
  const Executable *exe;
  const ArtifactInfo *info;
};
/// Writes `members` (each as saveArtifact requires) to `path` as one file,
/// the same way saveArtifact does (a temporary file renamed over it).
Status saveArtifactSet(std::span<const ArtifactSetEntry> members, const std::string &path);

/// One loaded size of a set.
struct ArtifactSetMember {
  std::string sizes;
  std::unique_ptr<Executable> exe;
  ArtifactInfo info;
};
/// Loads every member of the size set at `path`, or a lone artifact as a
/// set of one (its sizes empty); any damaged member fails the load.
Status loadArtifactSet(const std::string &path, std::vector<ArtifactSetMember> &members);
/// The member whose inputs have exactly `shapes` (in input order), or -1.
int findSetMember(std::span<const ArtifactSetMember> members,
                  std::span<const std::vector<int64_t>> shapes);
/// "batch=1; batch=8" for errors and reports.
std::string setSizesList(std::span<const ArtifactSetMember> members);

} // namespace kiln::runtime
