#pragma once
// Leveled logs for every twinps process (spdlog), on stderr: what a task
// does (serving, stopping, a peer refused, a checkpoint refused), never a
// command's results, which stay on stdout as tables and JSON.
//
//   TWINPS_LOG_LEVEL   trace, debug, info (default), warn, error, off
//   TWINPS_LOG_FORMAT  text (default): "2026-11-23T05:40:00.123 info twinps serve: ..."
//                      json: one object a line {"time","level","logger","pid","msg"}
//
// gRPC's own log (gpr_log) is routed through the "grpc" logger at debug
// level, one line per message: whatever gRPC reports as an error also
// reaches twinps as a status, which twinps reports itself in one clear line
// naming the task (a port in use, a peer down); the gRPC detail stays
// available with TWINPS_LOG_LEVEL=debug.
#include <memory>
#include <string>

#include <spdlog/spdlog.h>

namespace twinps::log {

// Sets up the default logger (named `name`, e.g. "twinps serve") and routes
// gRPC's log; safe to call again (a command renames the logger).
void init(const std::string& name);
// Applies a --log-level value; false if it names no level.
bool set_level(const std::string& level);

}  // namespace twinps::log
