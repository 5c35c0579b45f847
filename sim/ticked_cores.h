#pragma once
// One host's cores scheduled as Linux schedules them, tick by tick, instead of
// as processor sharing (sim/hosts.h, Hosts.scheduler TICKED).
//
// Processor sharing is work-conserving: no job waits while a core is idle.
// Linux is not, and on a busy host the difference is a tenth of the steps/s
// (docs/fidelity.md, "Where the idle core goes"): a thread woken while every
// core runs something is queued on one core (the one it last ran on), and
// there it waits behind the running thread until that one blocks or has used
// its time slice. A core that goes idle meanwhile does not take it over: the newly
// idle core's balance leaves a thread that ran just before (cache hot), and
// queued threads move to idle cores at the next tick. `perf sched` showed
// exactly that: idle gaps of 1.6-6.4 ms, a woken ps queued 2.29 ms behind a
// worker's arithmetic while the other core idled.
//
// The model, per host of `usable_cores` (a fractional count, the cores probe's,
// is that many cores' worth of work spread over whole cores: with n busy, each
// runs at min(1, usable / n) of an idle machine's core):
//   * a job starting on a thread goes to the thread's last core if that core
//     runs nothing, else to the first core that runs nothing; else, if the
//     last core's thread has had its time slice (counted from when it took
//     the core, over the jobs it ran back to back), it takes that core at
//     once (the preempted job, at the head of that core's queue, resumes
//     next or on a core idle at the next tick), and otherwise it waits in
//     that core's queue;
//   * a core whose thread's slice ends while others wait in its queue
//     switches to the queue's head then, the preempted job going to the
//     back: the kernel notices an expired slice at the next event on that
//     core (a wake-up, a timer, the tick), and on a busy host those come
//     every few microseconds (`perf sched`, docs/fidelity.md);
//   * a core whose job ends takes the next job of its own queue (a thread that
//     has more work goes on without leaving its core), never another core's;
//   * at every tick (multiples of `tick` on the simulated clock) each idle
//     core takes the head of the longest queue.
// Over many ticks every queued job gets its share, as with processor sharing;
// within a tick, they wait, and a core may idle while another has a queue.
#include <cstdint>
#include <deque>
#include <optional>
#include <unordered_map>
#include <vector>

#include "core/runtime/executor.h"

namespace twinps::sim {

class TickedCores {
 public:
  using JobId = std::uint64_t;
  static constexpr JobId kNoJob = 0;

  // `slice`: how long a thread runs before a tick may preempt it; 0 takes
  // Linux's default, 0.75 ms x (1 + log2(cores)), capped at 8 cores (base_slice).
  TickedCores(Executor& executor, double usable_cores, Duration tick, Duration slice);
  TickedCores(const TickedCores&) = delete;
  TickedCores& operator=(const TickedCores&) = delete;
  TickedCores(TickedCores&&) = default;

  static Duration linux_slice(int cores);

  // Runs `work` ns of an idle core's time for thread `thread` (a number the
  // caller keeps per thread: the core it last ran on is remembered); `done`
  // runs when it has had that much. The id cancels it.
  JobId start(std::size_t thread, Duration work, Callback done);
  // Drops a job not yet done; its `done` never runs.
  void cancel(JobId id);

  // Core time given to jobs, integrated (ns of one core, whatever its speed).
  double busy_ns() const;
  // Jobs waiting in a queue now (for tests).
  std::size_t queued() const;
  // Cores that run nothing now.
  int idle_cores() const;

 private:
  struct Job {
    JobId id = kNoJob;
    std::size_t thread = 0;
    double remaining = 0;  // ns of an idle core's time
    Callback done;
  };
  struct Core {
    std::optional<Job> current;
    Time since = 0;       // when `current` last started running here
    Time turn_start = 0;  // when its thread took the core (its slice counts from then)
    TimerId timer = kNoTimer;
    std::deque<Job> queue;
    // The thread of the job that ended last, and when: a thread that goes on
    // to its next job at once keeps its turn.
    std::size_t last_thread = 0;
    Time last_end = -1;
    TimerId slice_timer = kNoTimer;
    Time slice_at = -1;
  };
  int& last_core(std::size_t thread);
  // `home` if it runs nothing, else the first core that runs nothing.
  std::optional<std::size_t> idle_core(std::size_t home) const;
  void run_on(std::size_t core, Job job);
  // Takes the running job off `core`, its progress counted.
  Job take_current(std::size_t core);
  // Counts the running job's progress up to now, at the current speed.
  void count_progress(Core& c);
  // (Re)posts the running job's completion at the current speed.
  void post_completion(std::size_t core);
  // The busy cores' speed after their number changed; re-times their jobs.
  void set_speed();
  // A job ended: its `done` runs first, so a thread that starts its next job
  // from there keeps its core; then the idle cores serve their own queues.
  void complete(std::size_t core);
  // Gives every idle core the next job of its own queue.
  void settle();
  void arm_tick();
  void on_tick();
  // Switches `core` to its queue's head, the running job to the queue's back.
  void rotate(std::size_t core);
  // A job queued behind a running one that is within its slice: at the
  // slice's end the core goes to the queue (the kernel notices the expired
  // slice at the next event on that core, and those come every few
  // microseconds on a busy host), not at the next tick.
  void arm_slice_end(std::size_t core);
  void on_slice_end(std::size_t core);

  Executor& ex_;
  double usable_;
  double speed_ = 1.0;  // of each busy core now
  int busy_cores_ = 0;
  Duration tick_;
  std::vector<Core> cores_;
  Duration slice_ = 0;
  std::unordered_map<std::size_t, int> last_core_;  // by thread; absent: never ran
  TimerId tick_timer_ = kNoTimer;
  JobId next_id_ = 1;
  double busy_ns_ = 0;
};

}  // namespace twinps::sim
