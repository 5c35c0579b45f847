#include "sim/workload.h"

#include <algorithm>
#include <cmath>

#include "core/variables/initializers.h"
#include "core/variables/placement.h"
#include "core/worker/step_context.h"

namespace twinps::sim {

namespace {

// Draws with rows near 0 more likely: a bounded power law with exponent s
// over [1, n + 1), by inverting its CDF (s = 0 is uniform).
std::int64_t draw_power_law(RandomStream& r, std::int64_t n, double s) {
  const double u = r.uniform();
  double x;
  if (s == 0) {
    return static_cast<std::int64_t>(r.below(static_cast<std::uint64_t>(n)));
  } else if (s == 1) {
    x = std::pow(static_cast<double>(n + 1), u);
  } else {
    x = std::pow((std::pow(static_cast<double>(n + 1), 1 - s) - 1) * u + 1, 1 / (1 - s));
  }
  return std::clamp<std::int64_t>(static_cast<std::int64_t>(std::floor(x)) - 1, 0, n - 1);
}

// A per-worker dataset and its iterator: only a position, so that a timing
// run allocates nothing per step. A rebuilt iterator starts over (R10).
class SyntheticDataset final : public Resource {
 public:
  explicit SyntheticDataset(std::int64_t batch) : batch_size(batch) {}
  std::int64_t batch_size;
};
class SyntheticIterator final : public Resource {
 public:
  std::int64_t position = 0;
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

}  // namespace

StatusOr<std::unique_ptr<SyntheticWorkload>> SyntheticWorkload::create(const scenario::SyntheticModel& model,
                                                                        int num_ps, bool timing_only,
                                                                        std::uint64_t init_seed) {
  std::unique_ptr<SyntheticWorkload> w(new SyntheticWorkload());
  w->timing_only_ = timing_only;
  w->batch_size_ = model.batch_size();

  PartitionerPtr partitioner;
  if (model.has_partitioner()) {
    const auto& p = model.partitioner();
    switch (p.kind_case()) {
      case scenario::Partitioner::kFixedShards: {
        auto made = FixedShardsPartitioner::create(p.fixed_shards());
        if (!made.ok()) return made.status();
        partitioner = *made;
        break;
      }
      case scenario::Partitioner::kMinSize: {
        auto made = MinSizePartitioner::create(p.min_size().min_shard_bytes(), p.min_size().max_shards());
        if (!made.ok()) return made.status();
        partitioner = *made;
        break;
      }
      case scenario::Partitioner::kMaxSize: {
        auto made = MaxSizePartitioner::create(
            p.max_size().max_shard_bytes(),
            p.max_size().has_max_shards() ? std::optional<std::int64_t>(p.max_size().max_shards()) : std::nullopt);
        if (!made.ok()) return made.status();
        partitioner = *made;
        break;
      }
      case scenario::Partitioner::KIND_NOT_SET: break;
    }
  }

  VariablePlacer placer(num_ps, partitioner);
  RandomStream init(init_seed);
  for (const auto& v : model.variable()) {
    Shape shape(v.shape().begin(), v.shape().end());
    auto layout = placer.create(v.name(), shape, VariableKind::kTrainable);
    if (!layout.ok()) return layout.status();
    Var var;
    var.name = v.name();
    var.read_only = v.read_only();
    var.per_step = v.per_step();
    var.rows_per_step = v.rows_per_step();
    var.zipf = v.zipf_exponent();
    if (timing_only) {
      for (std::size_t i = 0; i < layout->shards.size(); ++i) {
        ShardState s;
        s.spec = ShardSpec{layout->shards[i].id, layout->shard_name(i), VariableKind::kTrainable,
                           layout->shards[i].rows, layout->cols(), true};
        w->initial_.push_back(std::move(s));
      }
    } else {
      RandomStream r = init.fork(v.name());
      for (auto& s : shard_states(*layout, initial_value(Initializer::uniform(-0.05, 0.05), shape, r)))
        w->initial_.push_back(std::move(s));
    }
    var.layout = w->vars_.size();
    w->vars_.push_back(std::move(var));
  }
  auto iterations = placer.create(kIterationsVar, {}, VariableKind::kCounter);
  if (!iterations.ok()) return iterations.status();
  for (auto& s : counter_shard_states(*iterations)) w->initial_.push_back(std::move(s));
  auto flag = placer.create(kInfiniteFlagVar, {}, VariableKind::kAccumulator);
  if (!flag.ok()) return flag.status();
  for (auto& s : shard_states(*flag, Matrix::Zero(1, 1))) w->initial_.push_back(std::move(s));
  w->layouts_ = placer.variables();

  const auto& o = model.optimizer();
  switch (o.kind()) {
    case scenario::Optimizer::SGD: w->optimizer_.kind = OptimizerConfig::Kind::kSgd; break;
    case scenario::Optimizer::ADAGRAD: w->optimizer_.kind = OptimizerConfig::Kind::kAdagrad; break;
    case scenario::Optimizer::RMSPROP: w->optimizer_.kind = OptimizerConfig::Kind::kRmsprop; break;
    case scenario::Optimizer::ADAM: w->optimizer_.kind = OptimizerConfig::Kind::kAdam; break;
  }
  w->optimizer_.learning_rate = LearningRateSchedule::constant(o.learning_rate());
  return w;
}

int SyntheticWorkload::find(const std::string& name) const {
  for (std::size_t i = 0; i < vars_.size(); ++i)
    if (vars_[i].name == name) return static_cast<int>(i);
  return -1;
}

RowIds SyntheticWorkload::draw_rows(const Var& v, RandomStream& r) const {
  const std::int64_t n = layouts_[v.layout].rows();
  RowIds ids(static_cast<std::size_t>(v.rows_per_step));
  for (auto& id : ids) id = draw_power_law(r, n, v.zipf);
  return ids;
}

std::vector<std::int64_t> SyntheticWorkload::draw_rows_per_shard(const Var& v, const VariableLayout& layout,
                                                                RandomStream& r) {
  const std::int64_t n = layout.rows();
  scratch_.resize(static_cast<std::size_t>(v.rows_per_step));
  for (auto& id : scratch_) id = draw_power_law(r, n, v.zipf);
  std::sort(scratch_.begin(), scratch_.end());
  scratch_.erase(std::unique(scratch_.begin(), scratch_.end()), scratch_.end());
  std::vector<std::int64_t> counts(layout.shards.size(), 0);
  std::size_t shard = 0;
  for (std::int64_t id : scratch_) {
    while (id >= layout.shards[shard].row_offset + layout.shards[shard].rows) ++shard;
    ++counts[shard];
  }
  return counts;
}

void SyntheticWorkload::register_functions(FunctionRegistry& registry) {
  registry.add_step(kTrainFn, [this](StepContext& ctx) { return train(ctx); });
  registry.add_step(kFailFn, [](StepContext& ctx) -> Task<StatusOr<Value>> {
    co_return absl::InvalidArgumentError("injected application error on " + ctx.task().short_name());
  });
  registry.add_resource(kDatasetFn, [](ResourceContext& ctx) -> StatusOr<std::unique_ptr<Resource>> {
    if (ctx.args.size() != 1 || !std::holds_alternative<std::int64_t>(ctx.args[0]))
      return absl::InvalidArgumentError("sim/dataset takes its batch size");
    return std::unique_ptr<Resource>(new SyntheticDataset(std::get<std::int64_t>(ctx.args[0])));
  });
  registry.add_resource(kIteratorFn, [](ResourceContext& ctx) -> StatusOr<std::unique_ptr<Resource>> {
    if (dynamic_cast<SyntheticDataset*>(ctx.parent) == nullptr)
      return absl::InvalidArgumentError("sim/iterator is built from a sim/dataset");
    return std::unique_ptr<Resource>(new SyntheticIterator());
  });
}

// args: [iterator (numeric only), extra seconds, infinite (0/1)]
Task<StatusOr<Value>> SyntheticWorkload::train(StepContext& ctx) {
  const auto& args = ctx.args();
  const std::size_t first = args.size() == 3 ? 1 : 0;
  if (first == 1) {
    auto iterator = ctx.resource<SyntheticIterator>(0);
    if (!iterator.ok()) co_return iterator.status();
    ++(*iterator)->position;
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
      co_await ctx.compute(ComputeCost{"sim/spin", 0, 0});
      if (ctx.cancelled().cancelled()) co_return cancelled();
    }
  }

  // Which variables this step uses, and how it reads each.
  struct Use {
    const Var* var;
    const VariableLayout* layout;
    int handle = -1;
    RowIds ids;                                // numeric lookups
    std::vector<std::int64_t> rows_per_shard;  // timing-only lookups
  };
  std::vector<Use> uses;
  uses.reserve(vars_.size());
  for (const Var& v : vars_) {
    if (!v.per_step && v.hot <= 0) continue;
    auto layout = ctx.variable(v.name);
    if (!layout.ok()) co_return layout.status();
    uses.push_back(Use{&v, *layout, -1, {}, {}});
  }
  ParameterClient::PullBatch pull;
  for (Use& u : uses) {
    if (timing_only_) {
      if (u.var->rows_per_step > 0) u.rows_per_shard = draw_rows_per_shard(*u.var, *u.layout, ctx.random());
      u.handle = pull.shape_only(*u.layout, u.rows_per_shard);
    } else if (u.var->rows_per_step > 0) {
      u.ids = draw_rows(*u.var, ctx.random());
      u.handle = pull.rows(*u.layout, u.ids);
    } else {
      u.handle = pull.dense(*u.layout);
    }
  }
  auto pulled = co_await ctx.ps().pull(pull);
  if (!pulled.ok()) co_return pulled.status();

  co_await ctx.compute(ComputeCost{"sim/train_step", batch_size_, 0});

  ParameterClient::PushBatch push;
  for (Use& u : uses) {
    if (u.var->read_only) continue;
    if (timing_only_) {
      push.shape_only_gradient(*u.layout, u.rows_per_shard);
    } else if (u.var->rows_per_step > 0) {
      push.gradient_rows(*u.layout, std::move(u.ids), pulled->value(u.handle) * 0.1f);
    } else {
      push.gradient(*u.layout, pulled->value(u.handle) * 0.1f);
    }
  }
  auto iterations = ctx.variable(kIterationsVar);
  if (!iterations.ok()) co_return iterations.status();
  push.add_counter(**iterations, 1);
  Status pushed = co_await ctx.ps().push(push);
  if (!pushed.ok()) co_return pushed;
  co_return Value(std::int64_t{1});
}

}  // namespace twinps::sim
