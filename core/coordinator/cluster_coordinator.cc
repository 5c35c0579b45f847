#include "core/coordinator/cluster_coordinator.h"

#include <algorithm>
#include <cstdio>
#include <set>
#include <sstream>

namespace twinps {

// Shared between a dispatch and the monitor watching its worker.
struct DispatchWatch {
  CancellationSource cancel;  // cancels the RunClosure call
  bool finished = false;      // the call ended
  bool lost = false;          // the monitor gave up on the worker
};

ClusterCoordinator::ClusterCoordinator(Runtime& runtime, ClusterShape shape, const FunctionRegistry& registry,
                                       CoordinatorOptions options)
    : runtime_(runtime),
      shape_(shape),
      registry_(registry),
      options_(options),
      queue_(runtime.executor, options.queue_capacity, shape.workers),
      state_changed_(runtime.executor),
      ssp_changed_(runtime.executor),
      sync_changed_(runtime.executor),
      scope_(runtime.executor) {
  if (options_.mode == TrainingMode::kSsp) ssp_.emplace(shape.workers, options_.staleness_bound);
  if (options_.mode == TrainingMode::kSync && options_.backup_workers >= 0 && options_.backup_workers < shape.workers)
    sync_.emplace(shape.workers, static_cast<int>(options_.backup_workers));
  workers_.resize(static_cast<std::size_t>(shape.workers));
  for (int i = 0; i < shape.workers; ++i) {
    auto& w = workers_[static_cast<std::size_t>(i)];
    w.index = i;
    w.task = TaskId::worker(i);
    w.dispatch_started = std::make_unique<Notifier>(runtime.executor);
  }
  stats_.closures_per_worker.assign(static_cast<std::size_t>(shape.workers), 0);
  ps_incarnations_.assign(static_cast<std::size_t>(shape.ps), 0);
}

ClusterCoordinator::~ClusterCoordinator() { stop(); }

Status check_training_mode(const CoordinatorOptions& options, int workers) {
  if (options.backup_workers < 0)
    return absl::InvalidArgumentError("backup workers must be >= 0, not " + std::to_string(options.backup_workers));
  if (options.mode != TrainingMode::kSync && options.backup_workers != 0)
    return absl::InvalidArgumentError(std::string("backup workers are for mode sync, not ") +
                                      training_mode_name(options.mode));
  if (options.mode == TrainingMode::kSync && options.backup_workers >= workers)
    return absl::InvalidArgumentError("backup workers (" + std::to_string(options.backup_workers) +
                                      ") must be fewer than the workers (" + std::to_string(workers) + ")");
  if (options.staleness_bound < 0)
    return absl::InvalidArgumentError("staleness bound must be >= 0, not " + std::to_string(options.staleness_bound));
  if (options.mode != TrainingMode::kSsp && options.staleness_bound != 0)
    return absl::InvalidArgumentError(std::string("a staleness bound is for mode ssp, not ") +
                                      training_mode_name(options.mode));
  return absl::OkStatus();
}

int ClusterCoordinator::live_workers() const {
  return static_cast<int>(std::count_if(workers_.begin(), workers_.end(),
                                        [](const WorkerHandle& w) { return w.state == WorkerState::kRunning; }));
}

int ClusterCoordinator::transient_timeout_threshold() const {
  return options_.transient_timeouts >= 0 ? options_.transient_timeouts : shape_.workers / 10;
}

void ClusterCoordinator::log_dispatch(int worker, DispatchRecord::Kind kind, std::uint64_t id) {
  if (options_.record_dispatch_log) dispatch_log_.push_back({runtime_.executor.now(), worker, kind, id});
}

CoordinatorEvent ClusterCoordinator::event(CoordinatorEvent::Kind kind, const TaskId& task) const {
  CoordinatorEvent e;
  e.kind = kind;
  e.at = runtime_.executor.now();
  e.task = task;
  return e;
}

void ClusterCoordinator::observe(const CoordinatorEvent& e) {
  if (options_.on_event) options_.on_event(e);
}

Task<StatusOr<Response>> ClusterCoordinator::control_call(const TaskId& to, Request request, Duration timeout) {
  CallOptions opts;
  opts.deadline = add_saturating(runtime_.executor.now(), timeout);
  co_return co_await call_async(runtime_.executor, runtime_.transport, to, std::move(request), std::move(opts));
}

// ---------------------------------------------------------------- start

Task<Status> ClusterCoordinator::start(std::vector<VariableLayout> variables, OptimizerConfig optimizer,
                                       std::vector<ShardState> initial) {
  if (started_) co_return absl::FailedPreconditionError("the coordinator has already started");
  TWINPS_CO_RETURN_IF_ERROR(check_training_mode(options_, shape_.workers));
  if (options_.ps_failure != PsFailurePolicy::kRaise && options_.ps_recovery_wait <= 0)
    co_return absl::InvalidArgumentError(std::string("ps_failure ") + ps_failure_policy_name(options_.ps_failure) +
                                         " needs a positive ps recovery wait");
  variables_ = VariableDirectory(std::move(variables));
  optimizer_ = optimizer;
  const Time started_at = runtime_.executor.now();
  // Forming the cluster as a whole gets connect_timeout: a task preempted
  // while it forms (spec W9: TensorFlow retries the initial connection) is
  // waited for, at every stage, until then.
  const Time deadline = add_saturating(started_at, options_.connect_timeout);
  TWINPS_CO_RETURN_IF_ERROR(co_await wait_for_cluster(deadline));
  TWINPS_CO_RETURN_IF_ERROR(co_await create_variables(initial, deadline));
  if (options_.ps_failure != PsFailurePolicy::kRaise) {
    ps_recovered_at_.assign(static_cast<std::size_t>(shape_.ps), 0);
    if (!recovery_source_) initial_state_ = initial;  // P13: reloaded from these without a source
  }
  // Every worker is set up at once, each retrying on its own.
  std::vector<Future<Status>> setups;
  for (auto& w : workers_) {
    Promise<Status> done(runtime_.executor);
    setups.push_back(done.future());
    scope_.spawn([](ClusterCoordinator* self, WorkerHandle* w, Time deadline, Promise<Status> done) -> Task<void> {
      (void)done.set(co_await self->connect_worker(*w, deadline));
    }(this, &w, deadline, done));
  }
  Status failed = absl::OkStatus();
  for (auto& f : setups) {
    Status s = co_await f;
    if (failed.ok() && !s.ok()) failed = std::move(s);
  }
  if (!failed.ok()) co_return failed;
  started_ = true;
  runtime_.trace.span(runtime_.self, "coordinator", "form cluster", started_at, runtime_.executor.now() - started_at);
  for (int i = 0; i < shape_.workers; ++i) {
    scope_.spawn(worker_loop(i));
    scope_.spawn(monitor_worker(i));
  }
  for (int p = 0; p < shape_.ps; ++p) scope_.spawn(monitor_parameter_server(p));
  observe(event(CoordinatorEvent::Kind::kStarted, runtime_.self));
  co_return absl::OkStatus();
}

Task<Status> ClusterCoordinator::wait_for_cluster(Time deadline) {
  std::vector<TaskId> pending;
  for (int i = 0; i < shape_.ps; ++i) pending.push_back(TaskId::ps(i));
  for (int i = 0; i < shape_.workers; ++i) pending.push_back(TaskId::worker(i));
  std::map<TaskId, Status> last_error;
  const Time started = runtime_.executor.now();
  Time reported = started;
  Duration backoff = options_.recovery_backoff_min;
  for (;;) {
    // Ask every missing task at once, then collect the answers.
    const Duration timeout = std::min(options_.rpc_timeout, std::max<Duration>(deadline - runtime_.executor.now(), 1));
    std::vector<Future<StatusOr<Response>>> answers;
    for (const auto& t : pending) {
      CallOptions opts;
      opts.deadline = add_saturating(runtime_.executor.now(), timeout);
      answers.push_back(call_async(runtime_.executor, runtime_.transport, t, HealthRequest{}, opts));
    }
    std::vector<TaskId> still;
    for (std::size_t i = 0; i < pending.size(); ++i) {
      auto r = response_as<HealthResponse>(co_await answers[i]);
      if (r.ok()) {
        if (pending[i].job == Job::kWorker) workers_[static_cast<std::size_t>(pending[i].index)].incarnation = r->incarnation;
        if (pending[i].job == Job::kPs) ps_incarnations_[static_cast<std::size_t>(pending[i].index)] = r->incarnation;
      } else {
        last_error[pending[i]] = r.status();
        still.push_back(pending[i]);
      }
    }
    pending = std::move(still);
    if (pending.empty()) co_return absl::OkStatus();
    if (options_.on_waiting_for_tasks && runtime_.executor.now() - reported >= options_.waiting_report_interval) {
      reported = runtime_.executor.now();
      options_.on_waiting_for_tasks(pending, reported - started);
    }
    if (runtime_.executor.now() >= deadline) break;
    co_await sleep_for(runtime_.executor, std::min(backoff, deadline - runtime_.executor.now()));
    backoff = std::min(backoff * 2, options_.recovery_backoff_max);
  }
  // Each task once, with what its last health check met (the transport's
  // message names the address tried); the status itself names the first.
  std::ostringstream msg;
  msg << "the cluster did not form within " << to_seconds(options_.connect_timeout) << " s; no answer from ";
  for (std::size_t i = 0; i < pending.size(); ++i)
    msg << (i == 0 ? "" : ", ") << pending[i].short_name() << " (" << last_error[pending[i]].message() << ")";
  const std::string message = msg.str();
  co_return with_failed_task(absl::UnavailableError(message), pending.front());
}

namespace {
// A failure to reach a task that may come back (preempted, restarting,
// briefly unreachable), as opposed to one that no retry can fix.
bool may_pass(const Status& s) {
  return s.code() == StatusCode::kUnavailable || s.code() == StatusCode::kDeadlineExceeded ||
         s.code() == StatusCode::kAborted;
}
}  // namespace

StatusOr<std::vector<CreateShardsRequest>> ClusterCoordinator::create_requests(
    const std::vector<ShardState>& state) const {
  std::map<ShardId, const ShardState*> by_id;
  for (const auto& s : state) by_id[s.spec.id] = &s;
  std::vector<CreateShardsRequest> per_ps(static_cast<std::size_t>(shape_.ps));
  for (auto& req : per_ps) {
    req.fence = Fence{runtime_.incarnation, generation_};
    req.optimizer = optimizer_;
    req.replace_existing = true;  // a (re)starting coordinator defines the state (P6); retrying is harmless
  }
  for (const auto& v : variables_.all()) {
    for (const auto& shard : v.shards) {
      auto it = by_id.find(shard.id);
      if (it == by_id.end())
        return absl::InvalidArgumentError("no initial value for shard " + std::to_string(shard.id) + " of \"" +
                                          v.name + "\"");
      if (shard.ps < 0 || shard.ps >= shape_.ps)
        return absl::InvalidArgumentError("\"" + v.name + "\" is placed on ps:" + std::to_string(shard.ps) +
                                          " but the cluster has " + std::to_string(shape_.ps) + " ps");
      ShardState& s = per_ps[static_cast<std::size_t>(shard.ps)].shards.emplace_back(*it->second);
      // The layout says how a variable is updated, whatever the state came from.
      s.spec.optimizer = v.optimizer;
    }
  }
  return per_ps;
}

Task<Status> ClusterCoordinator::create_variables(const std::vector<ShardState>& initial, Time deadline) {
  auto per_ps = create_requests(initial);
  if (!per_ps.ok()) co_return per_ps.status();
  std::vector<int> all;
  for (int p = 0; p < shape_.ps; ++p) all.push_back(p);
  co_return co_await send_create_requests(std::move(*per_ps), std::move(all), deadline);
}

Task<Status> ClusterCoordinator::send_create_requests(std::vector<CreateShardsRequest> per_ps,
                                                      std::vector<int> pending, Time deadline) {
  // Each ps is asked until it answers or the deadline passes: one preempted
  // while the cluster forms is waited for (spec W9).
  Duration backoff = options_.recovery_backoff_min;
  for (;;) {
    std::vector<Future<StatusOr<Response>>> answers;
    for (int p : pending) {
      CallOptions opts;
      opts.deadline = std::min(deadline, add_saturating(runtime_.executor.now(), options_.rpc_timeout));
      answers.push_back(call_async(runtime_.executor, runtime_.transport, TaskId::ps(p),
                                   per_ps[static_cast<std::size_t>(p)], opts));
    }
    std::vector<int> still;
    for (std::size_t i = 0; i < pending.size(); ++i) {
      auto r = co_await answers[i];
      if (r.ok()) continue;
      Status error(r.status().code(),
                   "creating variables on ps:" + std::to_string(pending[i]) + ": " + describe(r.status()));
      if (!may_pass(r.status()) || runtime_.executor.now() >= deadline) co_return error;
      still.push_back(pending[i]);
    }
    pending = std::move(still);
    if (pending.empty()) co_return absl::OkStatus();
    co_await sleep_for(runtime_.executor, std::max<Duration>(0, std::min(backoff, deadline - runtime_.executor.now())));
    backoff = std::min(backoff * 2, options_.recovery_backoff_max);
  }
}

Task<Status> ClusterCoordinator::connect_worker(WorkerHandle& w, Time deadline) {
  Duration backoff = options_.recovery_backoff_min;
  Status last;
  for (;;) {
    // The incarnation is read again before each setup: a worker preempted
    // since it first answered is a new process (spec W9).
    const Duration timeout = std::clamp<Duration>(deadline - runtime_.executor.now(), 1, options_.rpc_timeout);
    auto health = response_as<HealthResponse>(co_await control_call(w.task, HealthRequest{}, timeout));
    if (health.ok()) {
      w.incarnation = health->incarnation;
      last = co_await setup_worker(w, std::min(deadline, add_saturating(runtime_.executor.now(), options_.rpc_timeout)));
      if (last.ok()) co_return absl::OkStatus();
      // A worker that answers but cannot reach a parameter server: that ps
      // is the problem, and it is named.
      if (auto t = failed_task(last); t && t->job == Job::kPs)
        co_return Status(last.code(), "setting up " + w.task.short_name() + ": " + describe(last));
    } else {
      last = health.status();
    }
    if (!may_pass(last) || runtime_.executor.now() >= deadline)
      co_return with_failed_task(Status(last.code(), "setting up " + w.task.short_name() + " (retried for " +
                                                         std::to_string(to_seconds(options_.connect_timeout)) +
                                                         " s, the connect timeout): " + describe(last)),
                                 w.task);
    co_await sleep_for(runtime_.executor, std::max<Duration>(0, std::min(backoff, deadline - runtime_.executor.now())));
    backoff = std::min(backoff * 2, options_.recovery_backoff_max);
  }
}

Task<Status> ClusterCoordinator::setup_worker(WorkerHandle& w, Time deadline) {
  SetupWorkerRequest req{Fence{runtime_.incarnation, generation_}, variables_.all()};
  CallOptions opts;
  opts.deadline = deadline;
  auto r = co_await call_async(runtime_.executor, runtime_.transport, w.task, std::move(req), std::move(opts));
  co_return r.status();
}

// ---------------------------------------------------------------- user API

Task<StatusOr<RemoteValue>> ClusterCoordinator::schedule(std::string fn, std::vector<Arg> args) {
  if (!started_) co_return absl::FailedPreconditionError("schedule() before the coordinator started");
  if (stopping_) co_return absl::FailedPreconditionError("schedule() after the coordinator stopped");
  if (!registry_.step(fn)) co_return absl::InvalidArgumentError("no step function registered as \"" + fn + "\"");
  for (std::size_t i = 0; i < args.size(); ++i) {
    if (auto* pw = std::get_if<PerWorkerValues>(&args[i]); pw && pw->values.size() != workers_.size())
      co_return absl::InvalidArgumentError("argument " + std::to_string(i) + " has " +
                                           std::to_string(pw->values.size()) + " per-worker values for " +
                                           std::to_string(workers_.size()) + " workers");
  }
  while (joining_) co_await state_changed_.wait();
  co_await queue_.wait_for_space();
  auto closure = std::make_shared<Closure>();
  closure->id = next_closure_id_++;
  closure->fn = std::move(fn);
  closure->args = std::move(args);
  closure->output = RemoteValue::create(runtime_.executor);
  closure->generation = generation_;
  RemoteValue output = closure->output;
  queue_.put(std::move(closure));
  ++stats_.scheduled;
  // E3: the new closure is queued first, so a pending error cancels it with the rest.
  if (queue_.has_error()) co_return co_await raise_pending_error();
  co_return output;
}

Task<Status> ClusterCoordinator::join() {
  const Time start = runtime_.executor.now();
  joining_ = true;
  co_await queue_.wait_until_idle_or_error();
  // P11: a recovery in progress is part of the work: join returns after it
  // (its closures are put back, so the queue is not idle until they ran).
  while (recovering_ && !queue_.has_error()) {
    co_await state_changed_.wait();
    co_await queue_.wait_until_idle_or_error();
  }
  joining_ = false;
  state_changed_.notify_all();
  Status result = absl::OkStatus();
  if (queue_.has_error()) result = co_await raise_pending_error();
  runtime_.trace.span(runtime_.self, "coordinator", "join", start, runtime_.executor.now() - start,
                      {TraceArg{"completed", static_cast<double>(stats_.completed)},
                       TraceArg{"code", static_cast<double>(result.code())}});
  co_return result;
}

Task<StatusOr<bool>> ClusterCoordinator::done() {
  if (queue_.has_error()) co_return co_await raise_pending_error();
  co_return queue_.idle() && !recovering_;
}

Task<Status> ClusterCoordinator::raise_pending_error() {
  while (raising_) co_await state_changed_.wait();
  if (!queue_.has_error()) co_return absl::OkStatus();  // another caller raised it
  raising_ = true;
  const Time start = runtime_.executor.now();
  // E2: (1) cancel what runs in this generation, fencing the parameter servers
  // so a cancelled closure can no longer change them; (2) wait until nothing is
  // in flight; (3) cancel what is queued; (4) open a new generation; (5) raise once.
  generation_cancel_.cancel();
  const Status* pending = queue_.pending_error();
  const std::optional<TaskId> culprit = pending ? failed_task(*pending) : std::nullopt;
  co_await fence_parameter_servers(generation_ + 1, culprit && culprit->job == Job::kPs ? culprit->index : -1);
  co_await queue_.wait_until_nothing_in_flight();
  stats_.cancelled += queue_.cancel_queued();
  ++generation_;
  generation_cancel_ = CancellationSource();
  raising_ = false;
  ++stats_.errors_raised;
  state_changed_.notify_all();
  Status error = queue_.take_error();
  runtime_.trace.span(runtime_.self, "coordinator", "cancel generation", start, runtime_.executor.now() - start,
                      {TraceArg{"generation", static_cast<double>(generation_ - 1)}});
  runtime_.trace.instant(runtime_.self, "coordinator", "error_raised", runtime_.executor.now(),
                         {TraceArg{"code", static_cast<double>(error.code())}});
  co_return error;
}

Task<void> ClusterCoordinator::fence_parameter_servers(std::uint64_t generation, int failed_ps) {
  std::vector<Future<StatusOr<Response>>> answers;
  for (int p = 0; p < shape_.ps; ++p) {
    CallOptions opts;
    opts.deadline = add_saturating(runtime_.executor.now(), options_.rpc_timeout);
    answers.push_back(call_async(runtime_.executor, runtime_.transport, TaskId::ps(p),
                                 FenceRequest{Fence{runtime_.incarnation, generation}}, opts));
  }
  // A ps that cannot be reached holds nothing a cancelled closure could still
  // change through it; its failure surfaces through the closures that need it.
  // The ps whose failure is being raised is sent the fence but not waited
  // for: it is down or hung, and waiting would only delay the error (a hung
  // ps would hold it for the whole rpc_timeout).
  for (int p = 0; p < shape_.ps; ++p)
    if (p != failed_ps) (void)co_await answers[static_cast<std::size_t>(p)];
}

PerWorkerValues ClusterCoordinator::create_per_worker_resource(std::string fn, std::vector<Value> args,
                                                               const PerWorkerValues* parent) {
  PerWorkerValues out;
  for (auto& w : workers_) {
    CreateResourceRequest req;
    req.id = next_resource_id_++;
    req.fn = fn;
    req.args = args;
    auto output = RemoteValue::create(runtime_.executor);
    if (!registry_.resource(fn)) {
      output.set_error(absl::InvalidArgumentError("no resource function registered as \"" + fn + "\""));
      out.values.push_back(output);
      continue;
    }
    if (parent) {
      auto it = resource_ids_.find(parent->values[static_cast<std::size_t>(w.index)].identity());
      req.parent = it == resource_ids_.end() ? 0 : it->second;
    }
    resource_ids_[output.identity()] = req.id;
    w.resources.push_back({req, output});
    if (w.state == WorkerState::kDead) {
      output.set_aborted(w.last_error);  // R7: built when the worker recovers
    } else {
      queue_.put_tagged(w.index, ResourceClosure{w.index, req, output});
    }
    out.values.push_back(output);
  }
  return out;
}

PerWorkerDataset ClusterCoordinator::create_per_worker_dataset(std::string fn, std::vector<Value> args) {
  return PerWorkerDataset{create_per_worker_resource(std::move(fn), std::move(args))};
}

PerWorkerValues ClusterCoordinator::create_per_worker_iterator(const PerWorkerDataset& dataset) {
  return create_per_worker_resource("iterator", {}, &dataset.datasets);
}

void ClusterCoordinator::stop() {
  if (stopping_) return;
  stopping_ = true;
  stats_.cancelled += queue_.cancel_queued();
  queue_.stop();
  generation_cancel_.cancel();
  state_changed_.notify_all();
  ssp_changed_.notify_all();
  sync_changed_.notify_all();
  for (auto& w : workers_) w.dispatch_started->notify_all();  // monitors see stopping_ and end
  ps_monitor_stop_.cancel();
}

ParameterClient ClusterCoordinator::parameter_client() {
  // Cancelled when a parameter server is found hung or unreachable, so the
  // coordinator's own reads and writes do not wait out rpc_timeout on it.
  return ParameterClient(runtime_, Fence{runtime_.incarnation, generation_}, ps_lost_.token(), options_.rpc_timeout,
                         push_counter_);
}

Task<StatusOr<std::vector<ShardState>>> ClusterCoordinator::export_variables() {
  std::vector<Future<StatusOr<Response>>> answers;
  for (int p = 0; p < shape_.ps; ++p) {
    CallOptions opts;
    opts.deadline = add_saturating(runtime_.executor.now(), options_.rpc_timeout);
    answers.push_back(call_async(runtime_.executor, runtime_.transport, TaskId::ps(p), ExportShardsRequest{}, opts));
  }
  std::vector<ShardState> all;
  for (int p = 0; p < shape_.ps; ++p) {
    auto r = response_as<ExportShardsResponse>(co_await answers[static_cast<std::size_t>(p)]);
    if (!r.ok())
      co_return Status(r.status().code(), "exporting variables from ps:" + std::to_string(p) + ": " +
                                              describe(r.status()));
    for (auto& s : r->shards) all.push_back(std::move(s));
  }
  co_return all;
}

// ---------------------------------------------------------------- workers

Task<void> ClusterCoordinator::worker_loop(int index) {
  WorkerHandle& w = workers_[static_cast<std::size_t>(index)];
  if (options_.schedule_start_delay > 0) {
    Duration delay = options_.schedule_start_delay * index;
    if (options_.schedule_start_delay_max > 0) delay = std::min(delay, options_.schedule_start_delay_max);
    co_await sleep_for(runtime_.executor, delay);
  }
  while (!stopping_) {
    if (w.state == WorkerState::kDead) {
      co_await recover_worker(w);
      continue;
    }
    if (ssp_ && !ssp_->may_start(index)) {
      co_await wait_for_slowest(w);
      continue;
    }
    if (sync_ && (sync_applying_ || !sync_->may_start(index))) {
      co_await wait_for_next_step(w);
      continue;
    }
    ClosureQueue::Work work = co_await queue_.next_work(index);
    if (work.stop) break;
    if (work.resource) {
      co_await process_resource(w, std::move(*work.resource));
    } else {
      // A step may have begun being applied while this worker waited for
      // work: its closure then belongs to the next step.
      if (sync_) co_await wait_while_applying();
      co_await process_closure(w, std::move(work.closure));
    }
  }
}

Task<void> ClusterCoordinator::wait_for_slowest(WorkerHandle& w) {
  // Only a worker ahead of the slowest live one waits, and the slowest never
  // does, so some live worker can always run (or every one is dead, and then
  // none is left to wait).
  const Time start = runtime_.executor.now();
  ++stats_.ssp_waits;
  while (!stopping_ && w.state != WorkerState::kDead && !ssp_->may_start(w.index)) co_await ssp_changed_.wait();
  stats_.ssp_wait_time += runtime_.executor.now() - start;
  runtime_.trace.span(w.task, "coordinator", "ssp wait", start, runtime_.executor.now() - start,
                      {TraceArg{"clock", static_cast<double>(ssp_->clock(w.index))},
                       TraceArg{"slowest", static_cast<double>(ssp_->slowest())}});
}

Task<void> ClusterCoordinator::wait_for_next_step(WorkerHandle& w) {
  // A worker that completed its closure of the step waits here; it applies
  // the step itself when the step becomes ready (a worker's death or a
  // closure that ended without completing can make it ready), so some waiting
  // worker always does it.
  const Time start = runtime_.executor.now();
  while (!stopping_ && w.state != WorkerState::kDead && (sync_applying_ || !sync_->may_start(w.index))) {
    if (!sync_applying_ && sync_->ready(queue_.queued() > 0)) {
      co_await apply_sync_step_if_ready();
      continue;
    }
    co_await sync_changed_.wait();
  }
  stats_.sync_wait_time += runtime_.executor.now() - start;
}

Task<void> ClusterCoordinator::wait_while_applying() {
  while (!stopping_ && sync_applying_) co_await sync_changed_.wait();
}

Task<void> ClusterCoordinator::apply_sync_step_if_ready() {
  if (sync_applying_ || !sync_->ready(queue_.queued() > 0)) co_return;
  sync_applying_ = true;
  const Time start = runtime_.executor.now();
  const std::int64_t step = sync_->step();
  const std::int64_t gradients = sync_->completed();
  // Every ps applies the step's means, and only then does the next step
  // begin: its closures read the updated values.
  std::vector<Future<StatusOr<Response>>> answers;
  for (int p = 0; p < shape_.ps; ++p) {
    CallOptions opts;
    opts.deadline = add_saturating(runtime_.executor.now(), options_.rpc_timeout);
    opts.cancel = ps_lost_.token();
    answers.push_back(call_async(runtime_.executor, runtime_.transport, TaskId::ps(p),
                                 ApplySyncStepRequest{Fence{runtime_.incarnation, generation_}, step}, opts));
  }
  for (int p = 0; p < shape_.ps; ++p) {
    auto r = co_await answers[static_cast<std::size_t>(p)];
    // A fenced answer means an error is being raised (its generation was
    // cancelled); anything else is a ps failure, raised like any other (P1).
    if (!r.ok() && error_kind(r.status()) != ErrorKind::kFenced && !stopping_)
      queue_.report_error(with_failed_task(Status(r.status().code(), "applying sync step " + std::to_string(step) +
                                                                         " on ps:" + std::to_string(p) + ": " +
                                                                         describe(r.status())),
                                           TaskId::ps(p)));
  }
  sync_->advance();
  ++stats_.sync_steps;
  sync_applying_ = false;
  sync_changed_.notify_all();
  runtime_.trace.span(runtime_.self, "coordinator", "apply sync step", start, runtime_.executor.now() - start,
                      {TraceArg{"step", static_cast<double>(step)},
                       TraceArg{"closures", static_cast<double>(gradients)}});
}

Task<void> ClusterCoordinator::process_closure(WorkerHandle& w, std::shared_ptr<Closure> closure) {
  auto fail = [&](Status error) {
    closure->output.set_error(error);
    ++stats_.failed;
    queue_.mark_failed(std::move(error));
  };
  auto put_back = [&] {
    if (queue_.has_error()) ++stats_.cancelled; else ++stats_.retried;
    queue_.put_back(closure);
  };
  if (closure->generation != generation_ && generations_ended_by_recovery_.count(closure->generation)) {
    // Its generation was ended by a ps recovery, not an error (P11): it runs
    // now, in the generation the recovered parameter servers accept.
    closure->generation = generation_;
  }
  if (closure->generation != generation_) {
    // Taken just before its generation was cancelled: it must not run (E2).
    closure->output.set_error(absl::CancelledError(kCancelledClosureMessage));
    ++stats_.cancelled;
    queue_.mark_cancelled_in_flight();
    co_return;
  }

  // C13: per-worker inputs are resolved to this worker's element; one that
  // failed makes the closure fail with an input error without running it.
  std::vector<Value> args;
  args.reserve(closure->args.size());
  for (const auto& arg : closure->args) {
    if (const auto* v = std::get_if<Value>(&arg)) {
      args.push_back(*v);
      continue;
    }
    const RemoteValue& input = std::get<PerWorkerValues>(arg).values[static_cast<std::size_t>(w.index)];
    auto result = input.peek();
    if (!result || input.status() != RemoteValueStatus::kReady) {
      // Resources are rebuilt before a worker's next closure, so only a worker
      // that died after taking this closure can get here.
      mark_worker_dead(w, absl::AbortedError("input resource of " + w.task.short_name() + " is not ready"));
      put_back();
      co_return;
    }
    if (!result->ok()) {
      fail(with_error_kind(result->status(), ErrorKind::kClosureInput));
      co_return;
    }
    args.push_back(std::move(**result));
  }

  ++closure->attempts;
  ++stats_.dispatched;
  ++stats_.closures_per_worker[static_cast<std::size_t>(w.index)];
  log_dispatch(w.index, DispatchRecord::Kind::kClosure, closure->id);

  auto watch = std::make_shared<DispatchWatch>();
  auto on_generation_cancel = generation_cancel_.token().on_cancel([watch] { watch->cancel.cancel(); });
  // Sync: the closure joins the current step; its pushes carry the step.
  const std::int64_t sync_step = sync_ ? sync_->start(w.index) : kNoSyncStep;
  RunClosureRequest req{closure->id, closure->fn, std::move(args), Fence{runtime_.incarnation, closure->generation},
                        w.incarnation, sync_step};
  CallOptions opts;
  opts.cancel = watch->cancel.token();
  const Time closure_deadline =
      options_.closure_timeout > 0 ? add_saturating(runtime_.executor.now(), options_.closure_timeout) : kTimeNever;
  opts.deadline = closure_deadline;
  auto reply_future = call_async(runtime_.executor, runtime_.transport, w.task, std::move(req), std::move(opts));
  w.running = watch;
  const Time dispatched_at = runtime_.executor.now();
  w.dispatch_started->notify_all();
  StatusOr<Response> reply = co_await reply_future;
  watch->finished = true;
  if (w.running == watch) w.running.reset();
  if (reply.ok() || failed_task(reply.status()) != w.task) w.last_heard = runtime_.executor.now();

  if (reply.ok()) {
    w.heartbeat_error.reset();  // it answered after all
    if (auto* r = std::get_if<RunClosureResponse>(&*reply)) {
      closure->output.set_value(std::move(r->result));
      stats_.staleness.merge(r->staleness);
      ++stats_.completed;
      if (options_.on_event) {
        CoordinatorEvent e = event(CoordinatorEvent::Kind::kClosureFinished, w.task);
        e.closure = closure->id;
        e.dispatched_at = dispatched_at;
        observe(e);
      }
      if (ssp_) {
        ssp_->tick(w.index);
        ssp_changed_.notify_all();
      }
      if (sync_) {
        // Applied before the closure counts as finished, so that join()
        // returns only after the last step's gradients are in the values.
        sync_->finish(w.index, sync_step, true);
        sync_changed_.notify_all();
        co_await apply_sync_step_if_ready();
        // Another worker may be applying the step this closure belonged to.
        co_await wait_while_applying();
      }
      queue_.mark_finished();
    } else {
      fail(absl::InternalError(w.task.short_name() + " answered RunClosure with another message"));
      finish_sync_closure(w, sync_step);
    }
    co_return;
  }

  Status error = reply.status();
  bool generation_cancelled = closure->generation != generation_ || generation_cancel_.cancelled();
  // The call passed the closure timeout. Either the worker is gone (then it
  // is a worker failure, retried elsewhere as always) or the closure itself
  // runs too long — asked once: the worker answers a health check as the
  // same process. A slow closure is a DeadlineExceeded of that closure, and
  // TensorFlow's rule for DeadlineExceeded applies (C18): it is retried only
  // while fewer than `transient_timeouts` (workers / 10 by default) deadline
  // errors have been seen, then raised. Retrying it as a worker failure
  // would never end: every attempt takes as long, and worker failures are
  // retried without limit (C15) — the livelock issue 9 found.
  bool slow_closure = false;
  if (closure_deadline != kTimeNever && error.code() == StatusCode::kDeadlineExceeded &&
      failed_task(error) == w.task && !watch->lost && !generation_cancelled &&
      runtime_.executor.now() >= closure_deadline) {
    auto health =
        response_as<HealthResponse>(co_await control_call(w.task, HealthRequest{}, options_.heartbeat_timeout));
    generation_cancelled = closure->generation != generation_ || generation_cancel_.cancelled();
    if (health.ok() && health->incarnation == w.incarnation && !generation_cancelled) {
      w.last_heard = runtime_.executor.now();
      slow_closure = true;
      char limit[32];
      std::snprintf(limit, sizeof limit, "%.6g s", to_seconds(options_.closure_timeout));
      error = absl::DeadlineExceededError("closure " + std::to_string(closure->id) + " (" + closure->fn +
                                          ") ran longer than the closure timeout (" + limit + ") on " +
                                          w.task.short_name() + ", which is alive (attempt " +
                                          std::to_string(closure->attempts) + ")");
    }
  }
  const Classification c =
      slow_closure ? Classification{ClosureFailure::kTransientTimeout, w.task}
                   : classify_closure_failure(error, FailureFacts{w.task, watch->lost, generation_cancelled});
  runtime_.trace.instant(w.task, "coordinator", closure_failure_name(c.kind), runtime_.executor.now(),
                         {TraceArg{"closure", static_cast<double>(closure->id)}});
  if (c.kind != ClosureFailure::kWorkerFailure && generations_ended_by_recovery_.count(closure->generation)) {
    // Cut short by a ps recovery (cancelled, fenced, or it met the failed ps
    // or the restarted one before it was reloaded): it runs again (P11).
    put_back();
    finish_sync_closure(w, sync_step);  // sync: the worker takes a closure of this step again
    co_return;
  }
  switch (c.kind) {
    case ClosureFailure::kWorkerFailure:
      mark_worker_dead(w, error);
      put_back();
      break;
    case ClosureFailure::kParameterServerFailure: {
      if (options_.on_event) {
        CoordinatorEvent e = event(CoordinatorEvent::Kind::kPsFailed, *c.task);
        e.cause = error;
        observe(e);
      }
      if (options_.ps_failure != PsFailurePolicy::kRaise) {
        // P10: recovered in place; the closure runs again once it is.
        request_ps_recovery(c.task->index);
        put_back();
        break;
      }
      const int k = options_.transient_ps_failures;
      if (k > 0 && ++ps_failure_counts_[c.task->index] < k) {
        ++stats_.ps_failures_retried;
        put_back();
      } else {
        fail(error);
      }
      break;
    }
    case ClosureFailure::kTransientTimeout: {
      const int t = transient_timeout_threshold();
      if (t > 0 && ++timeout_count_ < t) {
        ++stats_.timeouts_retried;
        put_back();
      } else {
        fail(error);
      }
      break;
    }
    case ClosureFailure::kDerivedCancellation:
      put_back();
      break;
    case ClosureFailure::kCancelled:
      // E6: it keeps the error it actually got; that error is never raised.
      closure->output.set_error(error);
      ++stats_.cancelled;
      queue_.mark_cancelled_in_flight();
      break;
    case ClosureFailure::kApplicationError:
      fail(error);
      break;
  }
  finish_sync_closure(w, sync_step);
}

void ClusterCoordinator::finish_sync_closure(WorkerHandle& w, std::int64_t sync_step) {
  if (!sync_) return;
  // After the closure was put back (or failed): a step must not be applied
  // as if no work were left while this closure waits to run again.
  sync_->finish(w.index, sync_step, false);
  sync_changed_.notify_all();
}

Task<void> ClusterCoordinator::monitor_worker(int index) {
  WorkerHandle& w = workers_[static_cast<std::size_t>(index)];
  int misses = 0;
  while (!stopping_) {
    if (!w.running) {
      misses = 0;
      co_await w.dispatch_started->wait();  // sleeps only while closures run
      continue;
    }
    co_await sleep_for(runtime_.executor, options_.heartbeat_interval);
    auto watch = w.running;
    if (!watch || runtime_.executor.now() - w.last_heard < options_.heartbeat_interval) continue;
    auto r = response_as<HealthResponse>(co_await control_call(w.task, HealthRequest{}, options_.heartbeat_timeout));
    if (watch->finished) continue;
    const bool restarted = r.ok() && r->incarnation != w.incarnation;
    if (r.ok() && !restarted) {
      w.last_heard = runtime_.executor.now();
      misses = 0;
    } else if (restarted || ++misses >= options_.heartbeat_misses) {
      misses = 0;
      w.heartbeat_error = r.ok() ? absl::AbortedError(w.task.short_name() + " answered as a new incarnation")
                                 : r.status();
      w.heard_before_misses = w.last_heard;
      watch->lost = true;
      watch->cancel.cancel();
    }
  }
}

// A parameter server is asked for its health every heartbeat_interval, from
// start() to stop(). A dead ps makes closures fail at once, but a hung one
// (SIGSTOP, a stuck host) makes every call to it wait for its deadline, and
// the chief would stall silently; `heartbeat_misses` health checks in a row
// without an answer within heartbeat_timeout raise UNAVAILABLE naming it,
// like any ps failure (P1): the next schedule/join/done raises it.
// Health checks are answered by a ps at once (the simulator does not queue
// them behind pulls and pushes), so a busy ps is not taken for a hung one.
Task<void> ClusterCoordinator::monitor_parameter_server(int index) {
  const TaskId ps = TaskId::ps(index);
  int misses = 0;
  Status last;
  const CancelToken stop = ps_monitor_stop_.token();
  while (!stopping_) {
    co_await sleep_for(runtime_.executor, options_.heartbeat_interval);
    if (stopping_) break;
    const Time asked = runtime_.executor.now();
    CallOptions opts;
    opts.deadline = add_saturating(runtime_.executor.now(), options_.heartbeat_timeout);
    opts.cancel = stop;
    auto r = response_as<HealthResponse>(
        co_await call_async(runtime_.executor, runtime_.transport, ps, HealthRequest{}, std::move(opts)));
    if (stopping_) break;
    if (r.ok()) {
      misses = 0;
      continue;
    }
    last = r.status();
    if (options_.ps_failure != PsFailurePolicy::kRaise &&
        (ps_being_recovered_.count(index) || asked < ps_recovered_at_[static_cast<std::size_t>(index)])) {
      misses = 0;  // a check of the ps as it was before its recovery
      continue;
    }
    if (++misses < options_.heartbeat_misses) continue;
    misses = 0;
    if (options_.ps_failure != PsFailurePolicy::kRaise) {
      runtime_.trace.instant(ps, "coordinator", "ps_failed", runtime_.executor.now());
      request_ps_recovery(index);  // P10
      continue;
    }
    char detail[160];
    std::snprintf(detail, sizeof detail,
                  " did not answer %d health checks in a row (one every %.3g s, each given %.3g s): it is hung or "
                  "unreachable",
                  options_.heartbeat_misses, to_seconds(options_.heartbeat_interval),
                  to_seconds(options_.heartbeat_timeout));
    runtime_.trace.instant(ps, "coordinator", "ps_failed", runtime_.executor.now());
    if (options_.on_event) {
      CoordinatorEvent e = event(CoordinatorEvent::Kind::kPsFailed, ps);
      e.cause = last;
      e.heartbeats_missed = true;
      observe(e);
    }
    queue_.report_error(
        with_failed_task(absl::UnavailableError(ps.short_name() + detail + "; last: " + describe(last)), ps));
    ps_lost_.cancel();
  }
}

// ---------------------------------------------------------------- ps recovery (P10-P15)

Task<StatusOr<bool>> ClusterCoordinator::recover_failed_parameter_servers() {
  if (options_.ps_failure == PsFailurePolicy::kRaise || stopping_) co_return false;
  bool requested = false;
  for (int p = 0; p < shape_.ps; ++p) {
    auto health =
        response_as<HealthResponse>(co_await control_call(TaskId::ps(p), HealthRequest{}, options_.heartbeat_timeout));
    if (health.ok() && health->incarnation == ps_incarnations_[static_cast<std::size_t>(p)]) continue;
    request_ps_recovery(p);
    requested = true;
  }
  if (!requested && !recovering_) co_return false;
  while (recovering_ && !queue_.has_error()) co_await state_changed_.wait();
  if (queue_.has_error()) co_return co_await raise_pending_error();
  co_return true;
}

void ClusterCoordinator::request_ps_recovery(int ps) {
  if (stopping_ || ps_being_recovered_.count(ps)) return;
  if (ps_to_recover_.empty()) recovery_detected_ = runtime_.executor.now();  // the first of the next batch
  ps_to_recover_.insert(ps);
  if (recovering_) return;  // the recovery in progress takes it next
  recovering_ = true;
  queue_.pause();  // P11: nothing new is dispatched until the ps is reloaded
  scope_.spawn(recover_parameter_servers());
}

Task<void> ClusterCoordinator::recover_parameter_servers() {
  while (!ps_to_recover_.empty() && !stopping_) {
    std::vector<int> failed(ps_to_recover_.begin(), ps_to_recover_.end());
    ps_to_recover_.clear();
    ps_being_recovered_.insert(failed.begin(), failed.end());
    const Time detected = recovery_detected_;
    Status s = co_await recover_once(failed, detected);
    // P12: a recovery that failed is raised like any ps failure.
    if (!s.ok()) queue_.report_error(std::move(s));
    ps_being_recovered_.clear();
  }
  recovering_ = false;
  queue_.resume();
  state_changed_.notify_all();
}

namespace {
// The recoveries just before this one that found ps `p` answering as the same
// process (nothing reloaded), read back from the records: how many in a row,
// and when the first of them was seen. A reload of `p`, a failed recovery or
// a gap longer than `wait` ends the run of them (P12).
struct SameProcessRounds {
  int count = 0;
  Time since = 0;
};
SameProcessRounds same_process_rounds(const std::vector<PsRecoveryRecord>& records, int p, Time detected,
                                      Duration wait) {
  SameProcessRounds r{0, detected};
  Time next = detected;
  for (auto it = records.rbegin(); it != records.rend(); ++it) {
    if (std::find(it->failed.begin(), it->failed.end(), p) == it->failed.end()) continue;
    if (!it->status.ok() || !it->reloaded.empty() || next - it->finished > wait) break;
    ++r.count;
    r.since = it->detected;
    next = it->detected;
  }
  return r;
}
}  // namespace

Task<Status> ClusterCoordinator::recover_once(const std::vector<int>& failed, Time detected) {
  PsRecoveryRecord record;
  record.policy = options_.ps_failure;
  record.failed = failed;
  record.detected = detected;
  const Time start = runtime_.executor.now();
  // The steps return a plain status; recording it is a function of its own,
  // not a capturing lambda called inside each co_return expression.
  Status status = co_await reload_parameter_servers(failed, detected, record);
  record_ps_recovery(record, status, start);
  co_return status;
}

Task<Status> ClusterCoordinator::reload_parameter_servers(const std::vector<int>& failed, Time detected,
                                                          PsRecoveryRecord& record) {
  const bool rollback = options_.ps_failure == PsFailurePolicy::kRollback;
  record.reloaded.clear();
  if (rollback) {
    for (int p = 0; p < shape_.ps; ++p) record.reloaded.push_back(p);
  } else {
    record.reloaded = failed;
  }

  // 1. End the closures in flight (P11): their calls are cancelled, every
  // ps is fenced at a new generation so that a push still on its way is
  // refused, and they are put back to run again once the ps is reloaded.
  const std::uint64_t ended = generation_;
  generations_ended_by_recovery_.insert(ended);
  generation_cancel_.cancel();
  co_await fence_parameter_servers(ended + 1, failed.front());
  co_await queue_.wait_until_nothing_in_flight();
  generation_ = ended + 1;
  generation_cancel_ = CancellationSource();

  // 2. Every failed ps must answer again on its address (P12). One that
  // answers as the process it was (a hung ps that resumed, a connection that
  // broke) still holds its state; one that answers as a new process lost it.
  const Time deadline = add_saturating(detected, options_.ps_recovery_wait);
  std::vector<int> lost;
  std::map<int, Incarnation> came_back;
  for (int p : failed) {
    StatusOr<Incarnation> back = co_await wait_for_parameter_server(p, deadline);
    if (!back.ok()) {
      Status never_came_back = back.status();
      co_return never_came_back;
    }
    came_back[p] = *back;
    if (*back != ps_incarnations_[static_cast<std::size_t>(p)]) lost.push_back(p);
  }
  if (lost.empty()) {
    // Nothing to reload: the closures run again. Such rounds for a ps are
    // bounded in time, by the recovery wait from the first of them, so that a
    // ps the workers cannot reach while the coordinator can does not make
    // them retry forever; between rounds the coordinator backs off, giving
    // workers time to reconnect to a ps that just restarted (on real
    // processes a worker's first calls to it can still fail).
    record.reloaded.clear();
    record.source = "nothing (every failed ps answered as the same process)";
    Status too_long = absl::OkStatus();
    int rounds = 0;
    for (int p : failed) {
      const SameProcessRounds earlier = same_process_rounds(ps_recoveries_, p, detected, options_.ps_recovery_wait);
      rounds = std::max(rounds, earlier.count + 1);
      if (too_long.ok() && runtime_.executor.now() - earlier.since >= options_.ps_recovery_wait) {
        char wait[32];
        std::snprintf(wait, sizeof wait, "%.6g s", to_seconds(options_.ps_recovery_wait));
        too_long = with_failed_task(
            absl::UnavailableError("ps:" + std::to_string(p) + " kept failing calls for " + wait +
                                   " (the ps recovery wait) while it answered the coordinator as the same process"),
            TaskId::ps(p));
      }
    }
    if (!too_long.ok()) co_return too_long;
    Duration backoff = options_.recovery_backoff_min;
    for (int r = 1; r < rounds && backoff < options_.recovery_backoff_max; ++r) backoff *= 2;
    co_await sleep_for(runtime_.executor, std::min(backoff, options_.recovery_backoff_max));
    co_return absl::OkStatus();
  }
  if (!rollback) record.reloaded = lost;

  // 3. The state to reload (P13), cut per ps; 4. reloaded: the ps that lost
  // their state (restore) or every ps (rollback), replacing what they hold.
  StatusOr<RecoveryState> state = recovery_state();
  if (!state.ok()) {
    Status unreadable(state.status().code(), "reading the state to reload ps:" + std::to_string(failed.front()) +
                                                 " from: " + describe(state.status()));
    co_return unreadable;
  }
  record.source = state->source;
  StatusOr<std::vector<CreateShardsRequest>> per_ps = create_requests(state->shards);
  if (!per_ps.ok()) {
    Status bad_state = per_ps.status();
    co_return bad_state;
  }
  const Time reload_deadline = add_saturating(runtime_.executor.now(), options_.rpc_timeout);
  Status reloaded = co_await send_create_requests(std::move(*per_ps), record.reloaded, reload_deadline);
  if (!reloaded.ok()) {
    Status not_reloaded = with_failed_task(
        Status(reloaded.code(), std::string(rollback ? "rolling back" : "restoring") + " after the failure of ps:" +
                                    std::to_string(failed.front()) + ": " + describe(reloaded)),
        TaskId::ps(failed.front()));
    co_return not_reloaded;
  }
  for (const auto& [p, incarnation] : came_back) ps_incarnations_[static_cast<std::size_t>(p)] = incarnation;
  co_return absl::OkStatus();
}

StatusOr<RecoveryState> ClusterCoordinator::recovery_state() const {
  if (recovery_source_) return recovery_source_();
  if (!initial_state_.empty()) return RecoveryState{initial_state_, "the initial values"};
  return absl::FailedPreconditionError("no state to reload from: the program that gave one (the trainer) has ended");
}

void ClusterCoordinator::record_ps_recovery(PsRecoveryRecord record, const Status& status, Time start) {
  record.finished = runtime_.executor.now();
  record.status = status;
  if (status.ok()) {
    if (!record.reloaded.empty()) ++stats_.ps_recoveries;
    stats_.ps_reloaded += record.reloaded.size();
    // Health checks sent before now saw the ps as it was (P12).
    for (int p : record.failed) ps_recovered_at_[static_cast<std::size_t>(p)] = record.finished;
    for (int p : record.reloaded) ps_recovered_at_[static_cast<std::size_t>(p)] = record.finished;
  }
  const bool rollback = record.policy == PsFailurePolicy::kRollback;
  runtime_.trace.span(runtime_.self, "coordinator", rollback ? "ps rollback" : "ps restore", start,
                      record.finished - start,
                      {TraceArg{"ps", static_cast<double>(record.failed.front())},
                       TraceArg{"reloaded", static_cast<double>(record.reloaded.size())},
                       TraceArg{"code", static_cast<double>(status.code())}});
  ps_recoveries_.push_back(std::move(record));
}

Task<StatusOr<Incarnation>> ClusterCoordinator::wait_for_parameter_server(int index, Time deadline) {
  const TaskId ps = TaskId::ps(index);
  Duration backoff = options_.recovery_backoff_min;
  Status last;
  while (!stopping_) {
    const Duration timeout =
        std::clamp<Duration>(deadline - runtime_.executor.now(), 1, options_.heartbeat_timeout);
    auto health = response_as<HealthResponse>(co_await control_call(ps, HealthRequest{}, timeout));
    if (health.ok()) co_return health->incarnation;
    last = health.status();
    if (runtime_.executor.now() >= deadline) break;
    co_await sleep_for(runtime_.executor, std::max<Duration>(0, std::min(backoff, deadline - runtime_.executor.now())));
    backoff = std::min(backoff * 2, options_.recovery_backoff_max);
  }
  if (stopping_) co_return absl::CancelledError("the coordinator stopped while waiting for " + ps.short_name());
  char wait[32];
  std::snprintf(wait, sizeof wait, "%.6g s", to_seconds(options_.ps_recovery_wait));
  co_return with_failed_task(
      absl::UnavailableError(ps.short_name() + " failed and did not answer again on its address within " + wait +
                             " (ps_failure " + ps_failure_policy_name(options_.ps_failure) +
                             " waits that long, the ps recovery wait); last: " +
                             // Its code and message only: the error itself names the task once.
                             absl::StatusCodeToString(last.code()) + ": " + std::string(last.message())),
      ps);
}

void ClusterCoordinator::mark_worker_dead(WorkerHandle& w, const Status& cause) {
  if (w.state == WorkerState::kDead) return;
  w.state = WorkerState::kDead;
  w.last_error = cause;
  ++stats_.worker_failures;
  if (ssp_) {
    ssp_->leave(w.index);
    ssp_changed_.notify_all();
  }
  if (sync_) {
    sync_->leave(w.index);
    sync_changed_.notify_all();
  }
  // W2/R8: drop its pending resource builds and abort every resource it held.
  queue_.clear_tagged(w.index);
  for (auto& r : w.resources) r.output.set_aborted(cause);
  log_dispatch(w.index, DispatchRecord::Kind::kWorkerFailed, 0);
  runtime_.trace.instant(w.task, "coordinator", "worker_failed", runtime_.executor.now());
  if (options_.on_event) {
    CoordinatorEvent e = event(CoordinatorEvent::Kind::kWorkerFailed, w.task);
    e.heartbeats_missed = w.heartbeat_error.has_value();
    e.cause = e.heartbeats_missed ? *w.heartbeat_error : cause;
    e.last_heard = e.heartbeats_missed ? w.heard_before_misses : w.last_heard;
    e.incarnation = w.incarnation;
    observe(e);
  }
  w.heartbeat_error.reset();
}

Task<void> ClusterCoordinator::recover_worker(WorkerHandle& w) {
  Duration backoff = options_.recovery_backoff_min;
  while (!stopping_) {
    auto health = response_as<HealthResponse>(
        co_await control_call(w.task, HealthRequest{}, std::min(options_.rpc_timeout, options_.heartbeat_timeout)));
    if (health.ok()) {
      const Incarnation previous = w.incarnation;
      w.incarnation = health->incarnation;
      Status setup = co_await setup_worker(w, add_saturating(runtime_.executor.now(), options_.rpc_timeout));
      if (setup.ok()) {
        // Recovery of this worker alone: the others never paused (TensorFlow
        // updates the whole cluster at once, a TODO there).
        w.state = WorkerState::kRunning;
        ++stats_.worker_recoveries;
        if (ssp_) {
          ssp_->rejoin(w.index);
          ssp_changed_.notify_all();
        }
        if (sync_) {
          sync_->rejoin(w.index);
          sync_changed_.notify_all();
        }
        log_dispatch(w.index, DispatchRecord::Kind::kWorkerRecovered, 0);
        runtime_.trace.instant(w.task, "coordinator", "worker_recovered", runtime_.executor.now());
        if (options_.on_event) {
          CoordinatorEvent e = event(CoordinatorEvent::Kind::kWorkerRecovered, w.task);
          e.incarnation = w.incarnation;
          e.previous_incarnation = previous;
          observe(e);
        }
        // R9: rebuild every resource before the worker takes another closure;
        // the tagged queue is served first.
        for (auto& r : w.resources) queue_.put_tagged(w.index, ResourceClosure{w.index, r.request, r.output});
        co_return;
      }
      // The worker is up but cannot reach a parameter server: that ps failed,
      // and no closure will run to report it while workers stay down (W3/P4).
      if (auto t = failed_task(setup); t && t->job == Job::kPs) {
        if (options_.ps_failure != PsFailurePolicy::kRaise)
          request_ps_recovery(t->index);  // P10
        else
          queue_.report_error(setup);
      }
    }
    co_await sleep_for(runtime_.executor, backoff);
    backoff = std::min(backoff * 2, options_.recovery_backoff_max);
  }
}

Task<void> ClusterCoordinator::process_resource(WorkerHandle& w, ResourceClosure rc) {
  if (rc.request.parent != 0) {
    // A resource built from one that failed fails the same way, without a call (E11).
    for (const auto& r : w.resources) {
      if (r.request.id != rc.request.parent) continue;
      if (auto p = r.output.peek(); p && r.output.is_ready() && !p->ok()) {
        rc.output.set_error(with_error_kind(p->status(), ErrorKind::kClosureInput));
        co_return;
      }
    }
  }
  log_dispatch(w.index, DispatchRecord::Kind::kResource, rc.request.id);
  for (;;) {
    auto r = co_await control_call(w.task, rc.request, options_.rpc_timeout);
    if (r.ok()) {
      rc.output.set_value(ResourceRef{rc.request.id});
      ++stats_.resources_built;
      co_return;
    }
    const Classification c = classify_closure_failure(r.status(), FailureFacts{w.task, false, false});
    switch (c.kind) {
      case ClosureFailure::kWorkerFailure:
        mark_worker_dead(w, r.status());
        co_return;
      case ClosureFailure::kTransientTimeout:
      case ClosureFailure::kDerivedCancellation:
        continue;  // R8: re-run at once
      default:
        // R8: the error stays on the resource; closures that use it fail with an input error.
        rc.output.set_error(r.status());
        co_return;
    }
  }
}

}  // namespace twinps
