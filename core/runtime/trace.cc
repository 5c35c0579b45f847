#include "core/runtime/trace.h"

#include <bit>
#include <cstdio>
#include <cstring>
#include <set>

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
  std::set<TaskId> named;  // tracks whose metadata has been written
};

namespace {
void write_json_string(std::FILE* f, std::string_view s) {
  std::fputc('"', f);
  for (char c : s) {
    switch (c) {
      case '"': std::fputs("\\\"", f); break;
      case '\\': std::fputs("\\\\", f); break;
      case '\n': std::fputs("\\n", f); break;
      case '\t': std::fputs("\\t", f); break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) std::fprintf(f, "\\u%04x", c);
        else std::fputc(c, f);
    }
  }
  std::fputc('"', f);
}
int pid_of(const TaskId& t) { return static_cast<int>(t.job) + 1; }
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

void ChromeTraceWriter::close() {
  if (!impl_->file) return;
  std::fputs("\n]}\n", impl_->file);
  std::fclose(impl_->file);
  impl_->file = nullptr;
}

void ChromeTraceWriter::record(TracePhase phase, const TaskId& track, std::string_view category,
                               std::string_view name, Time start, Duration duration,
                               std::initializer_list<TraceArg> args) {
  std::FILE* f = impl_->file;
  if (!f) return;
  auto sep = [&] {
    if (!impl_->first) std::fputs(",\n", f);
    impl_->first = false;
  };
  if (impl_->named.insert(track).second) {
    sep();
    std::fprintf(f, "{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":%d,\"args\":{\"name\":", pid_of(track));
    write_json_string(f, job_name(track.job));
    std::fputs("}},\n", f);
    std::fprintf(f, "{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":%d,\"tid\":%d,\"args\":{\"name\":",
                 pid_of(track), track.index);
    write_json_string(f, track.short_name());
    std::fputs("}}", f);
  }
  sep();
  std::fprintf(f, "{\"ph\":\"%c\",\"pid\":%d,\"tid\":%d,\"ts\":%.3f", static_cast<char>(phase), pid_of(track),
               track.index, static_cast<double>(start) / 1000.0);
  if (phase == TracePhase::kSpan) std::fprintf(f, ",\"dur\":%.3f", static_cast<double>(duration) / 1000.0);
  if (phase == TracePhase::kInstant) std::fputs(",\"s\":\"t\"", f);
  std::fputs(",\"cat\":", f);
  write_json_string(f, category);
  std::fputs(",\"name\":", f);
  write_json_string(f, name);
  if (args.size() > 0) {
    std::fputs(",\"args\":{", f);
    bool first = true;
    for (const auto& a : args) {
      if (!first) std::fputc(',', f);
      first = false;
      write_json_string(f, a.key);
      std::fputc(':', f);
      if (!a.text.empty()) write_json_string(f, a.text);
      else std::fprintf(f, "%.17g", a.number);
    }
    std::fputc('}', f);
  }
  std::fputc('}', f);
}

}  // namespace twinps
