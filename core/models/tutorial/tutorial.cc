#include "core/models/tutorial/tutorial.h"

#include <cmath>

#include "core/variables/initializers.h"
#include "core/variables/partitioner.h"
#include "core/variables/placement.h"
#include "core/worker/step_context.h"

namespace twinps::tutorial {

Lookups make_lookups(const Config& config) {
  auto features = StringLookup::create(kFeatureVocab, 1,
                                       config.mask_token ? std::optional<std::string>("") : std::nullopt);
  auto labels = StringLookup::create(kLabelVocab, /*num_oov_indices=*/0);
  return Lookups{*features, *labels};
}

std::vector<Example> generate_examples(int n, const Lookups& lookups, RandomStream& random) {
  std::vector<Example> out;
  out.reserve(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) {
    Example e;
    bool avenger = false;
    for (std::size_t pick : random.sample(kFeatureVocab.size(), 3)) {
      avenger |= kFeatureVocab[pick] == "avenger";
      e.ids.push_back(lookups.features.lookup(kFeatureVocab[pick]));
    }
    e.label = static_cast<float>(lookups.labels.lookup(avenger ? "yes" : "no"));
    out.push_back(std::move(e));
  }
  return out;
}

std::vector<Example> eval_examples(const Config& config) {
  RandomStream data(config.data_seed + 1);
  return generate_examples(config.eval_examples, make_lookups(config), data);
}

StatusOr<Model> build_model(int num_ps, const Config& config) {
  PartitionerPtr partitioner;
  if (config.num_shards > 1) {
    auto p = FixedShardsPartitioner::create(config.num_shards);
    if (!p.ok()) return p.status();
    partitioner = *p;
  }
  VariablePlacer placer(num_ps, partitioner);
  RandomStream init(config.init_seed);
  Model model;
  auto add = [&](const std::string& name, Shape shape, VariableKind kind, Initializer initializer) -> Status {
    auto layout = placer.create(name, shape, kind);
    if (!layout.ok()) return layout.status();
    if (kind == VariableKind::kCounter) {
      for (auto& s : counter_shard_states(*layout)) model.initial.push_back(std::move(s));
    } else {
      RandomStream r = init.fork(name);
      for (auto& s : shard_states(*layout, initial_value(initializer, shape, r))) model.initial.push_back(std::move(s));
    }
    return absl::OkStatus();
  };
  const std::int64_t vocab = make_lookups(config).features.vocabulary_size();
  const std::int64_t dim = config.embedding_dim;
  // Creation order decides round-robin placement (spec V1), as in the tutorial.
  TWINPS_RETURN_IF_ERROR(add(kEmbedding, {vocab, dim}, VariableKind::kTrainable, Initializer::uniform(-0.05, 0.05)));
  TWINPS_RETURN_IF_ERROR(add(kKernel, {dim, 1}, VariableKind::kTrainable, Initializer::glorot_uniform()));
  TWINPS_RETURN_IF_ERROR(add(kBias, {1}, VariableKind::kTrainable, Initializer::zeros()));
  TWINPS_RETURN_IF_ERROR(add(kIterations, {}, VariableKind::kCounter, Initializer::zeros()));
  TWINPS_RETURN_IF_ERROR(add(kAccuracyTotal, {}, VariableKind::kAccumulator, Initializer::zeros()));
  TWINPS_RETURN_IF_ERROR(add(kAccuracyCount, {}, VariableKind::kAccumulator, Initializer::zeros()));
  TWINPS_RETURN_IF_ERROR(add(kEvalAccuracyTotal, {}, VariableKind::kAccumulator, Initializer::zeros()));
  TWINPS_RETURN_IF_ERROR(add(kEvalAccuracyCount, {}, VariableKind::kAccumulator, Initializer::zeros()));
  model.variables = placer.variables();
  model.optimizer.kind = OptimizerConfig::Kind::kRmsprop;
  model.optimizer.learning_rate = LearningRateSchedule::constant(config.learning_rate);
  return model;
}

namespace {

// The network on one batch: gathered embedding rows [batch*features x dim]
// -> mean per example -> logits = h W + b.
struct Forward {
  Matrix hidden;  // [batch x dim]
  Matrix logits;  // [batch x 1]
};

Forward forward(const Matrix& gathered, Eigen::Index batch, Eigen::Index features, const Matrix& kernel, float bias) {
  Forward f;
  f.hidden = Matrix::Zero(batch, gathered.cols());
  for (Eigen::Index b = 0; b < batch; ++b)
    f.hidden.row(b) = gathered.middleRows(b * features, features).colwise().mean();
  f.logits = (f.hidden * kernel).array() + bias;
  return f;
}

float sigmoid(float z) { return 1.0f / (1.0f + std::exp(-z)); }

// Accuracy as Keras's Accuracy metric on cast(pred > 0.5) against the labels.
float correct_predictions(const Matrix& logits, const Matrix& labels) {
  float correct = 0;
  for (Eigen::Index b = 0; b < logits.rows(); ++b)
    correct += ((sigmoid(logits(b, 0)) > 0.5f ? 1.0f : 0.0f) == labels(b, 0)) ? 1.0f : 0.0f;
  return correct;
}

RowIds flatten_ids(const IdMatrix& ids) { return RowIds(ids.data(), ids.data() + ids.size()); }

struct Variables {
  const VariableLayout *embedding, *kernel, *bias, *iterations, *acc_total, *acc_count, *eval_total, *eval_count;
};
StatusOr<Variables> find_variables(StepContext& ctx) {
  Variables v{};
  struct Wanted {
    const VariableLayout** slot;
    const char* name;
  };
  const Wanted wanted[] = {{&v.embedding, kEmbedding},       {&v.kernel, kKernel},
                           {&v.bias, kBias},                 {&v.iterations, kIterations},
                           {&v.acc_total, kAccuracyTotal},   {&v.acc_count, kAccuracyCount},
                           {&v.eval_total, kEvalAccuracyTotal}, {&v.eval_count, kEvalAccuracyCount}};
  for (auto& [slot, name] : wanted) {
    auto l = ctx.variable(name);
    if (!l.ok()) return l.status();
    *slot = *l;
  }
  return v;
}

Matrix scalar(float v) { return Matrix::Constant(1, 1, v); }

// The parameters a batch needs: its embedding rows, the kernel and the bias.
struct StepReads {
  ParameterClient::PullBatch batch;
  int embedding = 0, kernel = 0, bias = 0;
};
StepReads reads_for(const Variables& vars, const RowIds& ids) {
  StepReads r;
  r.embedding = r.batch.rows(*vars.embedding, ids);
  r.kernel = r.batch.dense(*vars.kernel);
  r.bias = r.batch.dense(*vars.bias);
  return r;
}

// Forward and backward on one batch with pulled parameters: the loss, and
// the updates to push (gradients, the accuracy metric, the step counter).
struct StepOutput {
  double loss = 0;
  ParameterClient::PushBatch push;
};
StepOutput forward_backward(const Variables& vars, const Batch& batch, const RowIds& ids,
                            const ParameterClient::PullResult& pulled, const StepReads& reads) {
  const Matrix& kernel = pulled.value(reads.kernel);
  const Eigen::Index n = batch.size(), features = batch.ids.cols();
  Forward f = forward(pulled.value(reads.embedding), n, features, kernel, pulled.value(reads.bias)(0, 0));
  // Binary cross-entropy on the logits (numerically stable form), averaged
  // over the global batch as tf.nn.compute_average_loss does.
  StepOutput out;
  Matrix dlogits(n, 1);
  for (Eigen::Index b = 0; b < n; ++b) {
    const float z = f.logits(b, 0), y = batch.labels(b, 0);
    out.loss += std::max(z, 0.0f) - z * y + std::log1p(std::exp(-std::abs(z)));
    dlogits(b, 0) = (sigmoid(z) - y) / static_cast<float>(n);
  }
  out.loss /= static_cast<double>(n);
  const Matrix dhidden = dlogits * kernel.transpose();  // [batch x dim]
  Matrix drows(n * features, dhidden.cols());
  for (Eigen::Index b = 0; b < n; ++b)
    for (Eigen::Index k = 0; k < features; ++k) drows.row(b * features + k) = dhidden.row(b) / static_cast<float>(features);
  out.push.gradient_rows(*vars.embedding, ids, std::move(drows));
  out.push.gradient(*vars.kernel, f.hidden.transpose() * dlogits);
  out.push.gradient(*vars.bias, scalar(dlogits.sum()));
  out.push.add(*vars.acc_total, scalar(correct_predictions(f.logits, batch.labels)));
  out.push.add(*vars.acc_count, scalar(static_cast<float>(n)));
  out.push.add_counter(*vars.iterations, 1);
  return out;
}

// args: [iterator, steps (optional, default 1)]. Several steps per closure is
// TensorFlow's steps_per_execution: it saves the per-closure overhead (L6).
// Between steps the next batch's pull rides on this step's push (one round
// trip per ps per step). Returns the last step's loss.
Task<StatusOr<Value>> train_step(StepContext& ctx) {
  auto vars = find_variables(ctx);
  if (!vars.ok()) co_return vars.status();
  auto iterator = ctx.resource<IteratorResource>(0);
  if (!iterator.ok()) co_return iterator.status();
  std::int64_t steps = 1;
  if (ctx.args().size() > 1) {
    const auto* n = std::get_if<std::int64_t>(&ctx.args()[1]);
    if (!n || *n < 1) co_return absl::InvalidArgumentError("the step count (argument 1) must be a positive integer");
    steps = *n;
  }
  auto batch = (*iterator)->next();
  if (!batch.ok()) co_return batch.status();
  RowIds ids = flatten_ids(batch->ids);
  StepReads reads = reads_for(*vars, ids);
  auto pulled = co_await ctx.ps().pull(reads.batch);
  if (!pulled.ok()) co_return pulled.status();
  double loss = 0;
  for (std::int64_t i = 0;; ++i) {
    co_await ctx.compute(ComputeCost{kTrainStep, batch->size(), 0});
    StepOutput out = forward_backward(*vars, *batch, ids, *pulled, reads);
    loss = out.loss;
    if (i + 1 == steps) {
      Status pushed = co_await ctx.ps().push(out.push);
      if (!pushed.ok()) co_return pushed;
      break;
    }
    batch = (*iterator)->next();
    if (!batch.ok()) co_return batch.status();
    ids = flatten_ids(batch->ids);
    reads = reads_for(*vars, ids);
    pulled = co_await ctx.ps().push_pull(out.push, reads.batch);
    if (!pulled.ok()) co_return pulled.status();
  }
  co_return Value(loss);
}

Task<StatusOr<Value>> eval_step(StepContext& ctx) {
  auto vars = find_variables(ctx);
  if (!vars.ok()) co_return vars.status();
  auto iterator = ctx.resource<IteratorResource>(0);
  if (!iterator.ok()) co_return iterator.status();
  auto batch = (*iterator)->next();
  if (!batch.ok()) co_return batch.status();
  const RowIds ids = flatten_ids(batch->ids);
  ParameterClient::PullBatch pull;
  const int h_emb = pull.rows(*vars->embedding, ids);
  const int h_kernel = pull.dense(*vars->kernel);
  const int h_bias = pull.dense(*vars->bias);
  auto pulled = co_await ctx.ps().pull(pull);
  if (!pulled.ok()) co_return pulled.status();
  co_await ctx.compute(ComputeCost{kEvalStep, batch->size(), 0});
  Forward f = forward(pulled->value(h_emb), batch->size(), batch->ids.cols(), pulled->value(h_kernel),
                      pulled->value(h_bias)(0, 0));
  ParameterClient::PushBatch push;
  push.add(*vars->eval_total, scalar(correct_predictions(f.logits, batch->labels)));
  push.add(*vars->eval_count, scalar(static_cast<float>(batch->size())));
  Status pushed = co_await ctx.ps().push(push);
  if (!pushed.ok()) co_return pushed;
  co_return Value{};
}

// args: [data seed, examples, batch size, shuffle buffer, repeat (-1 forever)]
StatusOr<std::unique_ptr<Resource>> make_dataset(ResourceContext& ctx) {
  if (ctx.args.size() != 5) return absl::InvalidArgumentError("tutorial datasets take 5 arguments");
  for (const auto& a : ctx.args)
    if (!std::holds_alternative<std::int64_t>(a)) return absl::InvalidArgumentError("tutorial dataset arguments are integers");
  auto arg = [&](std::size_t i) { return std::get<std::int64_t>(ctx.args[i]); };
  Config config;
  RandomStream data(static_cast<std::uint64_t>(arg(0)));
  auto examples = std::make_shared<std::vector<Example>>(
      generate_examples(static_cast<int>(arg(1)), make_lookups(config), data));
  DatasetOptions o;
  o.batch_size = arg(2);
  o.shuffle_buffer = arg(3);
  o.repeat = arg(4);
  auto ds = InMemoryDataset::create(std::move(examples), o);
  if (!ds.ok()) return ds.status();
  return std::unique_ptr<Resource>(std::move(*ds));
}

Task<StatusOr<float>> read_accuracy(ClusterCoordinator& c, const char* total_name, const char* count_name) {
  ParameterClient ps = c.parameter_client();
  ParameterClient::PullBatch pull;
  const int t = pull.dense(*c.variables().find(total_name));
  const int n = pull.dense(*c.variables().find(count_name));
  auto r = co_await ps.pull(pull);
  if (!r.ok()) co_return r.status();
  const float count = r->value(n)(0, 0);
  co_return count > 0 ? r->value(t)(0, 0) / count : 0.0f;
}

Task<Status> reset_metric(ClusterCoordinator& c, const char* total_name, const char* count_name) {
  ParameterClient ps = c.parameter_client();
  ParameterClient::PushBatch push;
  push.assign(*c.variables().find(total_name), scalar(0));
  push.assign(*c.variables().find(count_name), scalar(0));
  co_return co_await ps.push(push);
}

Task<StatusOr<std::int64_t>> read_iterations(ClusterCoordinator& c) {
  ParameterClient ps = c.parameter_client();
  ParameterClient::PullBatch pull;
  const int h = pull.counter(*c.variables().find(kIterations));
  auto r = co_await ps.pull(pull);
  if (!r.ok()) co_return r.status();
  co_return r->counter(h);
}

}  // namespace

void register_functions(FunctionRegistry& registry) {
  register_dataset_functions(registry);
  registry.add_resource(kTrainDataset, make_dataset);
  registry.add_resource(kEvalDataset, make_dataset);
  registry.add_step(kTrainStep, train_step);
  registry.add_step(kEvalStep, eval_step);
}

double accuracy(const Matrix& embedding, const Matrix& kernel, float bias, const std::vector<Example>& examples) {
  if (examples.empty()) return 0.0;
  const auto features = static_cast<Eigen::Index>(examples.front().ids.size());
  Matrix gathered(static_cast<Eigen::Index>(examples.size()) * features, embedding.cols());
  Matrix labels(static_cast<Eigen::Index>(examples.size()), 1);
  for (std::size_t i = 0; i < examples.size(); ++i) {
    for (Eigen::Index k = 0; k < features; ++k)
      gathered.row(static_cast<Eigen::Index>(i) * features + k) = embedding.row(examples[i].ids[static_cast<std::size_t>(k)]);
    labels(static_cast<Eigen::Index>(i), 0) = examples[i].label;
  }
  Forward f = forward(gathered, labels.rows(), features, kernel, bias);
  return correct_predictions(f.logits, labels) / static_cast<double>(labels.rows());
}

Task<StatusOr<double>> evaluate_directly(ClusterCoordinator& c, std::vector<Example> examples) {
  ParameterClient ps = c.parameter_client();
  ParameterClient::PullBatch pull;
  const int h_emb = pull.dense(*c.variables().find(kEmbedding));
  const int h_kernel = pull.dense(*c.variables().find(kKernel));
  const int h_bias = pull.dense(*c.variables().find(kBias));
  auto r = co_await ps.pull(pull);
  if (!r.ok()) co_return r.status();
  co_return accuracy(r->value(h_emb), r->value(h_kernel), r->value(h_bias)(0, 0), examples);
}

Task<StatusOr<Result>> train(ClusterCoordinator& c, Config config, int start_epoch,
                             std::function<void(const EpochReport&)> on_epoch, AfterEpoch after_epoch,
                             AfterSchedule after_schedule, OnScheduled on_scheduled) {
  Result result;
  auto scheduled = [&](const char* fn, const RemoteValue& rv) {
    if (on_scheduled) on_scheduled(fn, rv);
  };
  std::int64_t steps_scheduled = 0;
  auto dataset_args = [&](std::uint64_t seed, int n, int shuffle_buffer) {
    return std::vector<Value>{Value(static_cast<std::int64_t>(seed)), Value(std::int64_t{n}),
                              Value(std::int64_t{config.batch_size}), Value(std::int64_t{shuffle_buffer}),
                              Value(std::int64_t{-1})};
  };
  // shuffle(200).batch(8).repeat(), built on every worker from the same examples.
  PerWorkerDataset dataset =
      c.create_per_worker_dataset(kTrainDataset, dataset_args(config.data_seed, config.num_examples, config.shuffle_buffer));
  PerWorkerValues iterator = c.create_per_worker_iterator(dataset);

  result.training_started = c.now();
  for (int epoch = start_epoch; epoch < config.epochs; ++epoch) {
    const Time epoch_start = c.now();
    TWINPS_CO_RETURN_IF_ERROR(co_await reset_metric(c, kAccuracyTotal, kAccuracyCount));
    for (int step = 0; step < config.steps_per_epoch; step += config.steps_per_execution) {
      const int steps = std::min(config.steps_per_execution, config.steps_per_epoch - step);
      std::vector<Arg> call_args{iterator, Value(std::int64_t{steps})};
      auto rv = co_await c.schedule(kTrainStep, std::move(call_args));
      if (!rv.ok()) co_return rv.status();
      scheduled(kTrainStep, *rv);
      steps_scheduled += steps;
      if (after_schedule) TWINPS_CO_RETURN_IF_ERROR(co_await after_schedule(c, steps_scheduled));
    }
    TWINPS_CO_RETURN_IF_ERROR(co_await c.join());
    auto accuracy = co_await read_accuracy(c, kAccuracyTotal, kAccuracyCount);
    if (!accuracy.ok()) co_return accuracy.status();
    auto iterations = co_await read_iterations(c);
    if (!iterations.ok()) co_return iterations.status();
    EpochReport report{epoch, *accuracy, *iterations, c.now()};
    c.trace().span(c.self(), "program", "epoch", epoch_start, c.now() - epoch_start,
                   {TraceArg{"epoch", static_cast<double>(epoch)}, TraceArg{"accuracy", *accuracy}});
    result.training_finished = report.finished_at;
    result.steps_trained += config.steps_per_epoch;
    result.epochs.push_back(report);
    if (on_epoch) on_epoch(report);
    if (after_epoch) TWINPS_CO_RETURN_IF_ERROR(co_await after_epoch(c, report));
  }

  std::vector<Arg> call_args{iterator};
  auto loss_rv = co_await c.schedule(kTrainStep, std::move(call_args));
  if (!loss_rv.ok()) co_return loss_rv.status();
  scheduled(kTrainStep, *loss_rv);
  TWINPS_CO_RETURN_IF_ERROR(co_await c.join());
  auto loss = co_await loss_rv->fetch();
  if (!loss.ok()) co_return loss.status();
  result.final_loss = std::get<double>(*loss);

  // Direct inline evaluation on the coordinator.
  auto direct = co_await evaluate_directly(c, eval_examples(config));
  if (!direct.ok()) co_return direct.status();
  result.direct_eval_accuracy = *direct;

  // Distributed inline evaluation: eval closures on workers, the metric on a ps.
  TWINPS_CO_RETURN_IF_ERROR(co_await reset_metric(c, kEvalAccuracyTotal, kEvalAccuracyCount));
  PerWorkerDataset eval_dataset =
      c.create_per_worker_dataset(kEvalDataset, dataset_args(config.data_seed + 1, config.eval_examples, 0));
  PerWorkerValues eval_iterator = c.create_per_worker_iterator(eval_dataset);
  for (int i = 0; i < config.eval_steps; ++i) {
    std::vector<Arg> call_args{eval_iterator};
    auto rv = co_await c.schedule(kEvalStep, std::move(call_args));
    if (!rv.ok()) co_return rv.status();
    scheduled(kEvalStep, *rv);
  }
  TWINPS_CO_RETURN_IF_ERROR(co_await c.join());
  auto distributed = co_await read_accuracy(c, kEvalAccuracyTotal, kEvalAccuracyCount);
  if (!distributed.ok()) co_return distributed.status();
  result.distributed_eval_accuracy = *distributed;
  co_return result;
}

}  // namespace twinps::tutorial
