#pragma once
// Shared plumbing for the twinps subcommands: option parsing with clear errors
// (exit code 2), and the run summary table.
#include <boost/program_options.hpp>
#include <cstdio>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace twinps::cli {

namespace po = boost::program_options;

inline constexpr int kExitOk = 0;
inline constexpr int kExitFailed = 1;    // the run happened and did not succeed
inline constexpr int kExitBadInput = 2;  // the command line or an input file is wrong

// Parses `argv` against `options`; prints --help or a clear error. Returns an
// exit code to stop with, or -1 to go on.
int parse(int argc, char** argv, const std::string& usage, const po::options_description& options,
          po::variables_map& vm, const po::positional_options_description* positional = nullptr);

// A plain-text table for run summaries.
class Table {
 public:
  void row(std::string key, std::string value) { rows_.emplace_back(std::move(key), std::move(value)); }
  void print(std::FILE* out = stdout) const;

 private:
  std::vector<std::pair<std::string, std::string>> rows_;
};

std::string format(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

}  // namespace twinps::cli
