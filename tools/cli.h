#pragma once
// Shared plumbing for the twinps subcommands: option parsing with clear errors
// (exit code 2, naming the flag), value checks declared beside each flag, and
// the run summary table.
//
// A command's argv[0] is its whole name ("twinps eval", "twinps bench sim"):
// main() and `twinps bench` set it, so every message can say which command
// it comes from.
#include <boost/program_options.hpp>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <functional>
#include <initializer_list>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace twinps::cli {

namespace po = boost::program_options;

inline constexpr int kExitOk = 0;
inline constexpr int kExitFailed = 1;    // the run happened and did not succeed
inline constexpr int kExitBadInput = 2;  // the command line or an input file is wrong

// Parses `argv` against `options`; prints --help or a clear error. Returns an
// exit code to stop with, or -1 to go on. A token that is no option is an
// error unless `positional` takes it; a negative number given to an unsigned
// flag is an error (Boost would wrap it around); a check attached with
// ->notifier() (below) that fails is reported naming its flag.
int parse(int argc, char** argv, const std::string& usage, const po::options_description& options,
          po::variables_map& vm, const po::positional_options_description* positional = nullptr);

// ---- value checks, attached to a flag with ->notifier(check)

// Thrown by a check; parse() reports it as "twinps CMD: --FLAG <message>".
struct BadValue : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

// How a value is shown in messages and --help: the shortest text that reads
// back as the same number (0.1, not 0.10000000000000001).
template <class T>
std::string shown(const T& v) {
  if constexpr (std::is_floating_point_v<T>) {
    char buf[64];
    auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
    return ec == std::errc() ? std::string(buf, end) : std::string("?");
  } else if constexpr (std::is_arithmetic_v<T>) {
    return std::to_string(v);
  } else {
    return std::string(v);
  }
}

// po::value(target) with `initial` as its default, shown as written.
template <class T>
po::typed_value<T>* value_or(T* target, const T& initial) {
  return po::value(target)->default_value(initial, shown(initial));
}

// v >= min (and a number: NaN is refused).
template <class T>
auto at_least(T min) {
  return [min](const auto& v) {
    if (!(v >= min)) throw BadValue("must be at least " + shown(min) + " (got " + shown(v) + ")");
  };
}
// v > 0 (and a number).
inline auto positive() {
  return [](const auto& v) {
    if (!(v > 0)) throw BadValue("must be positive (got " + shown(v) + ")");
  };
}
// lo <= v <= hi.
template <class T>
auto in_range(T lo, T hi) {
  return [lo, hi](const auto& v) {
    if (!(v >= lo && v <= hi))
      throw BadValue("must be from " + shown(lo) + " to " + shown(hi) + " (got " + shown(v) + ")");
  };
}
// One of the listed words.
std::function<void(const std::string&)> one_of(std::initializer_list<const char*> words);

// A plain-text table for run summaries.
class Table {
 public:
  void row(std::string key, std::string value) { rows_.emplace_back(std::move(key), std::move(value)); }
  void print(std::FILE* out = stdout) const;

 private:
  std::vector<std::pair<std::string, std::string>> rows_;
};

std::string format(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

// The machine's load averages over 1, 5 and 15 minutes ("0.52 0.31 0.20"):
// every measurement the tools print says the load it ran under.
std::string load_average();
// Now, as "2026-11-25 20:24 UTC".
std::string utc_now();

// Whether `path` can be written, checked before a long run so that a bad
// path is refused at once. A file the check creates is removed again: a run
// that fails later leaves no empty file behind.
bool can_write(const std::string& path);

}  // namespace twinps::cli
