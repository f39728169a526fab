//===- CompileCache.h - Compiled models on disk, reused ---------*- C++ -*-===//
//
// The compile cache: compile() with CompileOptions::cache looks up a
// `.kiln` artifact (runtime/artifact/Artifact.h) keyed by everything the
// compiled code depends on, and loads it instead of compiling; a miss
// compiles and stores one. A warm compile therefore does no LLVM work and
// no oneDNN layout timing. Entries are whole compiled models, not single
// kernels: two models sharing a kernel compile it twice.
//
//   where     $KILN_CACHE_DIR, else $XDG_CACHE_HOME/kiln, else ~/.cache/kiln;
//             $KILN_CACHE=off disables it (the tests run with it off)
//   key       a 128-bit hash of: Kiln's version and a hash of its sources
//             (a rebuilt Kiln misses), LLVM's and oneDNN's versions, the graph
//             after prepareGraph (dims bound, the pipeline run: its text with
//             constants elided, then every constant's dtype, shape and
//             bytes), the resolved target (CPU name and feature string: a
//             native compile on another CPU misses), and every other compile
//             option that changes code (threads, OpenMP's count when 0;
//             libraries, kernels, fusion, layout policy, optimization level)
//   entry     DIR/<key>.kiln, written to a temporary file and renamed (two
//             processes storing one key leave one whole file); a hit
//             updates its mtime (LRU order)
//   bad entry one that does not load (checksum, versions, CPU) is reported
//             as a warning and compiled again, which replaces it. The
//             checksum finds damage, not tampering: a cache folder others
//             can write to runs their code
//   size      after each store, least recently used entries are deleted
//             until the total is at most $KILN_CACHE_MAX (bytes, K/M/G
//             suffixes; default 1G)
//
// Options that ask for compile-time output (--explain-fusion, --emit=...,
// per-kernel dumps, a planted fault) bypass the cache.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "codegen/Compiler.h"
#include "runtime/artifact/Artifact.h"

#include <cstdint>
#include <string>

namespace kiln::codegen {

/// The cache folder, or "" when the cache is off or no folder can be named.
std::string cacheDirectory();

/// $KILN_CACHE_MAX in bytes (default 1 GiB); `error` set on a bad value.
uint64_t cacheLimit(std::string *error = nullptr);

struct CacheStats {
  size_t entries = 0;
  uint64_t bytes = 0;
};
/// The entries of `dir` and their total size.
CacheStats cacheStats(const std::string &dir);
/// Deletes every entry of `dir`; the number deleted.
size_t clearCache(const std::string &dir);
/// Deletes least recently used entries of `dir` until they total at most
/// `limit` bytes; the number deleted.
size_t evictCache(const std::string &dir, uint64_t limit);

/// The hex key of the prepared graph `g` (codegen::prepareGraph) compiled
/// with `options` for the CPU named by `cpu`/`features` (resolved: never
/// "native").
std::string cacheKey(const Graph &g, const CompileOptions &options, const std::string &cpu,
                     const std::string &features);

/// Whether `options` allow the cache (CompileOptions::cache and nothing
/// that needs a real compile's output).
bool cacheApplies(const CompileOptions &options);

} // namespace kiln::codegen
