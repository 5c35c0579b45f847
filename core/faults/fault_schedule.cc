#include "core/faults/fault_schedule.h"

#include <cstdio>
#include <memory>

namespace twinps {

std::string fault_time_string(Time t) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f s", to_seconds(t));
  return buf;
}

namespace {

// As scenarios name tasks: "chief", "worker:1".
std::string name(const TaskId& t) { return t == TaskId::chief() ? std::string("chief") : t.short_name(); }

std::string names(const std::vector<TaskId>& tasks) {
  std::string s;
  for (const auto& t : tasks) s += (s.empty() ? "" : ",") + name(t);
  return s;
}

std::string factor_string(double f) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1fx", f);
  return buf;
}

// An actuator's failure goes to the fault log: a fault that did not happen
// must not pass for one that did.
void log_failure(const FaultLog& log, Time at, const std::string& what, const Status& st) {
  if (!st.ok() && log) log(at, "FAILED: " + what + ": " + describe(st));
}

}  // namespace

std::string ClusterFault::describe(Time origin) const {
  const std::string until = end ? " until " + fault_time_string(*end - origin) : " for good";
  switch (kind) {
    case Kind::kKill:
      return (task == TaskId::chief() ? std::string("kill the coordinator") : "kill " + task.short_name()) + until;
    case Kind::kPause: return "pause " + name(task) + " (SIGSTOP)" + until;
    case Kind::kPartition:
      return "partition " + names(side_a) + " | " + (side_b.empty() ? std::string("the rest") : names(side_b)) + until;
    case Kind::kSlow: return name(task) + " computes " + factor_string(factor) + " slower" + until;
  }
  return "?";
}

void schedule_cluster_fault(const ClusterFault& fault, Executor& executor, ClusterControl& control, FaultLog log,
                            Time origin) {
  const std::string what = fault.describe(origin);
  Callback start, stop;
  Executor* ex = &executor;
  ClusterControl* c = &control;
  switch (fault.kind) {
    case ClusterFault::Kind::kKill:
      start = [c, ex, log, what, t = fault.task] { log_failure(log, ex->now(), what, c->kill(t)); };
      stop = [c, ex, log, t = fault.task] { log_failure(log, ex->now(), "restart " + t.short_name(), c->restart(t)); };
      break;
    case ClusterFault::Kind::kPause:
      start = [c, ex, log, what, t = fault.task] { log_failure(log, ex->now(), what, c->pause(t)); };
      stop = [c, ex, log, t = fault.task] { log_failure(log, ex->now(), "resume " + t.short_name(), c->resume(t)); };
      break;
    case ClusterFault::Kind::kPartition: {
      auto id = std::make_shared<std::optional<ClusterControl::PartitionId>>();
      start = [c, ex, log, what, id, a = fault.side_a, b = fault.side_b] {
        auto made = c->partition(a, b);
        if (made.ok()) *id = *made;
        log_failure(log, ex->now(), what, made.status());
      };
      stop = [c, ex, log, id] {
        if (*id) log_failure(log, ex->now(), "heal", c->heal(**id));
      };
      break;
    }
    case ClusterFault::Kind::kSlow:
      start = [c, ex, log, what, t = fault.task, f = fault.factor] { log_failure(log, ex->now(), what, c->slow(t, f)); };
      stop = [c, ex, log, t = fault.task, f = fault.factor] {
        log_failure(log, ex->now(), "unslow " + t.short_name(), c->unslow(t, f));
      };
      break;
  }
  // The description is logged when the fault fires: one scheduled after the
  // program ended never happened.
  executor.post_at(fault.at, [log, at = fault.at, what, start = std::move(start)]() mutable {
    if (log) log(at, what);
    start();
  });
  if (fault.end) executor.post_at(*fault.end, std::move(stop));
}

}  // namespace twinps
