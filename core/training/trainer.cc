#include "core/training/trainer.h"

#include <algorithm>
#include <deque>

#include <google/protobuf/text_format.h>

#include "core/checkpoint/training_checkpoints.h"
#include "core/runtime/sync.h"
#include "core/training/exactly_once.h"
#include "core/training/model_functions.h"

namespace twinps::training {

namespace {

std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

std::string spec_text(const model::spec::ModelSpec& spec) {
  std::string text;
  google::protobuf::TextFormat::PrintToString(spec, &text);
  return text;
}

void add_read(data::ReadStats& total, const StepReport& r) {
  total.records_read += r.records_read;
  total.records_skipped += r.records_skipped;
  total.files_cut_short += r.files_cut_short;
  total.passes_completed += r.passes_completed;
}

}  // namespace

Trainer::Trainer(std::shared_ptr<const model::CompiledModel> model, const FunctionRegistry& registry, DataSource train,
                 std::optional<DataSource> eval, TrainerOptions options, TrainerCallbacks callbacks)
    : model_(std::move(model)),
      registry_(registry),
      train_(std::move(train)),
      eval_(std::move(eval)),
      options_(std::move(options)),
      callbacks_(std::move(callbacks)) {}

std::int64_t Trainer::steps_per_epoch() const {
  if (options_.steps_per_epoch > 0) return options_.steps_per_epoch;
  return train_.records > 0 ? ceil_div(train_.records, model_->batch_size()) : 0;
}

Status Trainer::check() const {
  if (options_.epochs < 1) return absl::InvalidArgumentError("epochs must be at least 1");
  if (options_.steps_per_epoch < 0) return absl::InvalidArgumentError("steps_per_epoch must not be negative");
  if (steps_per_epoch() < 1)
    return absl::InvalidArgumentError("steps_per_epoch is 0 (one pass) but the number of training records is unknown");
  if (options_.steps_per_execution < 1) return absl::InvalidArgumentError("steps_per_execution must be at least 1");
  if (options_.checkpoint_every_epochs < 1) return absl::InvalidArgumentError("checkpoint_every_epochs must be at least 1");
  if (options_.checkpoint_every_steps < 0 || options_.checkpoint_every < 0)
    return absl::InvalidArgumentError("checkpoint_every_steps and checkpoint_every must not be negative");
  if (options_.eval_every_epochs < 0) return absl::InvalidArgumentError("eval_every_epochs must not be negative");
  if (options_.eval_steps < 0) return absl::InvalidArgumentError("eval_steps must not be negative");
  if (eval_ && options_.eval_mode == EvalMode::kDistributed && options_.eval_steps == 0 && eval_->records <= 0)
    return absl::InvalidArgumentError("eval_steps is 0 (one pass) but the number of evaluation records is unknown");
  if (model_->batch_size() < 1) return absl::InvalidArgumentError("the batch size must be at least 1");
  if (options_.visitation == Visitation::kExactlyOnce && train_.records <= 0)
    return absl::InvalidArgumentError("exactly-once visitation needs the number of training records");
  return absl::OkStatus();
}

// One run of the trainer on one coordinator (a restarted coordinator runs
// the trainer again from the top, and restores).
struct Trainer::Run {
  Run(const Trainer& t, ClusterCoordinator& c) : t(t), c(c), spe(t.steps_per_epoch()) {}

  const Trainer& t;
  ClusterCoordinator& c;
  const std::int64_t spe;
  TrainResult result;
  PerWorkerValues model;
  PerWorkerValues iterator;  // at least once: each worker's iterator over its shard
  PerWorkerValues table;     // exactly once: every record on every worker
  // Exactly once: the order of the records in pass `order_pass` over them.
  std::vector<std::int64_t> order;
  std::int64_t order_pass = -1;
  PerWorkerDataset eval_dataset;
  bool eval_dataset_built = false;
  int epoch = 0;
  bool finished = false;

  // Train closures scheduled and not yet folded into the result, oldest first.
  struct Scheduled {
    RemoteValue value;
    std::int64_t steps = 0;
  };
  std::deque<Scheduled> pending;
  std::int64_t steps_done_in_epoch = 0;   // by closures folded
  std::int64_t steps_folded = 0;          // by closures folded, over every epoch of this run
  std::int64_t steps_scheduled = 0;       // by this run, over every epoch
  std::int64_t steps_at_last_save = 0;
  Time last_save_at = 0;
  std::optional<double> newest_loss;
  std::int64_t progress_steps = 0;  // steps folded at the previous progress report
  Time progress_at = 0;

  // Takes every finished closure at the front of `pending` into the result.
  // Stops at one that failed: the coordinator raises its error at the next
  // join (once, cancelling the rest), which the trainer then returns.
  // Returns whether the front closure failed.
  bool fold_finished() {
    while (!pending.empty()) {
      auto peeked = pending.front().value.peek();
      if (!peeked) return false;  // not finished yet
      if (!peeked->ok()) return true;
      auto report = StepReport::from_value(**peeked);
      if (report.ok()) {
        add_read(result.read, *report);
        newest_loss = report->loss;
      }
      steps_done_in_epoch += pending.front().steps;
      steps_folded += pending.front().steps;
      pending.pop_front();
    }
    return false;
  }

  // join(), then the closures it finished folded. A closure's error after a
  // join that succeeded cannot happen; were it to, it is returned.
  Task<Status> join_and_fold() {
    TWINPS_CO_RETURN_IF_ERROR(co_await c.join());
    if (fold_finished()) co_return pending.front().value.peek()->status();
    co_return absl::OkStatus();
  }

  std::map<std::string, std::string> metadata() const {
    std::map<std::string, std::string> m = t.options_.checkpoint_metadata;
    m[kSpecKey] = spec_text(t.model_->spec());
    m[kEpochsKey] = std::to_string(t.options_.epochs);
    m[kStepsPerEpochKey] = std::to_string(spe);
    return m;
  }

  // P15: a call of the chief's own to the parameter servers (not a
  // closure's), `call()`, made again when it failed and the ps it met was
  // found failed or restarted and was recovered (restore/rollback); at most
  // kChiefCallAttempts calls. A recovery that failed is the error. `call`
  // returns a member coroutine's Task; it is not a coroutine itself, so
  // nothing it captures must outlive a suspension.
  static constexpr int kChiefCallAttempts = 3;
  template <typename Call>
  Task<Status> again_after_recovery(Call call) {
    for (int attempt = 1;; ++attempt) {
      Status s = co_await call();
      if (s.ok() || attempt >= kChiefCallAttempts) co_return s;
      auto recovered = co_await c.recover_failed_parameter_servers();
      if (!recovered.ok()) co_return recovered.status();
      if (!*recovered) co_return s;
    }
  }

  Task<Status> reset_train_metrics() {
    co_return co_await again_after_recovery([this] { return reset_train_metrics_once(); });
  }
  Task<Status> reset_train_metrics_once() {
    ParameterClient ps = c.parameter_client();
    co_return co_await t.model_->reset_metrics(ps, c.variables(), model::Phase::kTrain);
  }

  // The epoch's training metrics and iterations counter, read once every
  // step of the epoch is applied (P14); again after a recovery (P15).
  Task<Status> finish_epoch(EpochResult& e) {
    co_return co_await again_after_recovery([this, &e] { return finish_epoch_once(e); });
  }
  Task<Status> finish_epoch_once(EpochResult& e) {
    if (c.ps_failure_policy() != PsFailurePolicy::kRaise) TWINPS_CO_RETURN_IF_ERROR(co_await make_up_lost_steps());
    co_return co_await read_epoch_metrics(e);
  }

  Task<Status> read_epoch_metrics(EpochResult& e) {
    ParameterClient reader = c.parameter_client();
    auto metrics = co_await t.model_->read_metrics(reader, c.variables(), model::Phase::kTrain);
    if (!metrics.ok()) co_return metrics.status();
    e.train = *metrics;
    auto iterations = co_await read_iterations();
    if (!iterations.ok()) co_return iterations.status();
    e.iterations = *iterations;
    co_return absl::OkStatus();
  }

  Task<Status> save(std::map<std::string, std::string> meta) {
    co_return co_await again_after_recovery([this, &meta] { return save_once(meta); });
  }

  Task<Status> save_once(const std::map<std::string, std::string>& meta) {
    auto saved = co_await save_checkpoint(c, *t.options_.checkpoints, meta);
    if (!saved.ok()) co_return saved.status();
    steps_at_last_save = steps_scheduled;
    last_save_at = c.now();
    if (t.callbacks_.on_checkpoint) t.callbacks_.on_checkpoint(*saved);
    co_return absl::OkStatus();
  }

  // Within an epoch: every N steps or S seconds since the last save.
  Task<Status> maybe_save_within_epoch() {
    const auto& o = t.options_;
    if (!o.checkpoints) co_return absl::OkStatus();
    const bool by_steps = o.checkpoint_every_steps > 0 && steps_scheduled - steps_at_last_save >= o.checkpoint_every_steps;
    const bool by_time = o.checkpoint_every > 0 && c.now() - last_save_at >= o.checkpoint_every;
    if (!by_steps && !by_time) co_return absl::OkStatus();
    // A consistent snapshot: nothing runs while the shards are exported.
    TWINPS_CO_RETURN_IF_ERROR(co_await join_and_fold());
    co_return co_await save(metadata());
  }

  // A closure failed: the coordinator's join raises the error.
  Task<Status> join_or_internal() {
    Status s = co_await join_and_fold();
    if (s.ok()) co_return absl::InternalError("a closure failed but join() raised no error");
    co_return s;
  }

  bool exactly_once() const { return t.options_.visitation == Visitation::kExactlyOnce; }

  // Exactly once, the data is a stream of passes over the records, each in
  // its own order, `pass_steps()` steps a pass (the last batch of a pass may
  // be short); the run's step g trains pass g / pass_steps()'s batch
  // g % pass_steps(). Epochs of the trainer are counts of steps, as Keras's
  // steps_per_epoch: a pass may span epochs.
  std::int64_t pass_steps() const { return ceil_div(t.train_.records, t.model_->batch_size()); }
  std::int64_t global_step(std::int64_t step) const { return static_cast<std::int64_t>(epoch) * spe + step; }

  const std::vector<std::int64_t>& pass_order(std::int64_t pass) {
    if (pass != order_pass) {
      order = epoch_order(t.train_.records, t.options_.data_seed, pass, t.options_.shuffle_records);
      order_pass = pass;
    }
    return order;
  }

  // The steps a closure starting at the epoch's step `step` runs: at most
  // steps_per_execution, within the epoch, and (exactly once) within a pass.
  std::int64_t closure_steps(std::int64_t step) const {
    std::int64_t n = std::min(t.options_.steps_per_execution, spe - step);
    if (exactly_once()) n = std::min(n, pass_steps() - global_step(step) % pass_steps());
    return n;
  }

  // A train closure of `n` steps from the epoch's step `step`: the next
  // records of the worker's iterator, or (exactly once) the records those
  // steps cover, as a split with its key (unique in the run).
  std::vector<Arg> train_args(std::int64_t step, std::int64_t n) {
    if (!exactly_once()) return {model, iterator, Value(n)};
    const std::int64_t g = global_step(step);
    const std::vector<std::int64_t>& ids = pass_order(g / pass_steps());
    const std::int64_t b = t.model_->batch_size();
    const auto begin = static_cast<std::size_t>(g % pass_steps() * b);
    const auto end = std::min(ids.size(), begin + static_cast<std::size_t>(n * b));
    return {model, table, Value(pack_ids(std::span(ids).subspan(begin, end - begin))), Value(g + 1)};
  }

  // The step an epoch starts at. A run restored from a checkpoint saved
  // within an epoch (after a join, so every split scheduled before it was
  // applied, in order) goes on with that epoch's next split when the
  // records are visited exactly once; at least once (TensorFlow's) it
  // trains the whole epoch again.
  std::int64_t first_step_of(int e) const {
    if (!exactly_once() || e != result.start.start_epoch) return 0;
    return std::clamp<std::int64_t>(result.start.restored_iterations - static_cast<std::int64_t>(e) * spe, 0, spe);
  }

  // Exactly once: the visits the parameter servers counted, against what
  // every step of every epoch up to the last (this run's and a restored
  // checkpoint's) was due to visit.
  Task<StatusOr<VisitCounts>> read_visits() {
    auto seen = co_await read_visit_counts(c);
    if (!seen.ok()) co_return seen.status();
    if (seen->empty()) co_return absl::InternalError("exactly-once training created no visits variable");
    co_return compare_with_due(*seen);
  }

  VisitCounts compare_with_due(const std::vector<std::int64_t>& seen) {
    const std::int64_t steps = static_cast<std::int64_t>(t.options_.epochs) * spe;
    VisitCounts counts;
    counts.examples = static_cast<std::int64_t>(seen.size());
    counts.full_passes = steps / pass_steps();
    counts.partial_records = std::min(t.train_.records, steps % pass_steps() * t.model_->batch_size());
    std::vector<std::int64_t> due(seen.size(), counts.full_passes);
    const std::vector<std::int64_t>& next = pass_order(counts.full_passes);
    for (std::int64_t i = 0; i < counts.partial_records; ++i) ++due[static_cast<std::size_t>(next[static_cast<std::size_t>(i)])];
    counts.min = *std::min_element(seen.begin(), seen.end());
    counts.max = *std::max_element(seen.begin(), seen.end());
    for (std::size_t i = 0; i < seen.size(); ++i) counts.off += seen[i] != due[i] ? 1 : 0;
    return counts;
  }

  Task<StatusOr<std::int64_t>> read_iterations() {
    const VariableLayout* v = c.variables().find(model::CompiledModel::kIterations);
    if (!v) co_return absl::InternalError("the model has no iterations counter");
    ParameterClient ps = c.parameter_client();
    ParameterClient::PullBatch pull;
    const int h = pull.counter(*v);
    auto r = co_await ps.pull(pull);
    if (!r.ok()) co_return r.status();
    co_return r->counter(h);
  }

  // P14: after a ps recovery took the iterations counter back (a rollback,
  // or a restore of the ps holding it), the epoch is not over until the
  // counter reaches its end again: the missing steps are scheduled and
  // joined. Bounded: each round ends with a join, and only a new recovery
  // during it leaves steps missing again.
  Task<Status> make_up_lost_steps() {
    constexpr int kMaxRounds = 16;
    const std::int64_t target = (static_cast<std::int64_t>(epoch) + 1) * spe;
    for (int round = 0; round < kMaxRounds; ++round) {
      auto iterations = co_await read_iterations();
      if (!iterations.ok()) co_return iterations.status();
      if (*iterations >= target) co_return absl::OkStatus();
      for (std::int64_t missing = target - *iterations; missing > 0;) {
        const std::int64_t n = std::min(t.options_.steps_per_execution, missing);
        std::vector<Arg> args{model, iterator, Value(n)};
        auto rv = co_await c.schedule(kTrainStep, std::move(args));
        if (!rv.ok()) co_return rv.status();
        if (t.callbacks_.on_scheduled) t.callbacks_.on_scheduled(kTrainStep, *rv);
        pending.push_back({*rv, n});
        steps_scheduled += n;
        result.steps_made_up += n;
        missing -= n;
      }
      TWINPS_CO_RETURN_IF_ERROR(co_await join_and_fold());
    }
    co_return absl::AbortedError("epoch " + std::to_string(epoch) + ": the iterations counter was still below " +
                                 std::to_string(target) + " after " + std::to_string(kMaxRounds) +
                                 " rounds of making up steps lost to ps recoveries");
  }

  // restore/rollback (P13): a failed ps is reloaded from the newest
  // checkpoint that verifies, or from the initial values before the first.
  void set_recovery_source(const model::CompiledModel::Variables& vars) {
    c.set_recovery_source([manager = t.options_.checkpoints, layouts = vars.layouts, optimizer = vars.optimizer,
                           fresh = vars.initial]() -> StatusOr<RecoveryState> {
      auto point = restore_or_initialize(manager, layouts, optimizer, fresh);
      if (!point.ok()) return point.status();
      return RecoveryState{std::move(point->shards),
                           point->restored_from ? "checkpoint " + *point->restored_from : "the initial values"};
    });
  }

  Task<StatusOr<model::MetricValues>> evaluate_distributed() {
    const DataSource& source = *t.eval_;
    ParameterClient ps = c.parameter_client();
    TWINPS_CO_RETURN_IF_ERROR(co_await t.model_->reset_metrics(ps, c.variables(), model::Phase::kEval));
    if (!eval_dataset_built) {
      DatasetRequest r{c.shape().workers, t.model_->batch_size(), -1, false};
      eval_dataset = c.create_per_worker_dataset(source.function, source.args(r));
      eval_dataset_built = true;
    }
    // A new iterator per evaluation: each worker starts its shard again.
    PerWorkerValues eval_iterator = c.create_per_worker_iterator(eval_dataset);
    const std::int64_t steps =
        t.options_.eval_steps > 0 ? t.options_.eval_steps : ceil_div(source.records, t.model_->batch_size());
    for (std::int64_t i = 0; i < steps; ++i) {
      std::vector<Arg> args{model, eval_iterator};
      auto rv = co_await c.schedule(kEvalStep, std::move(args));
      if (!rv.ok()) co_return rv.status();
      if (t.callbacks_.on_scheduled) t.callbacks_.on_scheduled(kEvalStep, *rv);
    }
    TWINPS_CO_RETURN_IF_ERROR(co_await c.join());
    ParameterClient reader = c.parameter_client();
    co_return co_await t.model_->read_metrics(reader, c.variables(), model::Phase::kEval);
  }

  Task<StatusOr<model::MetricValues>> evaluate_directly() {
    auto data = LocalData::open(t.registry_, *t.eval_, DatasetRequest{1, t.model_->batch_size(), 1, false},
                                RandomStream(0));
    if (!data.ok()) co_return data.status();
    ParameterClient ps = c.parameter_client();
    std::vector<Matrix> totals;
    for (;;) {
      auto batch = data->next();
      if (!batch.ok()) {
        if (batch.status().code() == StatusCode::kOutOfRange) break;
        co_return batch.status();
      }
      auto deltas = co_await t.model_->evaluate_batch(ps, c.variables(), data->schema(), *batch);
      if (!deltas.ok()) co_return deltas.status();
      if (totals.empty()) {
        totals = std::move(*deltas);
      } else {
        for (std::size_t i = 0; i < totals.size(); ++i) totals[i] += (*deltas)[i];
      }
    }
    if (totals.empty()) co_return absl::InvalidArgumentError("the evaluation data holds no record");
    co_return t.model_->metrics_from(totals);
  }

  Task<StatusOr<model::MetricValues>> evaluate() {
    if (t.options_.eval_mode == EvalMode::kDirect) co_return co_await evaluate_directly();
    co_return co_await evaluate_distributed();
  }

  Task<void> report_progress() {
    const Duration every = t.options_.progress_every;
    progress_at = c.now();
    for (;;) {
      co_await sleep_for(c.executor(), every);
      if (finished) co_return;
      fold_finished();  // a failed closure's error is raised by the program's next join
      Progress p;
      p.epoch = epoch;
      p.epochs = t.options_.epochs;
      p.steps_done = steps_done_in_epoch;
      p.steps_per_epoch = spe;
      const std::int64_t done = steps_folded;
      const double seconds = to_seconds(c.now() - progress_at);
      p.examples_per_second =
          seconds > 0 ? static_cast<double>((done - progress_steps) * t.model_->batch_size()) / seconds : 0;
      p.loss = newest_loss;
      p.now = c.now();
      progress_steps = done;
      progress_at = c.now();
      t.callbacks_.on_progress(p);
    }
  }

  Task<StatusOr<TrainResult>> train() {
    const auto& o = t.options_;
    auto vars = t.model_->build_variables(c.shape().ps, false, exactly_once() ? t.train_.records : 0);
    if (!vars.ok()) co_return vars.status();
    if (c.ps_failure_policy() != PsFailurePolicy::kRaise) set_recovery_source(*vars);
    auto start = restore_or_initialize(o.checkpoints, vars->layouts, vars->optimizer, std::move(vars->initial));
    if (!start.ok()) co_return start.status();
    result.start.steps_per_epoch = spe;
    result.start.start_epoch = resume_epoch(start->step, static_cast<int>(std::min<std::int64_t>(spe, 1 << 30)));
    result.start.restored_from = start->restored_from;
    result.start.restored_iterations = start->step;
    result.start.refused = start->refused;
    if (t.callbacks_.on_start) t.callbacks_.on_start(result.start);
    TWINPS_CO_RETURN_IF_ERROR(co_await c.start(vars->layouts, vars->optimizer, std::move(start->shards)));
    if (t.callbacks_.on_cluster_formed) t.callbacks_.on_cluster_formed();

    // The training data and the model on every worker (built again on a
    // worker that restarts, in this order). The data comes first: a worker
    // shuffles with a stream forked by the resource's id, so the tutorial's
    // data is shuffled as TensorFlow's tutorial program (dataset, then
    // iterator) has it shuffled.
    if (exactly_once()) {
      // Each worker reads all of it once, in order; the coordinator orders it.
      DatasetRequest whole{1, t.model_->batch_size(), 1, false};
      PerWorkerDataset dataset = c.create_per_worker_dataset(t.train_.function, t.train_.args(whole));
      table = c.create_per_worker_resource(kRecordTableFunction, {Value(t.train_.records)}, &dataset.datasets);
    } else {
      DatasetRequest r{c.shape().workers, t.model_->batch_size(), -1, true};
      PerWorkerDataset dataset = c.create_per_worker_dataset(t.train_.function, t.train_.args(r));
      iterator = c.create_per_worker_iterator(dataset);
    }
    model = c.create_per_worker_resource(kModelFunction, model_args(t.model_->spec()));

    last_save_at = c.now();
    result.training_started = result.training_finished = c.now();
    for (epoch = result.start.start_epoch; epoch < o.epochs; ++epoch) {
      TWINPS_CO_RETURN_IF_ERROR(co_await reset_train_metrics());
      const Time epoch_started = c.now();
      steps_done_in_epoch = 0;
      const std::int64_t first_step = first_step_of(epoch);
      const char* fn = exactly_once() ? kTrainSplitStep : kTrainStep;
      for (std::int64_t step = first_step, n = 0; step < spe; step += n) {
        n = closure_steps(step);
        auto rv = co_await c.schedule(fn, train_args(step, n));
        if (!rv.ok()) co_return rv.status();
        if (t.callbacks_.on_scheduled) t.callbacks_.on_scheduled(fn, *rv);
        pending.push_back({*rv, n});
        steps_scheduled += n;
        bool failed = fold_finished();
        if (o.checkpoints && o.checkpoint_every > 0) {
          // Saving every S seconds needs the program to look at the clock as
          // training goes: keep two closures per worker queued rather than
          // the whole epoch, waiting for the oldest.
          const std::size_t most = 2 * static_cast<std::size_t>(c.shape().workers);
          while (!failed && pending.size() > most) {
            (void)co_await pending.front().value.fetch();
            failed = fold_finished();
          }
        }
        if (failed) co_return co_await join_or_internal();
        TWINPS_CO_RETURN_IF_ERROR(co_await maybe_save_within_epoch());
      }
      TWINPS_CO_RETURN_IF_ERROR(co_await join_and_fold());
      EpochResult e;
      e.epoch = epoch;
      TWINPS_CO_RETURN_IF_ERROR(co_await finish_epoch(e));
      if (newest_loss) result.final_loss = *newest_loss;
      e.finished_at = c.now();
      // The epoch on the chief's track of the trace (its training metrics as arguments).
      c.trace().span(c.self(), "program", "epoch", epoch_started, e.finished_at - epoch_started,
                     {TraceArg{"epoch", static_cast<double>(epoch)},
                      TraceArg{"accuracy", e.train.accuracy.value_or(-1)}, TraceArg{"loss", e.train.loss}});
      const double seconds = to_seconds(e.finished_at - epoch_started);
      e.examples_per_second =
          seconds > 0 ? static_cast<double>((spe - first_step) * t.model_->batch_size()) / seconds : 0;
      result.steps_trained += spe - first_step;
      result.training_finished = e.finished_at;
      const bool last = epoch + 1 == o.epochs;
      if (t.eval_ && (last || (o.eval_every_epochs > 0 && (epoch + 1) % o.eval_every_epochs == 0))) {
        auto eval = co_await evaluate();
        if (!eval.ok()) co_return eval.status();
        e.eval = *eval;
        if (last) result.eval = *eval;
      }
      result.epochs.push_back(e);
      if (t.callbacks_.on_epoch) t.callbacks_.on_epoch(e);
      if (o.checkpoints && ((epoch + 1) % o.checkpoint_every_epochs == 0 || last)) {
        auto meta = metadata();
        meta[kEpochKey] = std::to_string(epoch);
        TWINPS_CO_RETURN_IF_ERROR(co_await save(std::move(meta)));
      }
    }
    auto iterations = co_await read_iterations();
    if (!iterations.ok()) co_return iterations.status();
    result.iterations = *iterations;
    if (exactly_once()) {
      auto visits = co_await read_visits();
      if (!visits.ok()) co_return visits.status();
      result.visits = *visits;
    }
    if (t.eval_ && !result.eval) {  // nothing left to train: evaluate what was restored
      auto eval = co_await evaluate();
      if (!eval.ok()) co_return eval.status();
      result.eval = *eval;
    }
    co_return std::move(result);
  }
};

Task<StatusOr<TrainResult>> Trainer::run(ClusterCoordinator& coordinator) {
  TWINPS_CO_RETURN_IF_ERROR(check());
  if (options_.visitation == Visitation::kExactlyOnce && coordinator.ps_failure_policy() != PsFailurePolicy::kRaise)
    co_return absl::InvalidArgumentError(
        "exactly-once visitation needs the ps failure policy raise: a restore or rollback takes applied splits "
        "back, which would leave their examples unvisited");
  if (options_.visitation == Visitation::kExactlyOnce && coordinator.backup_workers() > 0)
    co_return absl::InvalidArgumentError(
        "exactly-once visitation cannot drop gradients: sync mode's backup workers (" +
        std::to_string(coordinator.backup_workers()) + ") drop the late closures' gradients, and their examples "
        "with them");
  Run run(*this, coordinator);
  // Declared after `run`: the progress reporter is destroyed first.
  TaskScope progress(coordinator.executor());
  if (options_.progress_every > 0 && callbacks_.on_progress) progress.spawn(run.report_progress());
  auto result = co_await run.train();
  run.finished = true;
  // The source reads this run's checkpoint manager, which the caller may
  // destroy now: a later recovery must not use it.
  if (coordinator.ps_failure_policy() != PsFailurePolicy::kRaise) coordinator.set_recovery_source(nullptr);
  if (!result.ok()) {
    // The chief's own calls to a ps (metrics, iterations, evaluation,
    // checkpoints) end CANCELLED once the heartbeats give that ps up. The ps's
    // UNAVAILABLE, pending in the coordinator, is what happened (P1): raise it.
    auto pending = co_await coordinator.done();
    if (!pending.ok()) co_return pending.status();
  }
  co_return result;
}

model::LocalEvaluator::VariableValues full_values(const std::vector<VariableLayout>& layouts,
                                                  const std::vector<ShardState>& shards) {
  std::map<ShardId, const ShardState*> by_id;
  for (const auto& s : shards) by_id[s.spec.id] = &s;
  model::LocalEvaluator::VariableValues out;
  for (const auto& layout : layouts) {
    if (layout.kind != VariableKind::kTrainable) continue;
    Matrix full(layout.rows(), layout.cols());
    Eigen::Index row = 0;
    bool complete = true;
    for (const auto& shard : layout.shards) {
      auto it = by_id.find(shard.id);
      if (it == by_id.end() || it->second->value.rows() != shard.rows) {
        complete = false;
        break;
      }
      full.middleRows(row, shard.rows) = it->second->value;
      row += shard.rows;
    }
    if (complete) out.emplace(layout.name, std::move(full));
  }
  return out;
}

}  // namespace twinps::training
