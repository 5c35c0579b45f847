#pragma once
// Child processes for integration tests: the real `twinps` binary, started and
// stopped with the CLI's own process handling (tools/subprocess.h), so tests
// and the bench/tune commands share one implementation. A handle stops only
// the process it started.
#include <string>
#include <utility>
#include <vector>

#include "tools/subprocess.h"

namespace twinps::testing {

using Process = cli::Child;

// Path of the twinps binary under test (set by CMake).
inline std::string twinps_binary() { return TWINPS_BINARY; }

// Starts the twinps binary under test with `args` (the command and its flags).
inline Process twinps(std::vector<std::string> args) {
  args.insert(args.begin(), twinps_binary());
  return Process::start(std::move(args));
}

// A fresh empty directory under the system's temp dir.
inline std::string temp_dir(const std::string& tag) { return cli::make_temp_dir(tag); }

}  // namespace twinps::testing
