#pragma once
// Hosts and their cores. Tasks are placed on hosts — one per host (the
// default), every task on one host (a single machine, as `twinps tune
// --validate` runs here), or packed as Kubernetes places pods on nodes — and
// a host's cores are shared by the CPU work of its tasks: worker compute,
// parameter-server service, and each side's handling of every message
// ((de)serialization, copies, syscalls).
//
// Each task runs its CPU work on its own threads (one for a worker and the
// coordinator, `ps_service.threads` for a ps), first come first served: a
// single-threaded task never uses more than one core, and its message
// handling waits behind its step's arithmetic as on a real event loop. The
// jobs at the heads of every task's threads share the host's cores by
// egalitarian processor sharing: each runs at min(1, cores / running jobs)
// of a core. That is what Linux's fair scheduler (CFS, EEVDF since 6.6)
// gives runnable threads of equal weight over a scheduling period, which is
// short (a few ms) next to the jobs here; it is a FluidSystem resource of
// capacity `cores` with every job bounded at one core.
//
// With `cores` 0 a host has a core for every thread: jobs take exactly their
// work, and no fluid solve is needed (a timer each).
//
// Scheduler::kTicked replaces processor sharing with Linux's way of sharing
// cores, tick by tick (sim/ticked_cores.h): a thread woken while every core
// is busy waits on one core, and a core that frees meanwhile may idle until
// the next tick.
#include <deque>
#include <string>
#include <vector>

#include "core/coordinator/cluster_coordinator.h"
#include "core/runtime/executor.h"
#include "core/runtime/random.h"
#include "sim/cost_curve.h"
#include "sim/fluid.h"
#include "sim/ticked_cores.h"

namespace twinps::sim {

struct HostOptions {
  enum class Placement {
    kOnePerHost,  // every task its own host
    kOneHost,     // every task on one host
    kBinPack,     // fill a host with `tasks_per_host` tasks before the next (chief, workers, ps in order)
    kSpread,      // ceil(tasks / tasks_per_host) hosts, tasks dealt round robin
  };
  enum class Scheduler {
    kProcessorSharing,  // the running jobs share the cores evenly
    kTicked,            // per core, switched at scheduler ticks (sim/ticked_cores.h)
  };
  Placement placement = Placement::kOnePerHost;
  int tasks_per_host = 1;
  double cores = 0;  // per host; 0: a core for every thread
  Scheduler scheduler = Scheduler::kProcessorSharing;
  Duration tick = 4000000;  // kTicked: the kernel's tick (1 / CONFIG_HZ)
  Duration slice = 0;       // kTicked: a thread's time slice; 0: Linux's default for the cores
  // Each job's time is its work times a log-normal draw of this sigma and
  // mean 1 (Hosts.duration_spread); 0: exactly its work.
  double duration_spread = 0;
  std::uint64_t seed = 0;  // of those draws
  // (tasks on the host per core, ns): what a message job costs beyond its
  // price on a crowded host (Hosts.crowded_message); hosts whose
  // cores are not counted (`cores` 0) pay nothing.
  CostCurve crowded_message = {};
};

// What a CPU job does: handling a message pays the host's crowding price
// (HostOptions::crowded_message), compute does not.
enum class JobKind { kCompute, kMessage };

class HostModel {
 public:
  // Task slots: 0 the chief, then the workers, then the ps (as NetworkModel numbers them).
  HostModel(ClusterShape shape, HostOptions options, Executor& executor, FluidSystem& fluid);

  int num_hosts() const { return num_hosts_; }
  int host_of(int slot) const { return host_[static_cast<std::size_t>(slot)]; }
  int slot(const TaskId& t) const;
  bool limited() const { return options_.cores > 0; }
  const HostOptions& options() const { return options_; }

  void set_threads(int slot, int threads);
  // Runs `work` of CPU time (what it takes on an idle core) on one of the
  // task's threads, after the jobs queued before it; `done` when finished.
  void run(int slot, Duration work, Callback done, JobKind kind = JobKind::kCompute);
  // The same for work known only when a thread takes the job: `begin` runs
  // then (a ps applies the request as its service starts) and returns it.
  void run_when_started(int slot, UniqueFunction<Duration()> begin, Callback done, JobKind kind = JobKind::kCompute);
  // What a message job of the task in `slot` costs beyond its price
  // (HostOptions::crowded_message at its host's tasks per core).
  Duration crowding_price(int slot) const { return crowding_price_[static_cast<std::size_t>(host_of(slot))]; }
  // Whether a core of the task's host runs nothing now: a thread woken then
  // wakes a sleeping core. A host whose cores are not counted has one for
  // every thread, so always.
  bool idle_core(int slot) const;
  // Whether the task is working now (a job of it running or queued): a
  // message that arrives then is taken by a thread that never went to
  // sleep, so nothing wakes for it.
  bool awake(int slot) const;
  // How long the task has been idle (0 while awake): since its last job
  // ended, or, if it never had one since it started, as long as can be.
  Duration idle_for(int slot) const;
  // The task died: its queued and running jobs vanish, their callbacks never run.
  void reset(int slot);

  // CPU time the host's cores gave, integrated (ns of one core).
  double cpu_ns(int host) const;
  // CPU time charged to a task (its jobs' work, as finished).
  Duration task_cpu(int slot) const { return tasks_[static_cast<std::size_t>(slot)].charged; }

 private:
  struct CpuJob {
    Duration work;
    UniqueFunction<Duration()> begin;
    Callback done;
    JobKind kind = JobKind::kCompute;
  };
  struct Running {
    FluidSystem::ActivityId activity = FluidSystem::kNoActivity;
    TimerId timer = kNoTimer;
    TickedCores::JobId ticked = TickedCores::kNoJob;
    bool busy() const {
      return activity != FluidSystem::kNoActivity || timer != kNoTimer || ticked != TickedCores::kNoJob;
    }
  };
  struct TaskThreads {
    int threads = 1;
    std::deque<CpuJob> queue;
    std::vector<Running> running;  // one per busy thread
    std::uint64_t epoch = 0;       // bumped by reset(): jobs of an older epoch are gone
    Duration charged = 0;
    Time idle_since = kNeverWorked;  // when its last job ended
  };
  static constexpr Time kNeverWorked = -1;
  void start_next(int slot);
  bool ticked() const { return !ticked_.empty(); }
  // A thread's number among all tasks' (TickedCores remembers its last core).
  std::size_t thread_key(int slot, std::size_t which) const { return which * tasks_.size() + static_cast<std::size_t>(slot); }
  void finished(int slot, std::uint64_t epoch, std::size_t which, Duration work);
  // The time a job priced `work` takes this once (options_.duration_spread).
  Duration drawn(Duration work);

  ClusterShape shape_;
  HostOptions options_;
  Executor& ex_;
  FluidSystem& fluid_;
  int num_hosts_ = 0;
  std::vector<int> host_;        // by task slot
  std::vector<int> cpu_;         // by host: its fluid resource (limited hosts, processor sharing)
  std::vector<TickedCores> ticked_;  // by host (limited hosts, kTicked)
  RandomStream durations_;           // options_.duration_spread's draws
  std::vector<TaskThreads> tasks_;
  std::vector<Duration> unlimited_busy_;  // by host, when not limited
  std::vector<Duration> crowding_price_;  // by host
  std::vector<int> sharing_jobs_;         // by host (limited, processor sharing): jobs running
};

}  // namespace twinps::sim
