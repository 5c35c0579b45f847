#include "core/runtime/trace.h"

#include <bit>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <set>

#include <nlohmann/json.hpp>

namespace twinps {

// Eight bytes at a time (the simulator hashes every record of long runs);
// the length goes in too, so "ab"+"c" and "a"+"bc" differ.
void TraceHasher::mix_bytes(const void* data, std::size_t n) {
  const auto* p = static_cast<const unsigned char*>(data);
  mix(n);
  // Words are read little-endian, so big-endian machines agree.
  auto load = [](const unsigned char* q, std::size_t k) {
    std::uint64_t word = 0;
    std::memcpy(&word, q, k);
    if constexpr (std::endian::native == std::endian::big) word = __builtin_bswap64(word);
    return word;
  };
  for (; n >= 8; n -= 8, p += 8) mix(load(p, 8));
  if (n > 0) mix(load(p, n));
}

void TraceHasher::mix(std::uint64_t value) {
  hash_ = (hash_ ^ value) * 0x100000001b3ull;
  hash_ ^= hash_ >> 32;
}

void TraceHasher::record(TracePhase phase, const TaskId& track, std::string_view category, std::string_view name,
                         Time start, Duration duration, std::initializer_list<TraceArg> args) {
  ++records_;
  mix((static_cast<std::uint64_t>(static_cast<unsigned char>(phase)) << 40) |
      (static_cast<std::uint64_t>(track.job) << 32) | static_cast<std::uint32_t>(track.index));
  mix_bytes(category.data(), category.size());
  mix_bytes(name.data(), name.size());
  mix(static_cast<std::uint64_t>(start));
  mix(static_cast<std::uint64_t>(duration));
  for (const auto& a : args) {
    mix_bytes(a.key.data(), a.key.size());
    if (!a.text.empty()) {
      mix_bytes(a.text.data(), a.text.size());
    } else {
      std::uint64_t bits;
      std::memcpy(&bits, &a.number, sizeof bits);
      mix(bits);
    }
  }
}

struct ChromeTraceWriter::Impl {
  std::FILE* file = nullptr;
  bool first = true;
  std::uint64_t records = 0;
  std::set<TaskId> named;  // tracks whose metadata has been written
  nlohmann::ordered_json info = nlohmann::ordered_json::object();
};

namespace {

using Json = nlohmann::ordered_json;

int pid_of(const TaskId& t) { return static_cast<int>(t.job) + 1; }

// JSON has no NaN or infinity: such a value is written as a string that says
// what it was (nlohmann would write null, losing it).
Json number(double v) {
  if (std::isfinite(v)) return v;
  if (std::isnan(v)) return "NaN";
  return v > 0 ? "Infinity" : "-Infinity";
}

Json text(std::string_view s) { return std::string(s); }

// Strings are checked when dumped: invalid UTF-8 becomes U+FFFD rather than
// reaching the file (or throwing).
std::string dump(const Json& j) { return j.dump(-1, ' ', false, Json::error_handler_t::replace); }

}  // namespace

ChromeTraceWriter::ChromeTraceWriter(const std::string& path) : impl_(std::make_unique<Impl>()) {
  impl_->file = std::fopen(path.c_str(), "w");
  if (!impl_->file) {
    error_ = "cannot open trace file '" + path + "' for writing: " + std::strerror(errno);
    return;
  }
  std::fputs("{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n", impl_->file);
}

ChromeTraceWriter::~ChromeTraceWriter() { close(); }

bool ChromeTraceWriter::ok() const { return impl_->file != nullptr || error_.empty(); }

std::uint64_t ChromeTraceWriter::records() const { return impl_->records; }

namespace {
void write_event(std::FILE* f, bool& first, const Json& event) {
  if (!first) std::fputs(",\n", f);
  first = false;
  std::fputs(dump(event).c_str(), f);
}
}  // namespace

void ChromeTraceWriter::set_info(const std::string& key, const std::string& value) {
  impl_->info[key] = value;
  if (impl_->file)
    write_event(impl_->file, impl_->first, Json{{"ph", "M"}, {"name", "twinps_info"}, {"pid", 0}, {"args", {{key, value}}}});
}
void ChromeTraceWriter::set_info(const std::string& key, std::int64_t value) {
  impl_->info[key] = value;
  if (impl_->file)
    write_event(impl_->file, impl_->first, Json{{"ph", "M"}, {"name", "twinps_info"}, {"pid", 0}, {"args", {{key, value}}}});
}

void ChromeTraceWriter::close() {
  if (!impl_->file) return;
  std::fputs("\n],\"otherData\":", impl_->file);
  std::fputs(dump(impl_->info).c_str(), impl_->file);
  std::fputs("}\n", impl_->file);
  std::fclose(impl_->file);
  impl_->file = nullptr;
}

void ChromeTraceWriter::record(TracePhase phase, const TaskId& track, std::string_view category,
                               std::string_view name, Time start, Duration duration,
                               std::initializer_list<TraceArg> args) {
  std::FILE* f = impl_->file;
  if (!f) return;
  ++impl_->records;
  auto write = [&](const Json& event) { write_event(f, impl_->first, event); };
  if (impl_->named.insert(track).second) {
    write(Json{{"ph", "M"}, {"name", "process_name"}, {"pid", pid_of(track)}, {"args", {{"name", job_name(track.job)}}}});
    write(Json{{"ph", "M"},
               {"name", "thread_name"},
               {"pid", pid_of(track)},
               {"tid", track.index},
               {"args", {{"name", track.short_name()}}}});
  }
  Json event{{"ph", std::string(1, static_cast<char>(phase))},
             {"pid", pid_of(track)},
             {"tid", track.index},
             {"ts", static_cast<double>(start) / 1000.0}};
  if (phase == TracePhase::kSpan) event["dur"] = static_cast<double>(duration) / 1000.0;
  if (phase == TracePhase::kInstant) event["s"] = "t";
  event["cat"] = text(category);
  event["name"] = text(name);
  if (args.size() > 0) {
    Json a = Json::object();
    for (const auto& arg : args) a[std::string(arg.key)] = arg.text.empty() ? number(arg.number) : text(arg.text);
    event["args"] = std::move(a);
  }
  write(event);
}

}  // namespace twinps
