//===- Commands.h - The subcommands of the kiln CLI -------------*- C++ -*-===//
//
// Each subcommand is a function taking the arguments after its name and
// returning the process exit status: 0 on success, 1 on a user error (bad
// input, failed check), 2 on bad usage.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace kiln::tools {

using Args = std::vector<std::string>;

int compileCommand(const Args &args);
int importCommand(const Args &args);
int optCommand(const Args &args);
int runCommand(const Args &args);
int opsCommand(const Args &args);

/// If `arg` is `--name=value` returns value; if it is `--name` and a value
/// follows, consumes it from `args` at `i`. nullopt when `arg` is not --name.
bool matchFlag(const Args &args, size_t &i, std::string_view name, std::string &value);

} // namespace kiln::tools
