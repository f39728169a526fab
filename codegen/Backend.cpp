//===- Backend.cpp - What a library backend can run, as data --------------===//
#include "codegen/Backend.h"

#include "ir/Support.h"

namespace kiln::codegen {

LibraryCapabilities::LibraryCapabilities(std::string name, std::span<const LibraryOpSupport> rows)
    : name_(std::move(name)), rows_(rows.begin(), rows.end()) {
  for (size_t i = 0; i < kNumOps; ++i)
    byKind_.push_back(LibraryOpSupport{static_cast<OpKind>(i)});
  for (const LibraryOpSupport &r : rows_) {
    KILN_ASSERT(!(r.channelsLast && !r.anchor) && "channelsLast applies to anchors");
    byKind_[static_cast<size_t>(r.op)] = r;
  }
}

} // namespace kiln::codegen
