#include "sim/scenario_program.h"

#include <algorithm>
#include <cmath>
#include <string_view>

#include "core/runtime/sync.h"
#include "core/training/exactly_once.h"
#include "core/worker/parameter_client.h"
#include "sim/workload.h"

namespace twinps::sim {

// The synthetic model and exactly-once training count visits in one variable.
static_assert(std::string_view(synthetic::kVisitsVar) == model::CompiledModel::kVisits);

// What the parameter servers counted, or nothing when they did not answer
// (the expectation then says the visits were unreadable).
Task<std::vector<std::int64_t>> read_visits(ClusterCoordinator& c) {
  auto counts = co_await training::read_visit_counts(c);
  co_return counts.ok() ? std::move(*counts) : std::vector<std::int64_t>{};
}

const char* action_kind(const scenario::Action& a) {
  switch (a.kind_case()) {
    case scenario::Action::kSchedule: return "schedule";
    case scenario::Action::kJoin: return "join";
    case scenario::Action::kDone: return "done";
    case scenario::Action::kSleepS: return "sleep";
    case scenario::Action::kSetInfiniteStep: return "set_infinite_step";
    case scenario::Action::kTrain: return "train";
    case scenario::Action::KIND_NOT_SET: break;
  }
  return "?";
}

CoordinatorOptions coordinator_options(const scenario::Coordinator& co) {
  CoordinatorOptions o;
  o.transient_ps_failures = co.transient_ps_failures();
  o.transient_timeouts = co.transient_timeouts();
  o.heartbeat_interval = from_seconds(co.heartbeat_interval_s());
  o.heartbeat_timeout = from_seconds(co.heartbeat_timeout_s());
  o.heartbeat_misses = co.heartbeat_misses();
  o.closure_timeout = from_seconds(co.closure_timeout_s());
  o.rpc_timeout = from_seconds(co.rpc_timeout_s());
  o.queue_capacity = static_cast<std::size_t>(co.queue_capacity());
  o.record_dispatch_log = true;
  o.mode = co.mode() == scenario::SSP    ? TrainingMode::kSsp
           : co.mode() == scenario::SYNC ? TrainingMode::kSync
                                         : TrainingMode::kAsync;
  o.staleness_bound = co.staleness_bound();
  o.backup_workers = co.backup_workers();
  o.ps_failure = co.ps_failure() == scenario::RESTORE    ? PsFailurePolicy::kRestore
                 : co.ps_failure() == scenario::ROLLBACK ? PsFailurePolicy::kRollback
                                                         : PsFailurePolicy::kRaise;
  o.ps_recovery_wait = from_seconds(co.ps_recovery_wait_s());
  return o;
}

Task<std::optional<std::int64_t>> read_iterations(ClusterCoordinator& c) {
  const VariableLayout* v = c.variables().find(kIterationsVar);
  if (!v) co_return std::nullopt;
  ParameterClient client = c.parameter_client();
  ParameterClient::PullBatch pull;
  const int h = pull.counter(*v);
  auto r = co_await client.pull(pull);
  if (!r.ok()) co_return std::nullopt;
  co_return r->counter(h);
}

ScenarioProgram::ScenarioProgram(std::vector<scenario::Action> actions, synthetic::Workload* workload,
                                 const synthetic::Variables* variables, SimResult& result, Hooks hooks)
    : actions_(std::move(actions)),
      workload_(workload),
      variables_(variables),
      result_(result),
      hooks_(std::move(hooks)) {}

Task<void> ScenarioProgram::watch(Executor& ex, std::size_t value, RemoteValue rv) {
  (void)co_await rv.fetch();
  result_.values[value].resolved_at = ex.now();
}

void ScenarioProgram::record_value(ClusterCoordinator& c, Executor& ex, TaskScope& scope, int start,
                                   const std::string& label, int index, const std::string& fn, const RemoteValue& rv) {
  ValueRecord v;
  v.program_start = start;
  v.label = label;
  v.index = index;
  v.fn = fn;
  v.closure = c.stats().scheduled;  // closure ids count schedule()d closures from 1
  v.scheduled_at = c.now();
  result_.values.push_back(std::move(v));
  remote_values_.push_back(rv);
  // Always watched (not only for invariants), so that the events of a run,
  // and its trace hash, never depend on what is checked.
  scope.spawn(watch(ex, result_.values.size() - 1, rv));
}

void ScenarioProgram::settle_values() {
  for (std::size_t i = 0; i < result_.values.size(); ++i) {
    const RemoteValue& rv = remote_values_[i];
    result_.values[i].status = rv.status();
    if (auto r = rv.peek()) result_.values[i].outcome = r->status();
  }
}

Task<Status> ScenarioProgram::train(ClusterCoordinator& c, Executor& ex, TaskScope& scope, int start,
                                    const std::string& label, TrainerSetup setup) {
  // Built here, not in a coroutine's by-value parameter: the trainer (and its
  // data sources) live on the heap, owned by the coroutine that runs it.
  training::TrainerCallbacks callbacks;
  callbacks.on_start = [this, start](const training::StartInfo& info) {
    result_.starts[static_cast<std::size_t>(start)].start_epoch = info.start_epoch;
  };
  callbacks.on_epoch = [this](const training::EpochResult& e) {
    result_.epochs.push_back(e);
    result_.epoch_marks.push_back(EpochMark{e.finished_at, hooks_.task_cpu ? hooks_.task_cpu() : std::vector<Duration>{},
                                            hooks_.task_waiting ? hooks_.task_waiting() : std::vector<Duration>{}});
  };
  // Faults timed from the program's start hit training, not the cluster's
  // creation, however long that takes (real processes under a sanitizer).
  callbacks.on_cluster_formed = [this] { started(); };
  // Every closure the trainer schedules is recorded, so that expectations
  // over the program's closures see the training's too.
  callbacks.on_scheduled = [this, &c, &ex, &scope, start, label, index = 0](const std::string& fn,
                                                                           const RemoteValue& rv) mutable {
    record_value(c, ex, scope, start, label, index++, fn, rv);
  };
  return run_trainer(c, std::make_unique<training::Trainer>(std::move(setup.model), *setup.registry,
                                                            std::move(setup.train), std::move(setup.eval),
                                                            std::move(setup.options), std::move(callbacks)));
}

Task<Status> ScenarioProgram::run_trainer(ClusterCoordinator& c, std::unique_ptr<training::Trainer> trainer) {
  auto trained = co_await trainer->run(c);
  if (trained.ok() && trained->eval) result_.eval = trained->eval;
  if (trained.ok()) result_.steps_made_up += trained->steps_made_up;
  co_return trained.status();
}

void ScenarioProgram::started() {
  if (started_ || !hooks_.on_started) return;
  started_ = true;
  hooks_.on_started();
}

Task<void> ScenarioProgram::run(ClusterCoordinator& c, Executor& ex, TaskScope& scope, int start) {
  auto finish = [&] {
    result_.starts[static_cast<std::size_t>(start)].finished = true;
    done_ = true;
  };
  PerWorkerValues iterator;
  if (workload_) {
    // A synthetic model's variables; a spec's are created by the trainer
    // (restoring a checkpoint) in its `train` action.
    Status formed = co_await c.start(variables_->layouts, workload_->spec().optimizer, variables_->initial);
    if (!formed.ok()) {
      result_.starts[static_cast<std::size_t>(start)].start_status = std::move(formed);
      finish();
      co_return;
    }
    started();
    const synthetic::ModelSpec& spec = workload_->spec();
    if (spec.exactly_once) {
      // The coordinator owns the data: each train closure gets its split,
      // no worker keeps a position in it.
      splits_.emplace(spec.examples_per_epoch, spec.batch_size);
    } else if (!workload_->timing_only()) {
      PerWorkerDataset dataset =
          c.create_per_worker_dataset(synthetic::kDatasetFn, synthetic::dataset_args(spec, c.shape().workers));
      iterator = c.create_per_worker_resource(synthetic::kIteratorFn, {}, &dataset.datasets);
    }
  }
  // A model spec's trainer starts the coordinator inside its `train` action,
  // which calls started() once the cluster is formed.
  for (std::size_t i = 0; i < actions_.size(); ++i)
    co_await run_action(c, ex, scope, start, static_cast<int>(i), actions_[i], iterator);
  finish();
}

int ScenarioProgram::closures_to_schedule(const scenario::Schedule& s, int workers) const {
  if (!(s.for_s() > 0)) return s.count();
  // The loader refuses for_s without a schedule and a join before it; a pace
  // of 0 (that join ended at once) schedules the least.
  const double wanted = std::round(pace_ * s.for_s());
  return static_cast<int>(std::clamp(wanted, 8.0 * workers, 1e6));
}

Task<void> ScenarioProgram::run_action(ClusterCoordinator& c, Executor& ex, TaskScope& scope, int start, int index,
                                       const scenario::Action& a, const PerWorkerValues& iterator) {
  auto ps_counters = [this] { return hooks_.ps_counters ? hooks_.ps_counters() : std::vector<PsReport>{}; };
  auto task_cpu = [this] { return hooks_.task_cpu ? hooks_.task_cpu() : std::vector<Duration>{}; };
  auto task_waiting = [this] { return hooks_.task_waiting ? hooks_.task_waiting() : std::vector<Duration>{}; };
  ActionRecord rec;
  rec.program_start = start;
  rec.index = index;
  rec.label = a.label();
  rec.kind = action_kind(a);
  rec.started = ex.now();
  rec.ps_at_start = ps_counters();
  rec.cpu_at_start = task_cpu();
  rec.waiting_at_start = task_waiting();
  switch (a.kind_case()) {
    case scenario::Action::kSchedule: {
      const auto& s = a.schedule();
      const int count = closures_to_schedule(s, c.shape().workers);
      last_schedule_ = {count, rec.started};
      for (int k = 0; k < count; ++k) {
        // schedule() usually completes without suspending, and resuming this
        // frame from it is a tail call only when the compiler makes it one
        // (not in sanitizer or -O0 builds): a long loop would grow the stack
        // without bound. Return to the event loop now and then.
        if (k > 0 && k % 256 == 0) co_await sleep_for(ex, 0);
        std::vector<Arg> args;
        if (s.function() == kTrainFn) {
          if (!iterator.values.empty()) args.emplace_back(iterator);
          for (auto& v : synthetic::Workload::train_args(s.extra_s(), s.infinite())) args.emplace_back(std::move(v));
          if (splits_) {
            const Split split = splits_->next();
            for (auto& v : synthetic::Workload::split_args({split.begin, split.end}, splits_->handed_out()))
              args.emplace_back(std::move(v));
          }
        }
        auto rv = co_await c.schedule(s.function(), std::move(args));
        if (!rv.ok()) {
          rec.status = rv.status();
          break;
        }
        record_value(c, ex, scope, start, a.label(), k, s.function(), *rv);
      }
      break;
    }
    case scenario::Action::kJoin:
      rec.status = co_await c.join();
      if (last_schedule_.count > 0 && ex.now() > last_schedule_.started)
        pace_ = last_schedule_.count / to_seconds(ex.now() - last_schedule_.started);
      break;
    case scenario::Action::kDone: rec.status = (co_await c.done()).status(); break;
    case scenario::Action::kSleepS: co_await sleep_for(ex, from_seconds(a.sleep_s())); break;
    case scenario::Action::kSetInfiniteStep: {
      ParameterClient client = c.parameter_client();
      ParameterClient::PushBatch push;
      push.assign(*c.variables().find(kInfiniteFlagVar), Matrix::Constant(1, 1, a.set_infinite_step() ? 1.0f : 0.0f));
      rec.status = co_await client.push(std::move(push));
      break;
    }
    case scenario::Action::kTrain: {
      // Not a conditional expression around the co_await: GCC 12 destroys
      // the awaited Status twice there (a shared error's reference count
      // underflowed, found by valgrind on a ps failure's recovery record).
      if (!hooks_.train) {
        rec.status = absl::UnimplementedError("this mode runs no trainer (a `train` action)");
        break;
      }
      Status trained = co_await hooks_.train(c, start, a.label());
      rec.status = std::move(trained);
      break;
    }
    case scenario::Action::KIND_NOT_SET: break;
  }
  rec.ended = ex.now();
  rec.ps_at_end = ps_counters();
  rec.cpu_at_end = task_cpu();
  rec.waiting_at_end = task_waiting();
  rec.generation_after = c.generation();
  rec.values_end = result_.values.size();
  if (!a.label().empty()) {
    rec.iterations = co_await read_iterations(c);
    // A synthetic model's visits, or an exactly-once trainer's (none: empty).
    rec.visits = co_await read_visits(c);
  }
  result_.actions.push_back(std::move(rec));
}

}  // namespace twinps::sim
