//===- Version.h - The Kiln version compiled files record -------*- C++ -*-===//
//
// Defined by kiln_framing (runtime/artifact/FileFormat.cpp) from the build's
// project VERSION: every compiled file records it, and a loader refuses a
// file written by another version.
//
//===----------------------------------------------------------------------===//
#pragma once

namespace kiln::runtime {

/// The Kiln version compiled files record ("0.1.0").
const char *kilnVersion();

} // namespace kiln::runtime
