//===- CacheCommand.cpp - kiln cache: the compile cache ---------*- C++ -*-===//
//
//   kiln cache path     the folder (codegen/CompileCache.h says how it is found)
//   kiln cache stats    entries, total size, limit
//   kiln cache clear    delete every entry
//
//===----------------------------------------------------------------------===//
#include "codegen/CompileCache.h"
#include "codegen/MemoryPlan.h"
#include "tools/Commands.h"

#include <cstdio>

namespace kiln::tools {
namespace {

const char kCacheUsage[] =
    "usage: kiln cache path|stats|clear\n"
    "  path    print the compile cache's folder\n"
    "  stats   entries, their total size and the limit (KILN_CACHE_MAX)\n"
    "  clear   delete every entry\n"
    "The cache holds compiled models (.kiln artifacts) keyed by the model, the CPU and\n"
    "the compile options; `kiln run --compile`, `kiln bench`, `kiln compile` and\n"
    "`kiln inspect` use it unless --no-cache. Folder: $KILN_CACHE_DIR, else\n"
    "$XDG_CACHE_HOME/kiln, else ~/.cache/kiln; KILN_CACHE=off disables it.\n";

} // namespace

int cacheCommand(const Args &args) {
  if (args.size() == 1 && (args[0] == "--help" || args[0] == "-h")) {
    std::fputs(kCacheUsage, stdout);
    return 0;
  }
  if (args.size() != 1 || (args[0] != "path" && args[0] != "stats" && args[0] != "clear")) {
    if (!args.empty())
      std::fprintf(stderr, "kiln cache: error: unknown action '%s'\n", args[0].c_str());
    std::fputs(kCacheUsage, stderr);
    return 2;
  }
  const std::string dir = codegen::cacheDirectory();
  if (dir.empty()) {
    std::fprintf(stderr, "kiln cache: error: the compile cache is off (KILN_CACHE=off, or no "
                         "HOME, XDG_CACHE_HOME or KILN_CACHE_DIR to put it in)\n");
    return 1;
  }
  if (args[0] == "path") {
    std::printf("%s\n", dir.c_str());
    return 0;
  }
  if (args[0] == "clear") {
    std::printf("deleted %zu entries from %s\n", codegen::clearCache(dir), dir.c_str());
    return 0;
  }
  std::string limitError;
  const uint64_t limit = codegen::cacheLimit(&limitError);
  if (!limitError.empty())
    std::fprintf(stderr, "kiln cache: warning: %s; using 1G\n", limitError.c_str());
  const codegen::CacheStats s = codegen::cacheStats(dir);
  std::printf("folder:  %s\nentries: %zu\nsize:    %s (limit %s)\n", dir.c_str(), s.entries,
              formatBytes(s.bytes).c_str(), formatBytes(limit).c_str());
  return 0;
}

} // namespace kiln::tools
