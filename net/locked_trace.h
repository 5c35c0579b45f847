#pragma once
// A TraceSink shared by nodes on different threads (the in-process cluster):
// records are serialised by a mutex before reaching the wrapped sink.
#include <mutex>

#include "core/runtime/trace.h"

namespace twinps::net {

class LockedTraceSink final : public TraceSink {
 public:
  explicit LockedTraceSink(TraceSink& inner) : inner_(inner) {}
  void record(TracePhase phase, const TaskId& track, std::string_view category, std::string_view name, Time start,
              Duration duration, std::initializer_list<TraceArg> args) override {
    std::lock_guard<std::mutex> lock(mu_);
    inner_.record(phase, track, category, name, start, duration, args);
  }

 private:
  std::mutex mu_;
  TraceSink& inner_;
};

}  // namespace twinps::net
