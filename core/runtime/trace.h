#pragma once
// Where nodes report what they did: spans, instants and counters on a track
// per task. The simulator and the real runtime write the same records, so one
// Chrome Trace Event file format (opens in Perfetto) serves both, and the
// simulator folds every record into the run's trace hash.
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/cluster/task_id.h"
#include "core/runtime/time.h"

namespace twinps {

struct TraceArg {
  std::string_view key;
  double number = 0;
  std::string_view text = {};  // used instead of `number` when non-empty
};

enum class TracePhase : char { kSpan = 'X', kInstant = 'i', kCounter = 'C' };

class TraceSink {
 public:
  virtual ~TraceSink() = default;
  virtual void record(TracePhase phase, const TaskId& track, std::string_view category, std::string_view name,
                      Time start, Duration duration, std::initializer_list<TraceArg> args) = 0;

  void span(const TaskId& track, std::string_view category, std::string_view name, Time start, Duration duration,
            std::initializer_list<TraceArg> args = {}) {
    record(TracePhase::kSpan, track, category, name, start, duration, args);
  }
  void instant(const TaskId& track, std::string_view category, std::string_view name, Time at,
               std::initializer_list<TraceArg> args = {}) {
    record(TracePhase::kInstant, track, category, name, at, 0, args);
  }
  void counter(const TaskId& track, std::string_view name, Time at, double value) {
    record(TracePhase::kCounter, track, "counter", name, at, 0, {TraceArg{"value", value}});
  }
};

class NullTraceSink final : public TraceSink {
 public:
  void record(TracePhase, const TaskId&, std::string_view, std::string_view, Time, Duration,
              std::initializer_list<TraceArg>) override {}
};

// Folds records into a 64-bit hash (FNV-style multiply and shift, a word at a
// time). Two runs with equal hashes wrote the same records in the same order
// at the same times.
class TraceHasher final : public TraceSink {
 public:
  void record(TracePhase phase, const TaskId& track, std::string_view category, std::string_view name, Time start,
              Duration duration, std::initializer_list<TraceArg> args) override;
  void mix(std::uint64_t value);
  std::uint64_t hash() const { return hash_; }
  std::uint64_t records() const { return records_; }

 private:
  void mix_bytes(const void* data, std::size_t n);
  std::uint64_t hash_ = 0xcbf29ce484222325ull;
  std::uint64_t records_ = 0;
};

// Streams Chrome Trace Event JSON ({"traceEvents": [...]}) to a file: one
// process per job, one thread per task, timestamps in microseconds. Each
// event is serialised by nlohmann-json, so every file is valid JSON whatever
// the records hold: names are UTF-8 (invalid bytes become U+FFFD) and a
// number that JSON cannot hold (NaN, +-Inf) is written as the string "NaN",
// "Infinity" or "-Infinity".
//
// `set_info` adds a key to the file's "otherData" object (written at
// close()): real tasks record which task wrote the file and where its clock
// starts, which `twinps trace merge` uses to put several files on one
// timeline (core has no clock of its own to read; tools/ supplies them).
class ChromeTraceWriter final : public TraceSink {
 public:
  // Opening fails loudly through ok()/error() rather than dropping records.
  explicit ChromeTraceWriter(const std::string& path);
  ~ChromeTraceWriter() override;
  bool ok() const;
  const std::string& error() const { return error_; }
  void record(TracePhase phase, const TaskId& track, std::string_view category, std::string_view name, Time start,
              Duration duration, std::initializer_list<TraceArg> args) override;
  // Also written at once as a metadata event ("ph":"M", name "twinps_info"),
  // so a file cut short by a crash still says who wrote it.
  void set_info(const std::string& key, const std::string& value);
  void set_info(const std::string& key, std::int64_t value);
  std::uint64_t records() const;
  // Writes the closing bracket and "otherData"; called by the destructor if not before.
  void close();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::string error_;
};

// Sends each record to several sinks.
class TraceTee final : public TraceSink {
 public:
  void add(TraceSink* sink) { sinks_.push_back(sink); }
  void record(TracePhase phase, const TaskId& track, std::string_view category, std::string_view name, Time start,
              Duration duration, std::initializer_list<TraceArg> args) override {
    for (auto* s : sinks_) s->record(phase, track, category, name, start, duration, args);
  }

 private:
  std::vector<TraceSink*> sinks_;
};

}  // namespace twinps
