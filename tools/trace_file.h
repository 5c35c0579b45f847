#pragma once
// Real-mode trace files (`twinps train --trace`, `twinps serve --trace`): each
// task writes its own file, stamped with which task wrote it and where its
// clock starts, so `twinps trace merge` can put the files of a cluster on one
// timeline (tools/commands/trace.cc says how the clocks are aligned).
//
// A task's trace times count from its executor's epoch (a steady-clock
// instant). The stamp records that epoch twice:
//  * "steady_origin_ns": the epoch on CLOCK_MONOTONIC, with "steady_clock_id"
//    (the kernel's boot id): files with the same id read the same clock, so
//    their origins compare exactly;
//  * "unix_origin_us": the epoch on the wall clock (CLOCK_REALTIME), for files
//    from different machines, as exact as the machines' clock synchronisation.
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <string>

#include "core/runtime/trace.h"
#include "net/asio_executor.h"

namespace twinps::cli {

inline std::string steady_clock_id() {
  std::ifstream in("/proc/sys/kernel/random/boot_id");
  std::string id;
  if (in && std::getline(in, id) && !id.empty()) return "boot:" + id;
  char host[256] = {0};
  ::gethostname(host, sizeof host - 1);
  return "host:" + std::string(host);  // no boot id: the host name, which a restart does not change
}

inline void stamp_trace(ChromeTraceWriter& trace, const TaskId& task, const net::AsioExecutor& executor) {
  using namespace std::chrono;
  // The two clocks are read back to back: the wall-clock origin is off by
  // the time between the reads (well under a microsecond).
  const auto steady_now = steady_clock::now();
  const auto wall_now = system_clock::now();
  const auto since_epoch = duration_cast<system_clock::duration>(steady_now - executor.epoch());
  const auto wall_origin = wall_now - since_epoch;
  trace.set_info("task", task.short_name());
  trace.set_info("pid", static_cast<std::int64_t>(::getpid()));
  trace.set_info("steady_clock_id", steady_clock_id());
  trace.set_info("steady_origin_ns",
                 static_cast<std::int64_t>(duration_cast<nanoseconds>(executor.epoch().time_since_epoch()).count()));
  trace.set_info("unix_origin_us",
                 static_cast<std::int64_t>(duration_cast<microseconds>(wall_origin.time_since_epoch()).count()));
}

}  // namespace twinps::cli
