#pragma once
// The coordinator (TensorFlow's ClusterCoordinator): schedules closures on
// workers, retries them when workers fail, raises the first application error
// once, builds per-worker resources and rebuilds them when a worker recovers.
// Observable semantics follow docs/semantics.md, statements C, E, R, W and P
// (cited by id below); the differences are listed there and in the README.
//
// Every blocking call is a coroutine on the coordinator's executor: the same
// code runs on simulated time and on real gRPC.
#include <cstdint>
#include <functional>
#include <optional>
#include <map>
#include <set>
#include <memory>
#include <string>
#include <vector>

#include "core/coordinator/closure.h"
#include "core/coordinator/closure_queue.h"
#include "core/coordinator/failure_classifier.h"
#include "core/coordinator/ps_failure_policy.h"
#include "core/coordinator/remote_value.h"
#include "core/coordinator/training_mode.h"
#include "core/runtime/runtime.h"
#include "core/runtime/task.h"
#include "core/variables/directory.h"
#include "core/worker/function_registry.h"
#include "core/worker/parameter_client.h"

namespace twinps {

struct ClusterShape {
  int workers = 1;
  int ps = 1;
};

// What the coordinator observed about its cluster, when it observed it: for
// tools that record a run's faults as a scenario (`--record-faults`,
// sim/fault_recorder.h). Observing never changes what the coordinator does.
struct CoordinatorEvent {
  enum class Kind {
    kStarted,          // start() formed the cluster: dispatch begins
    kWorkerFailed,     // a worker was given up (its closure runs elsewhere)
    kWorkerRecovered,  // a failed worker answered again and was set up anew
    kPsFailed,         // a closure failed naming a ps, or a ps missed its health checks
    kClosureFinished,  // a closure's run on a worker ended with a value
  };
  Kind kind = Kind::kStarted;
  Time at = 0;
  TaskId task;
  // kWorkerFailed, kPsFailed: the error; when heartbeats_missed, the last
  // health check's (a hung task's checks time out; a dead one's are refused).
  Status cause;
  // kWorkerFailed, kPsFailed: found by health checks it did not answer (hung
  // or unreachable), not by a call that failed.
  bool heartbeats_missed = false;
  // kWorkerFailed: when the worker last answered before it was given up.
  Time last_heard = 0;
  // kWorkerFailed: the worker's incarnation; kWorkerRecovered: the one it
  // answered with (another: it was restarted) and the one it had before.
  Incarnation incarnation = 0;
  Incarnation previous_incarnation = 0;
  // kClosureFinished: its id and when it was dispatched (at - dispatched_at:
  // its run on the worker, calls to the ps included).
  std::uint64_t closure = 0;
  Time dispatched_at = 0;
};

struct CoordinatorOptions {
  // C5: capacity of the global closure queue; schedule() waits while it is full. 0 = unbounded.
  std::size_t queue_capacity = 256 * 1024;
  // C17: reports of one ps's failure that are retried before the error is raised (K; <= 0: none).
  int transient_ps_failures = 3;
  // C18: deadline errors retried before one is raised (T); -1 means TensorFlow's num_workers / 10.
  int transient_timeouts = -1;
  // Deadline of the coordinator's control calls (health, setup, resources, variable creation, fences).
  Duration rpc_timeout = 30 * kSecond;
  // While a closure runs, a worker silent for an interval is sent a health
  // check; `heartbeat_misses` consecutive failures count as a worker failure.
  // This catches a worker that hangs or is partitioned away, which a dead TCP
  // connection alone would not reveal. Any answer from the worker counts as
  // hearing from it, so busy workers are rarely pinged. Every parameter
  // server is sent a health check each interval from start() to stop(), and
  // `heartbeat_misses` unanswered in a row raise UNAVAILABLE naming it (a
  // hung ps is noticed within about interval * misses + timeout).
  Duration heartbeat_interval = 1 * kSecond;
  Duration heartbeat_timeout = 2 * kSecond;
  int heartbeat_misses = 3;
  // A closure running longer than this (0 = no limit, as in TensorFlow)
  // ends with DEADLINE_EXCEEDED. If its worker no longer answers as the same
  // process, that is a worker failure (the closure runs elsewhere); if the
  // worker is alive, the closure itself is too slow and TensorFlow's rule for
  // DeadlineExceeded applies (C18, `transient_timeouts`): retried only while
  // fewer such errors have been seen, then raised — never retried forever.
  Duration closure_timeout = 0;
  // Recovery of a dead worker polls it with exponential backoff.
  Duration recovery_backoff_min = 50 * kMillisecond;
  Duration recovery_backoff_max = 2 * kSecond;
  // Cluster formation: every task must answer within this time, else start() fails naming it.
  Duration connect_timeout = 60 * kSecond;
  // While the cluster forms, called about every `waiting_report_interval` with
  // the tasks that have not answered yet and the time waited, so that a tool
  // can say what it waits for instead of staying silent until the timeout.
  std::function<void(const std::vector<TaskId>& missing, Duration waited)> on_waiting_for_tasks;
  Duration waiting_report_interval = 5 * kSecond;
  // C11: worker i waits start_delay * i (capped by start_delay_max when > 0) before its first closure.
  Duration schedule_start_delay = 0;
  Duration schedule_start_delay_max = 0;
  // Keep a log of every dispatch (tests and scenario expectations read it).
  bool record_dispatch_log = false;
  // How workers' closures may run relative to each other (training_mode.h):
  // async, SSP with `staleness_bound` (>= 0) closures of lead over the
  // slowest live worker, or sync with `backup_workers` (0 <= B < workers):
  // each step is applied once workers - B of its closures completed.
  TrainingMode mode = TrainingMode::kAsync;
  std::int64_t staleness_bound = 0;
  std::int64_t backup_workers = 0;
  // Called with each CoordinatorEvent as it happens; empty: none.
  std::function<void(const CoordinatorEvent&)> on_event;
  // What a ps failure does (ps_failure_policy.h, P10-P15): raise (TensorFlow's,
  // C17 and P1-P6), or restore/rollback in place without a restart.
  PsFailurePolicy ps_failure = PsFailurePolicy::kRaise;
  // restore/rollback: how long a failed ps is waited for to answer again on
  // its address, from the moment its failure was seen; then UNAVAILABLE is
  // raised naming the ps and this wait (P12).
  Duration ps_recovery_wait = 60 * kSecond;
};

// The state restore/rollback reload parameter servers from: every shard of
// every variable, and where it came from ("checkpoint ckpt-20", "the initial
// values"), for the trace and the summary.
struct RecoveryState {
  std::vector<ShardState> shards;
  std::string source;
};
using RecoverySource = std::function<StatusOr<RecoveryState>()>;

// One recovery of parameter servers in place (restore or rollback), for summaries.
struct PsRecoveryRecord {
  PsFailurePolicy policy = PsFailurePolicy::kRestore;
  std::vector<int> failed;    // the ps whose failure started it
  std::vector<int> reloaded;  // the ps reloaded: the failed ones that lost their state (every ps for
                              // rollback); none when every failed ps answered as the same process
  std::string source;         // RecoveryState::source
  Time detected = 0, finished = 0;
  Status status;              // not OK: the recovery failed and its error was raised
};

// The options' problems for a cluster of `workers` (a negative staleness
// bound, backup workers not fewer than the workers, an option for another
// mode), naming the option; OK when a coordinator can use them.
Status check_training_mode(const CoordinatorOptions& options, int workers);

// What the coordinator did, for summaries and tests.
struct CoordinatorStats {
  std::uint64_t scheduled = 0;
  std::uint64_t completed = 0;
  std::uint64_t failed = 0;  // application errors (including input errors)
  std::uint64_t retried = 0;  // put back after a worker, ps or timeout failure
  std::uint64_t cancelled = 0;  // queued or in flight when a generation was cancelled
  std::uint64_t dispatched = 0;
  std::uint64_t worker_failures = 0;
  std::uint64_t worker_recoveries = 0;
  std::uint64_t resources_built = 0;
  // SSP: times a worker had to wait for the slowest before its next closure,
  // and the time spent waiting, summed over workers.
  std::uint64_t ssp_waits = 0;
  Duration ssp_wait_time = 0;
  // Sync: steps applied on the parameter servers, and the time workers
  // spent waiting for their step to be applied, summed over workers.
  std::uint64_t sync_steps = 0;
  Duration sync_wait_time = 0;
  std::uint64_t ps_failures_retried = 0;
  // restore/rollback: recoveries done in place (P10), and the parameter
  // servers they reloaded, summed.
  std::uint64_t ps_recoveries = 0;
  std::uint64_t ps_reloaded = 0;
  std::uint64_t timeouts_retried = 0;
  std::uint64_t errors_raised = 0;
  std::vector<std::uint64_t> closures_per_worker;
  // Staleness of the gradients pushed by completed closures, as the ps
  // measured them (core/ps/staleness.h). A closure that failed after a push
  // was applied is not in it; the ps's own totals are (ParameterStoreStats).
  StalenessHistogram staleness;
};

struct DispatchRecord {
  enum class Kind { kClosure, kResource, kWorkerFailed, kWorkerRecovered };
  Time time = 0;
  int worker = 0;
  Kind kind = Kind::kClosure;
  std::uint64_t id = 0;  // closure id or resource id
};

struct PerWorkerDataset {
  PerWorkerValues datasets;
};

class ClusterCoordinator {
 public:
  ClusterCoordinator(Runtime& runtime, ClusterShape shape, const FunctionRegistry& registry,
                     CoordinatorOptions options = {});
  ~ClusterCoordinator();
  ClusterCoordinator(const ClusterCoordinator&) = delete;
  ClusterCoordinator& operator=(const ClusterCoordinator&) = delete;

  // Forms the cluster: every ps and worker must answer, then the variables are
  // created on the parameter servers from `initial` (fresh values or a
  // restored checkpoint), every worker is set up, and dispatch begins. The
  // whole formation has connect_timeout: a task that is down or preempted
  // meanwhile (spec W9) is retried with backoff until then, and only then is
  // UNAVAILABLE raised naming it.
  Task<Status> start(std::vector<VariableLayout> variables, OptimizerConfig optimizer,
                     std::vector<ShardState> initial);

  // Queues `fn(args)` and returns its RemoteValue at once (C3), waiting only
  // while the queue is full (C5). Raises a pending error instead (E3).
  Task<StatusOr<RemoteValue>> schedule(std::string fn, std::vector<Arg> args = {});
  // Waits until every scheduled closure is done; raises the first error once (E1–E4).
  Task<Status> join();
  // Raises a pending error, else whether everything scheduled is done (C10).
  Task<StatusOr<bool>> done();

  // One resource per worker, built by the registered resource function `fn`
  // before that worker's next closure, and rebuilt whenever it recovers (R7–R10).
  PerWorkerValues create_per_worker_resource(std::string fn, std::vector<Value> args,
                                             const PerWorkerValues* parent = nullptr);
  PerWorkerDataset create_per_worker_dataset(std::string fn, std::vector<Value> args = {});
  // iter(per_worker_dataset): a new iterator on every worker.
  PerWorkerValues create_per_worker_iterator(const PerWorkerDataset& dataset);

  // restore/rollback (P13): where the state a failed ps is reloaded from
  // comes from, asked at each recovery (the trainer gives the newest
  // checkpoint). Unset: the values start() was given.
  void set_recovery_source(RecoverySource source) { recovery_source_ = std::move(source); }
  const std::vector<PsRecoveryRecord>& ps_recoveries() const { return ps_recoveries_; }
  // restore/rollback (P15): after a call of the program's own to the
  // parameter servers (not a closure's) failed, asks every ps whether it is
  // the process its state was created on; recovers those that are not, or
  // do not answer, as a closure's failure would, and waits until the
  // recovery is over. True: a recovery ran and the call may be made again;
  // false: every ps is as it was, or the policy is raise (the error stands).
  // A recovery that failed is raised here.
  Task<StatusOr<bool>> recover_failed_parameter_servers();
  PsFailurePolicy ps_failure_policy() const { return options_.ps_failure; }
  // Sync mode's backup workers (0 in the other modes): their late gradients are dropped.
  std::int64_t backup_workers() const { return options_.mode == TrainingMode::kSync ? options_.backup_workers : 0; }

  // Stops dispatching; closures in flight are cancelled (W7).
  void stop();

  // Reads and writes from the coordinator (metrics, inline evaluation), with
  // the current fence.
  ParameterClient parameter_client();
  // Every shard of every variable, with optimizer slots (for checkpoints).
  Task<StatusOr<std::vector<ShardState>>> export_variables();

  const VariableDirectory& variables() const { return variables_; }
  const OptimizerConfig& optimizer() const { return optimizer_; }
  const CoordinatorStats& stats() const { return stats_; }
  const std::vector<DispatchRecord>& dispatch_log() const { return dispatch_log_; }
  const ClusterShape& shape() const { return shape_; }
  Time now() const { return runtime_.executor.now(); }
  // The coordinator's task and trace, for programs that record their own
  // spans on its track (epochs, checkpoints).
  const TaskId& self() const { return runtime_.self; }
  TraceSink& trace() { return runtime_.trace; }
  // The coordinator's executor (timers of programs that drive it: progress reports).
  Executor& executor() const { return runtime_.executor; }
  int live_workers() const;
  std::uint64_t generation() const { return generation_; }

 private:
  enum class WorkerState { kRunning, kDead };
  struct ResourceRecord {
    CreateResourceRequest request;
    RemoteValue output;
  };
  struct WorkerHandle {
    int index = 0;
    TaskId task;
    WorkerState state = WorkerState::kRunning;
    Incarnation incarnation = 0;
    Status last_error;
    std::vector<ResourceRecord> resources;  // in creation order: a rebuild replays them in order
    // Liveness: the closure running on it (if any), when it last answered, and
    // a wake-up for its monitor when a closure starts.
    std::shared_ptr<struct DispatchWatch> running;
    Time last_heard = 0;
    std::unique_ptr<Notifier> dispatch_started;
    // Set by its monitor when it gives the worker up (for CoordinatorEvent):
    // the last health check's error, and when the worker last answered.
    std::optional<Status> heartbeat_error;
    Time heard_before_misses = 0;
  };

  Task<Status> wait_for_cluster(Time deadline);
  Task<Status> create_variables(const std::vector<ShardState>& initial, Time deadline);
  // One CreateShards request per ps from `state` (every shard's value), or
  // INVALID_ARGUMENT naming a shard without one.
  StatusOr<std::vector<CreateShardsRequest>> create_requests(const std::vector<ShardState>& state) const;
  // Sends each ps in `targets` its request, retrying those that may come
  // back until `deadline`.
  Task<Status> send_create_requests(std::vector<CreateShardsRequest> per_ps, std::vector<int> targets, Time deadline);
  // restore/rollback (P10-P15): a failed ps seen by a closure, the ps
  // monitor or a worker's setup. Pauses dispatch and starts the recovery,
  // unless that ps is already being recovered.
  void request_ps_recovery(int ps);
  Task<void> recover_parameter_servers();
  // One recovery of the `failed` ps, recorded in ps_recoveries_ and the trace.
  Task<Status> recover_once(const std::vector<int>& failed, Time detected);
  // Its steps (P11-P13): end the closures in flight, wait for the failed ps,
  // reload the ones that lost their state (every ps for rollback). Fills in
  // what `record` says was reloaded and from where.
  Task<Status> reload_parameter_servers(const std::vector<int>& failed, Time detected, PsRecoveryRecord& record);
  // The state to reload from: the recovery source, else start()'s values (P13).
  StatusOr<RecoveryState> recovery_state() const;
  void record_ps_recovery(PsRecoveryRecord record, const Status& status, Time start);
  // Health checks `ps` until it answers (its incarnation) or `deadline` passes (P12).
  Task<StatusOr<Incarnation>> wait_for_parameter_server(int ps, Time deadline);
  Task<Status> setup_worker(WorkerHandle& w, Time deadline);
  // Health check then setup, retried with backoff until `deadline` (start()).
  Task<Status> connect_worker(WorkerHandle& w, Time deadline);
  Task<void> monitor_parameter_server(int index);
  Task<void> worker_loop(int index);
  // SSP: waits until `w` may start a closure (or it died, or stop()).
  Task<void> wait_for_slowest(WorkerHandle& w);
  // Sync: waits until `w` may take a closure of the current step (or it
  // died, or stop()); applies the step itself when it is ready.
  Task<void> wait_for_next_step(WorkerHandle& w);
  // Sync: while a step is being applied, no closure starts.
  Task<void> wait_while_applying();
  // Sync: applies the current step on every ps if it is ready (SyncSteps::ready).
  Task<void> apply_sync_step_if_ready();
  // Sync: a closure of `sync_step` on `w` ended without completing.
  void finish_sync_closure(WorkerHandle& w, std::int64_t sync_step);
  Task<void> process_closure(WorkerHandle& w, std::shared_ptr<Closure> closure);
  Task<void> process_resource(WorkerHandle& w, ResourceClosure rc);
  Task<void> monitor_worker(int index);
  Task<void> recover_worker(WorkerHandle& w);
  void mark_worker_dead(WorkerHandle& w, const Status& cause);
  Task<Status> raise_pending_error();
  // Fences every ps at `generation`; waits for each answer except failed_ps's (-1: none).
  Task<void> fence_parameter_servers(std::uint64_t generation, int failed_ps = -1);
  Task<StatusOr<Response>> control_call(const TaskId& to, Request request, Duration timeout);
  void log_dispatch(int worker, DispatchRecord::Kind kind, std::uint64_t id);
  // An event of `kind` about `task`, now; observe() hands it to on_event.
  CoordinatorEvent event(CoordinatorEvent::Kind kind, const TaskId& task) const;
  void observe(const CoordinatorEvent& e);
  int transient_timeout_threshold() const;

  Runtime& runtime_;
  ClusterShape shape_;
  const FunctionRegistry& registry_;
  CoordinatorOptions options_;
  ClosureQueue queue_;
  std::vector<WorkerHandle> workers_;
  VariableDirectory variables_;
  OptimizerConfig optimizer_;
  std::map<const void*, ResourceId> resource_ids_;  // RemoteValue identity -> resource id
  std::map<int, int> ps_failure_counts_;            // C17: never reset
  int timeout_count_ = 0;                           // C18
  std::uint64_t generation_ = 0;
  CancellationSource generation_cancel_;
  CancellationSource ps_lost_;          // a ps was found hung or unreachable: the coordinator's own calls end
  CancellationSource ps_monitor_stop_;  // stop(): the ps monitors' sleeps and health checks end
  ClosureId next_closure_id_ = 1;
  std::uint64_t push_counter_ = 0;  // numbers the coordinator's own pushes
  ResourceId next_resource_id_ = 1;
  bool started_ = false;
  bool stopping_ = false;
  bool joining_ = false;  // C6: schedule() waits while a join is in progress
  bool raising_ = false;
  Notifier state_changed_;
  // restore/rollback: the ps waiting for a recovery and the ones being
  // recovered, when the first failure was seen, generations ended by a
  // recovery (their closures run again rather than being cancelled), when
  // each ps was last recovered (older health-check failures are ignored).
  std::set<int> ps_to_recover_;
  std::set<int> ps_being_recovered_;
  bool recovering_ = false;
  Time recovery_detected_ = 0;
  std::set<std::uint64_t> generations_ended_by_recovery_;
  std::vector<Time> ps_recovered_at_;
  std::vector<Incarnation> ps_incarnations_;  // each ps's process when its state was last created
  RecoverySource recovery_source_;
  std::vector<ShardState> initial_state_;  // kept for recovery only when no source is set
  std::vector<PsRecoveryRecord> ps_recoveries_;
  // SSP (options_.mode == kSsp): the workers' clocks, and a wake-up for
  // workers waiting on them whenever one ticks, leaves or rejoins.
  std::optional<SspClock> ssp_;
  Notifier ssp_changed_;
  // Sync (options_.mode == kSync): the steps, whether one is being applied,
  // and a wake-up for workers waiting on them whenever they change.
  std::optional<SyncSteps> sync_;
  bool sync_applying_ = false;
  Notifier sync_changed_;
  CoordinatorStats stats_;
  std::vector<DispatchRecord> dispatch_log_;
  TaskScope scope_;  // last member: destroyed first, before the state its tasks use
};

}  // namespace twinps
