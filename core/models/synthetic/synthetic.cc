#include "core/models/synthetic/synthetic.h"

#include <algorithm>
#include <cmath>

#include "core/data/dataset.h"
#include "core/variables/initializers.h"
#include "core/variables/placement.h"
#include "core/worker/step_context.h"

namespace twinps::synthetic {

namespace {

// Draws with rows near 0 more likely: a bounded power law with exponent s
// over [1, n + 1), by inverting its CDF (s = 0 is uniform).
std::int64_t draw_power_law(RandomStream& r, std::int64_t n, double s) {
  if (s == 0) return static_cast<std::int64_t>(r.below(static_cast<std::uint64_t>(n)));
  const double u = r.uniform();
  double x;
  if (s == 1) {
    x = std::pow(static_cast<double>(n + 1), u);
  } else {
    x = std::pow((std::pow(static_cast<double>(n + 1), 1 - s) - 1) * u + 1, 1 / (1 - s));
  }
  return std::clamp<std::int64_t>(static_cast<std::int64_t>(std::floor(x)) - 1, 0, n - 1);
}

// A per-worker dataset and its iterator: only a position, so that a step
// allocates nothing for its input. A rebuilt iterator starts over (R10).
class SyntheticDataset final : public Resource {
 public:
  SyntheticDataset(std::int64_t batch, ExampleRange shard) : batch_size(batch), shard(shard) {}
  std::int64_t batch_size;
  ExampleRange shard;  // this worker's example ids (empty: the model has none)
};
class SyntheticIterator final : public Resource {
 public:
  explicit SyntheticIterator(const SyntheticDataset& d) : dataset(d) {}
  const SyntheticDataset& dataset;  // its parent, which outlives it
  std::int64_t position = 0;        // batches read

  // The ids of the batch at `position`: the next batch_size ids of the
  // worker's shard, wrapping round it (the data repeats, R6).
  std::vector<std::int64_t> batch_at(std::int64_t batch) const {
    const ExampleRange& r = dataset.shard;
    const std::int64_t n = r.end - r.begin;
    std::vector<std::int64_t> ids;
    if (n <= 0) return ids;
    for (std::int64_t k = 0; k < dataset.batch_size; ++k) ids.push_back(r.begin + (batch * dataset.batch_size + k) % n);
    return ids;
  }
};

// Waits `d`, or less if `token` is cancelled first; true if the time passed.
Task<bool> wait_unless_cancelled(Executor& ex, Duration d, CancelToken token) {
  Promise<bool> done(ex);
  auto finished = done.future();
  const TimerId timer = ex.post_after(d, [done]() mutable { done.set(true); });
  auto registration = token.on_cancel([done]() mutable { done.set(false); });
  const bool passed = co_await finished;
  ex.cancel(timer);
  co_return passed;
}

// Elements a step pulls of `v` (rows looked up, or the whole variable).
double pulled_elements(const Variable& v) {
  const auto cols = static_cast<double>(storage_cols(v.shape));
  return v.rows_per_step > 0 ? static_cast<double>(v.rows_per_step) * cols : static_cast<double>(num_elements(v.shape));
}

// Rows of `v` a step's gradient reads: its lookups, or all of its rows.
double pulled_rows(const Variable& v) {
  const auto cols = static_cast<double>(storage_cols(v.shape));
  return pulled_elements(v) / std::max(1.0, cols);
}

}  // namespace

// About 4 * batch * rows * cols operations. The input is a fixed pattern
// rather than random numbers: the work, not the data, is what matters.
Matrix compute_gradient(const Matrix& w, int batch) {
  const auto r = w.rows();
  const Matrix x = Matrix::NullaryExpr(batch, r, [](Eigen::Index i, Eigen::Index j) {
    return static_cast<float>((i * 7 + j * 13) % 17 - 8) / 8.0f;
  });
  const Matrix h = x * w;
  Matrix g = x.transpose() * h;
  g *= 1.0f / static_cast<float>(static_cast<double>(batch) * static_cast<double>(r));
  g += 0.1f * w;
  return g;
}

ExampleRange shard_of_examples(std::int64_t examples, int workers, int worker) {
  const std::int64_t w = std::max(1, workers), i = std::clamp<std::int64_t>(worker, 0, w - 1);
  const std::int64_t base = examples / w, extra = examples % w;
  const std::int64_t begin = i * base + std::min(i, extra);
  return ExampleRange{begin, begin + base + (i < extra ? 1 : 0)};
}

std::vector<Value> dataset_args(const ModelSpec& spec, int workers) {
  std::vector<Value> args{Value(std::int64_t{spec.batch_size})};
  if (spec.examples_per_epoch > 0) {
    args.emplace_back(spec.examples_per_epoch);
    args.emplace_back(std::int64_t{workers});
  }
  return args;
}

double step_flops(const ModelSpec& spec) {
  if (spec.flops_per_step > 0) return spec.flops_per_step;
  double elements = 0;
  for (const auto& v : spec.variables)
    if (v.per_step) elements += pulled_elements(v);
  return 4.0 * static_cast<double>(spec.batch_size) * elements;
}

namespace {

// What each variable, then `iterations` and the flag, costs a ps per step
// (for automatic placement): the shards a partitioner asks for, the rows a
// step looks up and how, whether steps pull and push it.
std::vector<VariableDemand> demands_of(const ModelSpec& spec) {
  std::vector<VariableDemand> out;
  for (const auto& v : spec.variables) {
    VariableDemand d;
    d.name = v.name;
    d.shape = v.shape;
    const PartitionerPtr& p = v.partitioner ? v.partitioner : spec.partitioner;
    if (p && !v.shape.empty() && v.shape[0] > 0) {
      const std::vector<std::int64_t> parts = p->partition(v.shape, 4);
      d.shards = parts.empty() ? 1 : std::max<std::int64_t>(1, parts[0]);
    }
    d.rows_per_step = v.rows_per_step;
    d.zipf_exponent = v.zipf_exponent;
    d.updated = !v.read_only;
    d.per_step = v.per_step;
    out.push_back(std::move(d));
  }
  VariableDemand iterations{kIterationsVar, {}};
  iterations.pulled = false;  // steps only add 1
  out.push_back(iterations);
  // Read by a step only when its closure is infinite (Schedule.infinite),
  // which the model does not know: priced as not used, like a variable
  // used only while hot.
  VariableDemand flag{kInfiniteFlagVar, {}};
  flag.updated = false;
  flag.per_step = false;
  out.push_back(flag);
  if (spec.examples_per_epoch > 0) {
    VariableDemand visits{kVisitsVar, {spec.examples_per_epoch, 1}};
    visits.pulled = false;  // steps only add to it
    out.push_back(visits);
  }
  return out;
}

}  // namespace

StatusOr<Variables> build_variables(const ModelSpec& spec, int num_ps, bool timing_only, std::uint64_t init_seed) {
  Variables out;
  VariablePlacer placer(num_ps, spec.partitioner);
  std::vector<VariablePlan> plan;
  if (spec.auto_placement) {
    auto made = plan_auto_placement(demands_of(spec), num_ps, spec.placement_prices);
    if (!made.ok()) return made.status();
    plan = std::move(*made);
  }
  // The variable at `i` in demands_of's order, placed by the plan or round-robin.
  auto create = [&](std::size_t i, const std::string& name, const Shape& shape, VariableKind kind) {
    if (plan.empty()) return placer.create(name, shape, kind);
    return placer.create_placed(name, shape, kind, plan[i].shard_rows, plan[i].shard_ps);
  };
  RandomStream init(init_seed);
  for (std::size_t i = 0; i < spec.variables.size(); ++i) {
    const auto& v = spec.variables[i];
    placer.set_partitioner(v.partitioner ? v.partitioner : spec.partitioner);
    auto layout = create(i, v.name, v.shape, VariableKind::kTrainable);
    if (!layout.ok()) return layout.status();
    if (timing_only) {
      for (auto& s : meta_shard_states(*layout)) out.initial.push_back(std::move(s));
    } else {
      RandomStream r = init.fork(v.name);
      for (auto& s : shard_states(*layout, initial_value(Initializer::uniform(-0.05, 0.05), v.shape, r)))
        out.initial.push_back(std::move(s));
    }
  }
  placer.set_partitioner(spec.partitioner);
  auto iterations = create(spec.variables.size(), kIterationsVar, {}, VariableKind::kCounter);
  if (!iterations.ok()) return iterations.status();
  for (auto& s : counter_shard_states(*iterations)) out.initial.push_back(std::move(s));
  auto flag = create(spec.variables.size() + 1, kInfiniteFlagVar, {}, VariableKind::kAccumulator);
  if (!flag.ok()) return flag.status();
  for (auto& s : shard_states(*flag, Matrix::Zero(1, 1))) out.initial.push_back(std::move(s));
  if (spec.examples_per_epoch > 0 && !timing_only) {
    // One block, whatever the model's partitioner: an accumulator the
    // expectations read whole.
    placer.set_partitioner(nullptr);
    auto visits = create(spec.variables.size() + 2, kVisitsVar, {spec.examples_per_epoch, 1}, VariableKind::kAccumulator);
    if (!visits.ok()) return visits.status();
    for (auto& s : shard_states(*visits, Matrix::Zero(spec.examples_per_epoch, 1))) out.initial.push_back(std::move(s));
  }
  out.layouts = placer.variables();
  return out;
}

Workload::Workload(ModelSpec spec, bool timing_only)
    : spec_(std::move(spec)), timing_only_(timing_only), hot_(spec_.variables.size(), 0) {}

int Workload::find(const std::string& name) const {
  for (std::size_t i = 0; i < spec_.variables.size(); ++i)
    if (spec_.variables[i].name == name) return static_cast<int>(i);
  return -1;
}

RowIds Workload::draw_rows(const Variable& v, std::int64_t rows, RandomStream& r) const {
  RowIds ids(static_cast<std::size_t>(v.rows_per_step));
  for (auto& id : ids) id = draw_power_law(r, rows, v.zipf_exponent);
  return ids;
}

void Workload::register_functions(FunctionRegistry& registry) {
  registry.add_step(kTrainFn, [this](StepContext& ctx) { return train(ctx); });
  registry.add_step(kFailFn, [](StepContext& ctx) -> Task<StatusOr<Value>> {
    co_return absl::InvalidArgumentError("injected application error on " + ctx.task().short_name());
  });
  registry.add_resource(kDatasetFn, [](ResourceContext& ctx) -> StatusOr<std::unique_ptr<Resource>> {
    const auto& a = ctx.args;
    auto is_int = [&](std::size_t i) { return std::holds_alternative<std::int64_t>(a[i]); };
    if ((a.size() != 1 && a.size() != 3) || !is_int(0) || (a.size() == 3 && (!is_int(1) || !is_int(2))))
      return absl::InvalidArgumentError(std::string(kDatasetFn) + " takes its batch size [, examples, workers]");
    ExampleRange shard;
    if (a.size() == 3)
      shard = shard_of_examples(std::get<std::int64_t>(a[1]), static_cast<int>(std::get<std::int64_t>(a[2])),
                                ctx.worker_index);
    return std::unique_ptr<Resource>(new SyntheticDataset(std::get<std::int64_t>(a[0]), shard));
  });
  registry.add_resource(kIteratorFn, [](ResourceContext& ctx) -> StatusOr<std::unique_ptr<Resource>> {
    const auto* dataset = dynamic_cast<SyntheticDataset*>(ctx.parent);
    if (dataset == nullptr)
      return absl::InvalidArgumentError(std::string(kIteratorFn) + " is built from a " + kDatasetFn);
    return std::unique_ptr<Resource>(new SyntheticIterator(*dataset));
  });
}

// args: [iterator (numeric only), extra seconds, infinite (0/1)
//        [, split begin, split end, split key (exactly-once visitation)]]
Task<StatusOr<Value>> Workload::train(StepContext& ctx) {
  const auto& args = ctx.args();
  auto iterator = ctx.resource<SyntheticIterator>(0);
  const std::size_t first = iterator.ok() ? 1 : 0;
  // The examples each of the closure's steps trains on (with example ids):
  // its split (one step), else the iterator's next batches.
  std::vector<std::vector<std::int64_t>> step_examples;
  std::vector<std::int64_t> examples;
  const bool has_split = args.size() == first + 5;
  if (has_split) {
    const auto* begin = std::get_if<std::int64_t>(&args[first + 2]);
    const auto* end = std::get_if<std::int64_t>(&args[first + 3]);
    const auto* key = std::get_if<std::int64_t>(&args[first + 4]);
    if (!begin || !end || !key || *begin < 0 || *end < *begin || *end > spec_.examples_per_epoch || *key < 1)
      co_return absl::InvalidArgumentError("the split (arguments " + std::to_string(first + 2) + " to " +
                                           std::to_string(first + 4) + ") must be example ids [begin, end) within " +
                                           std::to_string(spec_.examples_per_epoch) + " and a key >= 1");
    if (spec_.steps_per_closure != 1)
      co_return absl::InvalidArgumentError("a split is one step's examples: steps_per_closure must be 1");
    for (std::int64_t id = *begin; id < *end; ++id) examples.push_back(id);
    step_examples.push_back(std::move(examples));
    ctx.ps().set_split(static_cast<std::uint64_t>(*key));
  }
  if (first == 1) {
    // The batches of this closure's steps, read now: the iterator is the
    // worker's and is not held across the steps' waits.
    for (int k = 0; k < spec_.steps_per_closure; ++k)
      if (!has_split) step_examples.push_back((*iterator)->batch_at((*iterator)->position + k));
    (*iterator)->position += spec_.steps_per_closure;
  }
  const double extra_s =
      args.size() > first && std::holds_alternative<double>(args[first]) ? std::get<double>(args[first]) : 0;
  const bool infinite = args.size() > first + 1 && std::holds_alternative<std::int64_t>(args[first + 1]) &&
                        std::get<std::int64_t>(args[first + 1]) != 0;
  auto cancelled = [] { return absl::CancelledError("the step was cancelled"); };

  if (extra_s > 0 && !co_await wait_unless_cancelled(ctx.executor(), from_seconds(extra_s), ctx.cancelled()))
    co_return cancelled();
  if (infinite) {
    auto flag = ctx.variable(kInfiniteFlagVar);
    if (!flag.ok()) co_return flag.status();
    for (;;) {
      ParameterClient::PullBatch read;
      const int h = read.dense(**flag);
      auto value = co_await ctx.ps().pull(read);
      if (!value.ok()) co_return value.status();
      if (value->value(h)(0, 0) == 0) break;
      co_await ctx.compute(ComputeCost{"synthetic/spin", 0, 0});
      if (ctx.cancelled().cancelled()) co_return cancelled();
    }
  }

  for (int k = 0; k < spec_.steps_per_closure; ++k) {
    if (k > 0 && ctx.cancelled().cancelled()) co_return cancelled();
    static const std::vector<std::int64_t> kNone;
    const auto at = static_cast<std::size_t>(k);
    const auto& examples_of_step = at < step_examples.size() ? step_examples[at] : kNone;
    Status stepped = co_await step(ctx, examples_of_step);
    if (!stepped.ok()) co_return stepped;
  }
  co_return Value(std::int64_t{spec_.steps_per_closure});
}

Task<Status> Workload::step(StepContext& ctx, const std::vector<std::int64_t>& examples) {
  // Which variables this step uses, and how it reads each.
  struct Use {
    const Variable* var;
    const VariableLayout* layout;
    int handle = -1;
    RowIds ids;  // lookups
  };
  std::vector<Use> uses;
  uses.reserve(spec_.variables.size());
  double flops = 0;
  // One gradient kernel per variable used: its flops and the values it reads.
  std::vector<KernelWork> kernels;
  kernels.reserve(spec_.variables.size());
  for (std::size_t i = 0; i < spec_.variables.size(); ++i) {
    const Variable& v = spec_.variables[i];
    if (!v.per_step && hot_[i] <= 0) continue;
    auto layout = ctx.variable(v.name);
    if (!layout.ok()) co_return layout.status();
    uses.push_back(Use{&v, *layout, -1, {}});
    flops += 4.0 * spec_.batch_size * pulled_elements(v);
    kernels.push_back(KernelWork{kGradientKernel, 4.0 * spec_.batch_size * pulled_elements(v), 4.0 * pulled_elements(v),
                                 static_cast<double>(spec_.batch_size) * pulled_rows(v)});
  }
  // Timing-only, the variables are meta (no values): the same reads and
  // writes, with meta tensors for gradients, cost what real ones would.
  ParameterClient::PullBatch pull;
  for (Use& u : uses) {
    if (u.var->rows_per_step > 0) {
      u.ids = draw_rows(*u.var, u.layout->rows(), ctx.random());
      u.handle = pull.rows(*u.layout, u.ids);
    } else {
      u.handle = pull.dense(*u.layout);
    }
  }
  auto pulled = co_await ctx.ps().pull(pull);
  if (!pulled.ok()) co_return pulled.status();

  ParameterClient::PushBatch push;
  for (Use& u : uses) {
    if (timing_only_) {
      if (u.var->read_only) continue;
      if (u.var->rows_per_step > 0) {
        const MetaTensor grad{static_cast<std::int64_t>(u.ids.size()), u.layout->cols()};
        push.gradient_rows(*u.layout, std::move(u.ids), grad);
      } else {
        push.gradient(*u.layout, MetaTensor{u.layout->rows(), u.layout->cols()});
      }
      continue;
    }
    Matrix grad = compute_gradient(pulled->value(u.handle), spec_.batch_size);
    for (int k = 1; k < compute_repeats_; ++k) grad = compute_gradient(pulled->value(u.handle), spec_.batch_size);
    if (u.var->read_only) continue;
    if (u.var->rows_per_step > 0) {
      push.gradient_rows(*u.layout, std::move(u.ids), std::move(grad));
    } else {
      push.gradient(*u.layout, std::move(grad));
    }
  }
  if (spec_.flops_per_step > 0) {
    // A model spec's step: its own FLOPs and layers, not the synthetic gradients'.
    std::vector<KernelWork> layers;
    layers.reserve(spec_.step_kernels.size());
    for (const auto& k : spec_.step_kernels) layers.push_back(KernelWork{k.kind, k.flops, k.bytes, k.inputs, k.records});
    co_await ctx.compute(ComputeCost{"synthetic/train_step", spec_.batch_size, spec_.flops_per_step, layers});
  } else {
    co_await ctx.compute(ComputeCost{"synthetic/train_step", spec_.batch_size, flops, kernels});
  }

  auto iterations = ctx.variable(kIterationsVar);
  if (!iterations.ok()) co_return iterations.status();
  push.add_counter(**iterations, 1);
  if (spec_.examples_per_epoch > 0 && !timing_only_) {
    // The visits ride in the gradients' push: counted where they are applied.
    auto visits = ctx.variable(kVisitsVar);
    if (!visits.ok()) co_return visits.status();
    Matrix delta = Matrix::Zero(spec_.examples_per_epoch, 1);
    for (std::int64_t id : examples) delta(id, 0) += 1;
    push.add(**visits, std::move(delta));
  }
  co_return co_await ctx.ps().push(std::move(push));
}

}  // namespace twinps::synthetic
