#include "tools/cli.h"

#include <cstdarg>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <cstdint>
#include <iostream>
#include <typeinfo>

namespace twinps::cli {

namespace {

bool is_unsigned_type(const std::type_info& t) {
  return t == typeid(unsigned) || t == typeid(unsigned long) || t == typeid(unsigned long long) ||
         t == typeid(unsigned short) || t == typeid(std::vector<unsigned>) ||
         t == typeid(std::vector<unsigned long>) || t == typeid(std::vector<unsigned long long>);
}

// Boost reads "-3" into an unsigned flag as 2^64 - 3; refuse a sign instead.
void refuse_negative_unsigned(const po::parsed_options& parsed, const po::options_description& options) {
  for (const auto& o : parsed.options) {
    if (o.string_key.empty()) continue;
    const auto* d = options.find_nothrow(o.string_key, false);
    const auto* typed = d ? dynamic_cast<const po::typed_value_base*>(d->semantic().get()) : nullptr;
    if (!typed || !is_unsigned_type(typed->value_type())) continue;
    for (const auto& v : o.value)
      if (v.find('-') != std::string::npos)
        throw po::error("--" + o.string_key + " must not be negative (got " + v + ")");
  }
}

// Runs each flag's check (->notifier) so that a failure names its flag; po::notify
// runs them again afterwards, harmlessly, when it stores the values.
void run_checks(const po::variables_map& vm, const po::options_description& options) {
  for (const auto& [name, value] : vm) {
    const auto* d = options.find_nothrow(name, false);
    if (!d || value.empty()) continue;
    try {
      d->semantic()->notify(value.value());
    } catch (const BadValue& e) {
      throw po::error("--" + name + " " + e.what());
    }
  }
}

}  // namespace

int parse(int argc, char** argv, const std::string& usage, const po::options_description& options,
          po::variables_map& vm, const po::positional_options_description* positional) {
  const std::string command = argc > 0 ? argv[0] : "twinps";
  try {
    // Boost drops words that no positional option takes: find them first.
    std::vector<std::string> words;
    for (const auto& o : po::command_line_parser(argc, argv).options(options).run().options)
      if (o.string_key.empty() && o.position_key >= 0) words.insert(words.end(), o.value.begin(), o.value.end());
    const unsigned taken = positional ? positional->max_total_count() : 0;
    if (words.size() > taken) {
      std::string list;
      for (std::size_t i = taken; i < words.size(); ++i) list += (i == taken ? "'" : " '") + words[i] + "'";
      throw po::error(std::string("unexpected argument") + (words.size() - taken > 1 ? "s " : " ") + list);
    }
    auto parser = po::command_line_parser(argc, argv).options(options);
    if (positional) parser.positional(*positional);
    const po::parsed_options parsed = parser.run();
    po::store(parsed, vm);
    if (vm.count("help")) {
      std::cout << usage << "\n\n" << options << "\n";
      return kExitOk;
    }
    refuse_negative_unsigned(parsed, options);
    run_checks(vm, options);
    po::notify(vm);
  } catch (const po::error& e) {
    std::cerr << command << ": " << e.what() << "\n(see " << command << " --help)\n";
    return kExitBadInput;
  }
  return -1;
}

std::function<void(const std::string&)> one_of(std::initializer_list<const char*> words) {
  std::vector<std::string> allowed(words.begin(), words.end());
  return [allowed](const std::string& v) {
    for (const auto& w : allowed)
      if (v == w) return;
    std::string list;
    for (std::size_t i = 0; i < allowed.size(); ++i)
      list += (i == 0 ? "" : i + 1 == allowed.size() ? " or " : ", ") + allowed[i];
    throw BadValue("must be " + list + " (got '" + v + "')");
  };
}

void Table::print(std::FILE* out) const {
  std::size_t width = 0;
  for (const auto& [k, v] : rows_) width = std::max(width, k.size());
  for (const auto& [k, v] : rows_) std::fprintf(out, "  %-*s  %s\n", static_cast<int>(width), k.c_str(), v.c_str());
}

std::string load_average() {
  std::ifstream in("/proc/loadavg");
  std::string a, b, c;
  in >> a >> b >> c;
  return a + " " + b + " " + c;
}

bool can_write(const std::string& path) {
  std::error_code ec;
  const bool existed = std::filesystem::exists(path, ec);
  const bool ok = static_cast<bool>(std::ofstream(path, std::ios::app));
  if (ok && !existed) std::filesystem::remove(path, ec);
  return ok;
}

std::string utc_now() {
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  ::gmtime_r(&now, &utc);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%d %H:%M UTC", &utc);
  return text;
}

// Sized to the text: a report line listing a whole curve is longer than any
// fixed buffer we would pick, and a silently cut line misreports.
std::string format(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  va_list measure;
  va_copy(measure, ap);
  const int length = std::vsnprintf(nullptr, 0, fmt, measure);
  va_end(measure);
  std::string text(length > 0 ? static_cast<size_t>(length) : 0, '\0');
  if (length > 0) std::vsnprintf(text.data(), text.size() + 1, fmt, ap);
  va_end(ap);
  return text;
}

}  // namespace twinps::cli
