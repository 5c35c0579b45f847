#include "sim/cluster_faults.h"

#include "sim/task_names.h"

namespace twinps::sim {

std::optional<ClusterFault> cluster_fault(const scenario::Fault& f) {
  ClusterFault c;
  c.at = from_seconds(f.at_s());
  if (f.has_duration_s()) c.end = add_saturating(c.at, from_seconds(f.duration_s()));
  switch (f.kind_case()) {
    case scenario::Fault::kKillWorker:
      c.kind = ClusterFault::Kind::kKill;
      c.task = TaskId::worker(f.kill_worker());
      return c;
    case scenario::Fault::kKillPs:
      c.kind = ClusterFault::Kind::kKill;
      c.task = TaskId::ps(f.kill_ps());
      return c;
    case scenario::Fault::kKillCoordinator:
      c.kind = ClusterFault::Kind::kKill;
      c.task = TaskId::chief();
      return c;
    case scenario::Fault::kPartition:
      c.kind = ClusterFault::Kind::kPartition;
      for (const auto& n : f.partition().a()) c.side_a.push_back(*parse_task_name(n));
      for (const auto& n : f.partition().b()) c.side_b.push_back(*parse_task_name(n));
      return c;
    case scenario::Fault::kStraggler:
      c.kind = ClusterFault::Kind::kSlow;
      c.task = TaskId::worker(f.straggler().worker());
      c.factor = f.straggler().factor();
      return c;
    case scenario::Fault::kPause:
      c.kind = ClusterFault::Kind::kPause;
      c.task = *parse_task_name(f.pause());
      return c;
    case scenario::Fault::kSlowLink:
    case scenario::Fault::kHotspot:
    case scenario::Fault::KIND_NOT_SET: break;
  }
  return std::nullopt;
}

}  // namespace twinps::sim
