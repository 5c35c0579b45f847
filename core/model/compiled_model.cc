#include "core/model/compiled_model.h"

#include <cmath>
#include <map>

#include "core/data/dataset.h"
#include "core/model/spec_convert.h"
#include "core/ps/optimizer.h"
#include "core/variables/auto_placement.h"
#include "core/variables/placement.h"
#include "core/worker/step_context.h"

namespace twinps::model {

namespace {

Matrix scalar(double v) { return Matrix::Constant(1, 1, static_cast<float>(v)); }

std::string metric_name(spec::Metric m) {
  switch (m) {
    case spec::LOSS: return "loss";
    case spec::ACCURACY: return "accuracy";
    case spec::AUC: return "auc";
    default: return "metric";
  }
}

std::string phase_prefix(Phase phase) { return phase == Phase::kEval ? "eval_" : ""; }

}  // namespace

namespace {

// sum over ranks r in [a, b) of r^-s, approximated by the integral over
// [a - 1/2, b - 1/2] (midpoint rule; very accurate where r^-s is smooth,
// i.e. away from the first ranks, which are summed exactly).
double zipf_mass(double a, double b, double s) {
  const double lo = a - 0.5, hi = b - 0.5;
  if (std::abs(s - 1) < 1e-12) return std::log(hi / lo);
  return (std::pow(hi, 1 - s) - std::pow(lo, 1 - s)) / (1 - s);
}

}  // namespace

double expected_distinct_rows(std::int64_t rows, double draws, double zipf_exponent) {
  if (rows <= 0 || draws <= 0) return 0;
  const double n = static_cast<double>(rows);
  // E[distinct] = sum over rows of P(drawn at least once) = sum 1 - (1 - p_r)^draws.
  auto seen = [&](double p) { return -std::expm1(draws * std::log1p(-p)); };
  if (zipf_exponent <= 0) return n * seen(1.0 / n);
  // The first ranks exactly; beyond them, geometric buckets of ranks whose
  // probabilities hardly differ (a tenth of a percent apart), so a table of
  // 10^8 rows costs a few thousand terms rather than 10^8.
  const std::int64_t exact = std::min<std::int64_t>(rows, 1 << 16);
  const double s = zipf_exponent;
  struct Bucket {
    double first, end;  // ranks [first, end), 1-based
  };
  std::vector<Bucket> tail;
  for (double a = static_cast<double>(exact) + 1; a <= n;) {
    const double b = std::min(n + 1, std::max(a + 1, std::floor(a * 1.001)));
    tail.push_back({a, b});
    a = b;
  }
  double total = 0;
  for (std::int64_t r = 1; r <= exact; ++r) total += std::pow(static_cast<double>(r), -s);
  for (const Bucket& b : tail) total += zipf_mass(b.first, b.end, s);
  double distinct = 0;
  for (std::int64_t r = 1; r <= exact; ++r) distinct += seen(std::pow(static_cast<double>(r), -s) / total);
  for (const Bucket& b : tail) {
    const double count = b.end - b.first;
    distinct += count * seen(zipf_mass(b.first, b.end, s) / total / count);
  }
  return distinct;
}

StatusOr<std::shared_ptr<const CompiledModel>> CompiledModel::compile(const spec::ModelSpec& spec,
                                                                      std::string prefix) {
  auto graph = ModelGraph::build(spec);
  if (!graph.ok()) return graph.status();
  auto model = std::shared_ptr<CompiledModel>(new CompiledModel(*std::move(graph), std::move(prefix)));

  // Metrics in the order listed (placement follows creation order), the loss always.
  for (int m : spec.metric()) model->metrics_.push_back(static_cast<spec::Metric>(m));
  bool has_loss = false;
  for (auto m : model->metrics_) has_loss |= m == spec::LOSS;
  if (!has_loss) model->metrics_.push_back(spec::LOSS);

  // The optimizer of each variable: the group naming the variable, else its
  // layer's group, else the default group.
  std::map<std::string, OptimizerConfig> by_layer, by_variable;
  std::optional<OptimizerConfig> fallback;
  for (const auto& g : spec.optimizer()) {
    auto config = optimizer_config(g);
    if (!config.ok()) return config.status();
    if (g.layer_size() == 0 && g.variable_size() == 0) fallback = *config;
    for (const auto& layer : g.layer()) by_layer[layer] = *config;
    for (const auto& variable : g.variable()) by_variable[variable] = *config;
  }
  if (spec.optimizer_size() == 0) fallback = default_optimizer_config();
  for (const auto& v : model->graph_->variables()) {
    const std::string& layer = spec.layer(v.layer).name();
    auto it = by_layer.find(layer);
    if (auto own = by_variable.find(v.name); own != by_variable.end()) {
      model->optimizer_of_variable_.push_back(own->second);
    } else if (it != by_layer.end()) {
      model->optimizer_of_variable_.push_back(it->second);
    } else if (fallback) {
      model->optimizer_of_variable_.push_back(*fallback);
    } else {
      return absl::InvalidArgumentError("no optimizer updates layer \"" + layer + "\"");
    }
  }
  model->cost_ = model->price();
  return std::shared_ptr<const CompiledModel>(std::move(model));
}

std::vector<std::string> CompiledModel::metric_variables(Phase phase) const {
  std::vector<std::string> out;
  const std::string p = phase_prefix(phase);
  for (auto m : metrics_) {
    if (m == spec::AUC) {
      out.push_back(p + "auc/confusion");
      out.push_back(p + "auc/totals");
    } else {
      out.push_back(p + metric_name(m) + "/total");
      out.push_back(p + metric_name(m) + "/count");
    }
  }
  return out;
}

// One variable build_variables() creates, before it is placed.
struct CompiledModel::PendingVariable {
  std::string name;
  Shape shape;
  VariableKind kind;
  Initializer initializer;
  PartitionerPtr partitioner;
  VariableDemand demand;  // what it costs a ps per step (automatic placement)
};

namespace {

VariableDemand demand_of(const std::string& name, const Shape& shape, const PartitionerPtr& partitioner) {
  VariableDemand d;
  d.name = name;
  d.shape = shape;
  if (partitioner && !shape.empty() && shape[0] > 0) {
    const std::vector<std::int64_t> parts = partitioner->partition(shape, 4);
    d.shards = parts.empty() ? 1 : std::max<std::int64_t>(1, parts[0]);
  }
  return d;
}

}  // namespace

StatusOr<CompiledModel::Variables> CompiledModel::build_variables(int num_ps, bool meta,
                                                                  std::int64_t visit_rows) const {
  // The cluster's optimizer is the first variable's; a variable whose group
  // has another gets it as its own (on its layout, so on its shards and in
  // checkpoints). A spec whose groups agree so creates exactly what a
  // single-optimizer cluster would.
  Variables out;
  out.optimizer = optimizer_of_variable_.empty() ? default_optimizer_config() : optimizer_of_variable_.front();
  std::map<std::string, OptimizerConfig> own_optimizer;
  for (std::size_t i = 0; i < optimizer_of_variable_.size(); ++i)
    if (!(optimizer_of_variable_[i] == out.optimizer))
      own_optimizer[graph_->variables()[i].name] = optimizer_of_variable_[i];
  PartitionerPtr model_partitioner;
  if (spec().has_partitioner()) {
    auto p = make_partitioner(spec().partitioner());
    if (!p.ok()) return p.status();
    model_partitioner = *p;
  }
  auto pending = variables_to_create(model_partitioner);
  std::vector<VariablePlan> plan;
  if (spec().placement() == spec::AUTO) {
    std::vector<VariableDemand> demands;
    for (const auto& v : pending) demands.push_back(v.demand);
    auto made = plan_auto_placement(demands, num_ps);
    if (!made.ok()) return made.status();
    plan = std::move(*made);
  }
  VariablePlacer placer(num_ps, model_partitioner);
  RandomStream init(spec().init_seed());
  for (std::size_t i = 0; i < pending.size(); ++i) {
    const PendingVariable& v = pending[i];
    placer.set_partitioner(v.partitioner);
    auto layout = plan.empty() ? placer.create(v.name, v.shape, v.kind)
                               : placer.create_placed(v.name, v.shape, v.kind, plan[i].shard_rows, plan[i].shard_ps);
    if (!layout.ok()) return layout.status();
    if (auto own = own_optimizer.find(v.name); own != own_optimizer.end()) layout->optimizer = own->second;
    if (v.kind == VariableKind::kCounter) {
      for (auto& s : counter_shard_states(*layout)) out.initial.push_back(std::move(s));
    } else if (meta) {
      for (auto& s : meta_shard_states(*layout)) out.initial.push_back(std::move(s));
    } else {
      RandomStream r = init.fork(v.name);
      for (auto& s : shard_states(*layout, initial_value(v.initializer, v.shape, r))) out.initial.push_back(std::move(s));
    }
  }
  if (visit_rows > 0) {
    // One block, whatever the partitioners: the trainer reads it whole.
    placer.set_partitioner(nullptr);
    auto visits = placer.create(kVisits, {visit_rows, 1}, VariableKind::kAccumulator);
    if (!visits.ok()) return visits.status();
    if (meta) {
      for (auto& s : meta_shard_states(*visits)) out.initial.push_back(std::move(s));
    } else {
      for (auto& s : shard_states(*visits, Matrix::Zero(visit_rows, 1))) out.initial.push_back(std::move(s));
    }
  }
  out.layouts = placer.variables();
  for (auto& layout : out.layouts)
    if (auto own = own_optimizer.find(layout.name); own != own_optimizer.end()) layout.optimizer = own->second;
  return out;
}

// The graph's variables, then `iterations`, then the metrics, in creation
// order, each with what it costs a ps per step: a graph variable is pulled
// and updated every train step (an embedding by its lookups, with its
// declared skew); `iterations` and the training metrics only receive adds;
// the evaluation metrics are not used by training steps.
std::vector<CompiledModel::PendingVariable> CompiledModel::variables_to_create(const PartitionerPtr& model_partitioner) const {
  std::vector<PendingVariable> out;
  auto add = [&](const std::string& name, const Shape& shape, VariableKind kind, const Initializer& initializer,
                 const PartitionerPtr& partitioner) -> VariableDemand& {
    out.push_back({name, shape, kind, initializer, partitioner, demand_of(name, shape, partitioner)});
    return out.back().demand;
  };
  for (std::size_t i = 0; i < graph_->variables().size(); ++i) {
    const auto& v = graph_->variables()[i];
    VariableDemand& d = add(v.name, v.shape, VariableKind::kTrainable, v.initializer,
                            v.has_own_partitioner ? v.partitioner : model_partitioner);
    if (v.embedding) {
      d.rows_per_step = std::max<std::int64_t>(1, std::llround(cost_.variables[i].lookups_per_step));
      d.zipf_exponent = v.zipf_exponent;
    }
  }
  // Counters and metrics are never sharded: they are a few floats each.
  add(kIterations, {}, VariableKind::kCounter, Initializer::zeros(), nullptr).pulled = false;
  const auto thresholds = static_cast<std::int64_t>(spec().auc_thresholds());
  for (Phase phase : {Phase::kTrain, Phase::kEval}) {
    const std::string p = phase_prefix(phase);
    auto metric = [&](const std::string& name, const Shape& shape) {
      VariableDemand& d = add(p + name, shape, VariableKind::kAccumulator, Initializer::zeros(), nullptr);
      d.pulled = false;
      d.per_step = phase == Phase::kTrain;
    };
    for (auto m : metrics_) {
      if (m == spec::AUC) {
        metric("auc/confusion", {2, thresholds});
        metric("auc/totals", {1, 2});
      } else {
        metric(metric_name(m) + "/total", {});
        metric(metric_name(m) + "/count", {});
      }
    }
  }
  return out;
}

// ---------------------------------------------------------------- steps

struct CompiledModel::StepVariables {
  std::vector<const VariableLayout*> params;  // per graph variable
  const VariableLayout* iterations = nullptr;
  std::vector<const VariableLayout*> metrics;  // metric_variables(phase), in order
};

StatusOr<CompiledModel::StepVariables> CompiledModel::find_variables(const VariableLookup& lookup,
                                                                     Phase phase) const {
  StepVariables out;
  auto find = [&](const std::string& name) -> StatusOr<const VariableLayout*> {
    if (const auto* v = lookup(name)) return v;
    return absl::InvalidArgumentError("no variable named \"" + name +
                                      "\" was created (was the cluster started with this model's variables?)");
  };
  for (const auto& v : graph_->variables()) {
    auto layout = find(v.name);
    if (!layout.ok()) return layout.status();
    if ((*layout)->shape != v.shape)
      return absl::InvalidArgumentError("variable \"" + v.name + "\" is " + shape_string((*layout)->shape) +
                                        " on the parameter servers; the model needs " + shape_string(v.shape));
    out.params.push_back(*layout);
  }
  auto iterations = find(kIterations);
  if (!iterations.ok()) return iterations.status();
  out.iterations = *iterations;
  for (const auto& name : metric_variables(phase)) {
    auto layout = find(name);
    if (!layout.ok()) return layout.status();
    out.metrics.push_back(*layout);
  }
  return out;
}

namespace {

// A step's reads: every dense variable whole, each embedding's distinct rows.
struct Reads {
  ParameterClient::PullBatch pull;
  std::vector<int> handles;  // per graph variable
};

Reads reads_for(const ModelGraph& graph, const std::vector<const VariableLayout*>& layouts,
                const std::vector<EmbeddingLayer::Lookup>& lookups) {
  Reads r;
  for (std::size_t v = 0; v < layouts.size(); ++v)
    r.handles.push_back(graph.variables()[v].embedding ? r.pull.rows(*layouts[v], lookups[v].rows)
                                                       : r.pull.dense(*layouts[v]));
  return r;
}

ModelGraph::Params params_from(const ParameterClient::PullResult& pulled, const Reads& reads,
                               std::vector<EmbeddingLayer::Lookup> lookups) {
  ModelGraph::Params p;
  for (int h : reads.handles) p.values.push_back(pulled.value(h));
  p.lookups = std::move(lookups);
  return p;
}

// The variables a step function can address.
CompiledModel::VariableLookup in_step(StepContext& ctx) {
  return [&ctx](const std::string& name) -> const VariableLayout* {
    auto v = ctx.variable(name);
    return v.ok() ? *v : nullptr;
  };
}

// One batch, mapped and planned.
struct PreparedBatch {
  Features features;
  std::vector<EmbeddingLayer::Lookup> lookups;
};

}  // namespace

Task<StatusOr<Value>> CompiledModel::train(StepContext& ctx) const {
  auto iterator = ctx.resource<data::RecordIteratorResource>(0);
  if (!iterator.ok()) co_return iterator.status();
  std::int64_t steps = 1;
  if (ctx.args().size() > 1) {
    const auto* n = std::get_if<std::int64_t>(&ctx.args()[1]);
    if (!n || *n < 1) co_return absl::InvalidArgumentError("the step count (argument 1) must be a positive integer");
    steps = *n;
  }
  auto loss = co_await run_train_steps(ctx, **iterator, steps);
  if (!loss.ok()) co_return loss.status();
  co_return Value(*loss);
}

Task<StatusOr<double>> CompiledModel::run_train_steps(StepContext& ctx, data::RecordIteratorResource& iterator,
                                                      std::int64_t steps, const StepPushHook& add_to_push) const {
  auto vars = find_variables(in_step(ctx), Phase::kTrain);
  if (!vars.ok()) co_return vars.status();
  auto next_batch = [&]() -> StatusOr<PreparedBatch> {
    auto batch = iterator.next();
    if (!batch.ok()) return batch.status();
    auto features = graph_->features().map(iterator.schema(), *batch);
    if (!features.ok()) return features.status();
    PreparedBatch b{*std::move(features), {}};
    b.lookups = graph_->plan_lookups(b.features);
    return b;
  };

  auto batch = next_batch();
  if (!batch.ok()) co_return batch.status();
  Reads reads = reads_for(*graph_, vars->params, batch->lookups);
  auto pulled = co_await ctx.ps().pull(reads.pull);
  if (!pulled.ok()) co_return pulled.status();
  double loss = 0;
  for (std::int64_t i = 0;; ++i) {
    const Features& f = batch->features;
    std::vector<KernelWork> kernels = graph_->train_kernels(f.batch);
    if (const auto read = iterator.read_kernel(); !read.empty()) kernels.push_back(graph_->read_kernel(read, f.batch));
    co_await ctx.compute(ComputeCost{"model/train_step", f.batch, graph_->train_flops(f.batch), kernels});
    const ModelGraph::Params params = params_from(*pulled, reads, std::move(batch->lookups));
    RandomStream step_random = ctx.random().fork("step", static_cast<std::uint64_t>(i));
    ModelGraph::Tape tape;
    const Matrix& logits = graph_->forward(f, params, tape, ForwardMode{true, &step_random});
    const LossResult l = compute_loss(graph_->loss(), logits, f.labels);
    std::vector<Matrix> grads = graph_->backward(f, params, tape, l.dlogits);
    loss = l.loss;

    ParameterClient::PushBatch push;
    for (std::size_t v = 0; v < grads.size(); ++v) {
      if (graph_->variables()[v].embedding) {
        push.gradient_rows(*vars->params[v], params.lookups[v].rows, std::move(grads[v]));
      } else {
        push.gradient(*vars->params[v], std::move(grads[v]));
      }
    }
    std::vector<Matrix> deltas = metric_deltas(logits, f.labels, l.loss);
    for (std::size_t m = 0; m < deltas.size(); ++m) push.add(*vars->metrics[m], std::move(deltas[m]));
    push.add_counter(*vars->iterations, 1);
    if (add_to_push) add_to_push(i, push);

    if (i + 1 == steps) {
      Status pushed = co_await ctx.ps().push(std::move(push));
      if (!pushed.ok()) co_return pushed;
      break;
    }
    batch = next_batch();
    if (!batch.ok()) co_return batch.status();
    reads = reads_for(*graph_, vars->params, batch->lookups);
    pulled = co_await ctx.ps().push_pull(std::move(push), reads.pull);
    if (!pulled.ok()) co_return pulled.status();
  }
  co_return loss;
}

Task<StatusOr<Value>> CompiledModel::evaluate(StepContext& ctx) const {
  auto iterator = ctx.resource<data::RecordIteratorResource>(0);
  if (!iterator.ok()) co_return iterator.status();
  auto loss = co_await run_eval_step(ctx, **iterator);
  if (!loss.ok()) co_return loss.status();
  co_return Value(*loss);
}

Task<StatusOr<double>> CompiledModel::run_eval_step(StepContext& ctx, data::RecordIteratorResource& iterator) const {
  auto vars = find_variables(in_step(ctx), Phase::kEval);
  if (!vars.ok()) co_return vars.status();
  auto batch = iterator.next();
  if (!batch.ok()) co_return batch.status();
  auto features = graph_->features().map(iterator.schema(), *batch);
  if (!features.ok()) co_return features.status();
  auto lookups = graph_->plan_lookups(*features);
  Reads reads = reads_for(*graph_, vars->params, lookups);
  auto pulled = co_await ctx.ps().pull(reads.pull);
  if (!pulled.ok()) co_return pulled.status();
  co_await ctx.compute(ComputeCost{"model/eval_step", features->batch, graph_->eval_flops(features->batch)});
  const ModelGraph::Params params = params_from(*pulled, reads, std::move(lookups));
  ModelGraph::Tape tape;
  const Matrix& logits = graph_->forward(*features, params, tape, ForwardMode{false, nullptr});
  const LossResult l = compute_loss(graph_->loss(), logits, features->labels);
  ParameterClient::PushBatch push;
  std::vector<Matrix> deltas = metric_deltas(logits, features->labels, l.loss);
  for (std::size_t m = 0; m < deltas.size(); ++m) push.add(*vars->metrics[m], std::move(deltas[m]));
  Status pushed = co_await ctx.ps().push(std::move(push));
  if (!pushed.ok()) co_return pushed;
  co_return l.loss;
}

Task<StatusOr<std::vector<Matrix>>> CompiledModel::evaluate_batch(ParameterClient& ps,
                                                                  const VariableDirectory& variables,
                                                                  const data::Schema& schema,
                                                                  const data::RecordBatch& batch) const {
  auto vars = find_variables([&variables](const std::string& name) { return variables.find(name); }, Phase::kEval);
  if (!vars.ok()) co_return vars.status();
  auto features = graph_->features().map(schema, batch);
  if (!features.ok()) co_return features.status();
  auto lookups = graph_->plan_lookups(*features);
  Reads reads = reads_for(*graph_, vars->params, lookups);
  auto pulled = co_await ps.pull(reads.pull);
  if (!pulled.ok()) co_return pulled.status();
  const ModelGraph::Params params = params_from(*pulled, reads, std::move(lookups));
  ModelGraph::Tape tape;
  const Matrix& logits = graph_->forward(*features, params, tape, ForwardMode{false, nullptr});
  const LossResult l = compute_loss(graph_->loss(), logits, features->labels);
  co_return metric_deltas(logits, features->labels, l.loss);
}

void CompiledModel::register_functions(FunctionRegistry& registry) const {
  register_dataset_functions(registry);
  std::shared_ptr<const CompiledModel> self = shared_from_this();
  registry.add_step(train_step(), [self](StepContext& ctx) { return self->train(ctx); });
  registry.add_step(eval_step(), [self](StepContext& ctx) { return self->evaluate(ctx); });
}

// ---------------------------------------------------------------- metrics

std::vector<Matrix> CompiledModel::metric_deltas(const Matrix& logits, const Matrix& labels, double loss) const {
  std::vector<Matrix> out;
  const double n = static_cast<double>(logits.rows());
  for (auto metric : metrics_) {
    switch (metric) {
      case spec::LOSS:
        out.push_back(scalar(loss * n));
        out.push_back(scalar(n));
        break;
      case spec::ACCURACY:
        out.push_back(scalar(correct_predictions(graph_->loss(), logits, labels)));
        out.push_back(scalar(n));
        break;
      case spec::AUC: {
        Matrix counts, totals;
        auc_counts(logits, labels, auc_thresholds(spec().auc_thresholds()), counts, totals);
        out.push_back(std::move(counts));
        out.push_back(std::move(totals));
        break;
      }
      default: break;
    }
  }
  return out;
}

MetricValues CompiledModel::metrics_from(const std::vector<Matrix>& totals) const {
  MetricValues out;
  std::size_t h = 0;
  for (auto metric : metrics_) {
    const Matrix& a = totals[h++];
    const Matrix& b = totals[h++];
    switch (metric) {
      case spec::LOSS:
        out.examples = b(0, 0);
        out.loss = b(0, 0) > 0 ? a(0, 0) / b(0, 0) : 0.0;
        break;
      case spec::ACCURACY: out.accuracy = b(0, 0) > 0 ? a(0, 0) / b(0, 0) : 0.0; break;
      case spec::AUC: out.auc = auc_from_counts(a, b); break;
      default: break;
    }
  }
  return out;
}

LocalEvaluator::LocalEvaluator(std::shared_ptr<const CompiledModel> model) : model_(std::move(model)) {}

Status LocalEvaluator::add(const VariableValues& values, const data::Schema& schema, const data::RecordBatch& batch) {
  const ModelGraph& g = model_->graph();
  auto features = g.features().map(schema, batch);
  if (!features.ok()) return features.status();
  ModelGraph::Params params;
  params.lookups = g.plan_lookups(*features);
  for (std::size_t v = 0; v < g.variables().size(); ++v) {
    const auto& var = g.variables()[v];
    auto it = values.find(var.name);
    if (it == values.end()) return absl::InvalidArgumentError("no value for variable \"" + var.name + "\"");
    const Matrix& full = it->second;
    if (full.rows() != storage_rows(var.shape) || full.cols() != storage_cols(var.shape))
      return absl::InvalidArgumentError("variable \"" + var.name + "\" is " + std::to_string(full.rows()) + "x" +
                                        std::to_string(full.cols()) + "; the model needs " + shape_string(var.shape));
    if (!var.embedding) {
      params.values.push_back(full);
      continue;
    }
    Matrix rows(static_cast<Eigen::Index>(params.lookups[v].rows.size()), full.cols());
    for (std::size_t i = 0; i < params.lookups[v].rows.size(); ++i) {
      const std::int64_t id = params.lookups[v].rows[i];
      if (id < 0 || id >= full.rows())
        return absl::InvalidArgumentError("variable \"" + var.name + "\": id " + std::to_string(id) +
                                          " is outside its " + std::to_string(full.rows()) + " rows");
      rows.row(static_cast<Eigen::Index>(i)) = full.row(id);
    }
    params.values.push_back(std::move(rows));
  }
  ModelGraph::Tape tape;
  const Matrix& logits = g.forward(*features, params, tape, ForwardMode{false, nullptr});
  const LossResult l = compute_loss(g.loss(), logits, features->labels);
  std::vector<Matrix> deltas = model_->metric_deltas(logits, features->labels, l.loss);
  if (totals_.empty()) {
    totals_ = std::move(deltas);
  } else {
    for (std::size_t i = 0; i < deltas.size(); ++i) totals_[i] += deltas[i];
  }
  return absl::OkStatus();
}

MetricValues LocalEvaluator::result() const {
  if (totals_.empty()) return MetricValues{};
  return model_->metrics_from(totals_);
}

// ---------------------------------------------------------------- metrics on the coordinator

Task<Status> CompiledModel::reset_metrics(ParameterClient& ps, const VariableDirectory& variables,
                                          Phase phase) const {
  ParameterClient::PushBatch push;
  for (const auto& name : metric_variables(phase)) {
    const VariableLayout* v = variables.find(name);
    if (!v) co_return absl::InvalidArgumentError("no metric variable \"" + name + "\" was created");
    push.assign(*v, Matrix::Zero(v->rows(), v->cols()));
  }
  co_return co_await ps.push(std::move(push));
}

Task<StatusOr<MetricValues>> CompiledModel::read_metrics(ParameterClient& ps, const VariableDirectory& variables,
                                                         Phase phase) const {
  ParameterClient::PullBatch pull;
  std::vector<int> handles;
  for (const auto& name : metric_variables(phase)) {
    const VariableLayout* v = variables.find(name);
    if (!v) co_return absl::InvalidArgumentError("no metric variable \"" + name + "\" was created");
    handles.push_back(pull.dense(*v));
  }
  auto r = co_await ps.pull(pull);
  if (!r.ok()) co_return r.status();
  std::vector<Matrix> totals;
  for (int h : handles) totals.push_back(r->value(h));
  MetricValues out = metrics_from(totals);
  co_return out;
}

// ---------------------------------------------------------------- cost

StepCost CompiledModel::price() const {
  StepCost cost;
  const std::int64_t batch = batch_size();
  cost.train_flops = graph_->train_flops(batch);
  cost.eval_flops = graph_->eval_flops(batch);
  for (const auto& v : graph_->variables()) {
    StepCost::VariableTraffic t;
    t.name = v.name;
    t.shape = v.shape;
    t.embedding = v.embedding;
    const double cols = static_cast<double>(storage_cols(v.shape));
    if (v.embedding) {
      // The embedding's input is its layer's one input.
      const std::string& input_name = spec().layer(v.layer).input(0);
      int input = 0;
      for (int i = 0; i < spec().input_size(); ++i)
        if (spec().input(i).name() == input_name) input = i;
      const double draws = static_cast<double>(batch) * graph_->ids_per_record(input);
      t.lookups_per_step = draws;
      t.rows_per_step = expected_distinct_rows(v.shape[0], draws, v.zipf_exponent);
      t.bytes_pulled = t.rows_per_step * (4 * cols + 8);
      t.bytes_pushed = t.rows_per_step * (4 * cols + 8);
    } else {
      t.rows_per_step = static_cast<double>(storage_rows(v.shape));
      t.bytes_pulled = t.rows_per_step * 4 * cols;
      t.bytes_pushed = t.bytes_pulled;
    }
    cost.bytes_pulled += t.bytes_pulled;
    cost.bytes_pushed += t.bytes_pushed;
    cost.variables.push_back(std::move(t));
  }
  return cost;
}

}  // namespace twinps::model
