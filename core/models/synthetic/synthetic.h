#pragma once
// A synthetic model: variables described by their shapes and access pattern,
// with step functions that run on core's WorkerNode like any other (pull
// through ParameterClient, compute, push gradients and iterations += 1). The
// simulator runs it (numeric or timing-only) and so do real clusters
// (`twinps serve --model`, the tuner's validation runs), so that a predicted
// step and a measured one execute the same code.
//
// Numeric steps pull real values — `rows_per_step` rows drawn from the access
// distribution for an embedding, the whole of the other variables — and
// compute for real: for every variable used, with X a fixed [batch x r]
// matrix and W the [r x c] values pulled, H = X W and the gradient
// 0.1 W + X^T H / (batch r), i.e. of 0.05 |W|^2 + |X W|^2 / (2 batch r). That
// is about 4 batch r c floating-point operations per variable
// (step_flops()), a cost that grows with the batch and the model as a real
// layer's does, and that a stale read changes.
//
// Timing-only steps (simulator only) use meta shards (ShardSpec::meta): a
// step draws its rows the same way and reads and writes them with the same
// ParameterClient calls, but what comes back and what it pushes are meta
// tensors (shapes, no values), so a step allocates no tensor and a thousand
// workers fit in memory. Their compute is the cost model's alone.
//
// Also registered: "fail" (an application error), and the per-worker dataset
// and iterator every numeric train step consumes (rebuilt when a worker
// recovers, so the rebuild is observable). Timing-only steps take none: a
// per-worker argument is one RemoteValue per worker, and copying a thousand
// of them into every closure would cost more than the step.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/messages/messages.h"
#include "core/ps/optimizer_config.h"
#include "core/variables/auto_placement.h"
#include "core/variables/layout.h"
#include "core/variables/partitioner.h"
#include "core/worker/function_registry.h"

namespace twinps::synthetic {

inline constexpr char kTrainFn[] = "train";
inline constexpr char kFailFn[] = "fail";
inline constexpr char kDatasetFn[] = "synthetic/dataset";
inline constexpr char kIteratorFn[] = "synthetic/iterator";
inline constexpr char kIterationsVar[] = "iterations";
inline constexpr char kInfiniteFlagVar[] = "do_infinite_step";
// With examples: visits per example, [examples x 1], added to by every step
// for the examples it trained on (see ModelSpec::examples_per_epoch).
inline constexpr char kVisitsVar[] = "visits";
// The kind of kernel compute_gradient() is, in a step's ComputeCost.
inline constexpr char kGradientKernel[] = "gradient";

struct Variable {
  std::string name;
  Shape shape;
  bool read_only = false;          // pulled by steps, never updated
  std::int64_t rows_per_step = 0;  // > 0: an embedding, this many rows looked up per step; 0: read whole
  double zipf_exponent = 0;        // skew of the rows looked up: 0 uniform, s > 0 row r with weight ~ 1/(r+1)^s
  bool per_step = true;            // false: steps use it only while made hot (a hotspot fault)
  // This variable's own partitioner (a model spec's embedding with one);
  // null: the model's.
  PartitionerPtr partitioner;
};

struct ModelSpec {
  std::vector<Variable> variables;  // in creation order (which decides placement)
  PartitionerPtr partitioner;       // one for every variable; null: nothing is sharded
  OptimizerConfig optimizer;
  int batch_size = 32;
  // > 0: a step computes this many floating-point operations (a model
  // spec's CompiledModel::step_cost().train_flops), charged at the cost
  // model's per-GFLOP price, instead of the gradient kernels described above.
  double flops_per_step = 0;
  // With flops_per_step: the same step kernel by kernel (a model spec's
  // layers), priced by kind where the cost model knows the kind.
  struct StepKernel {
    std::string kind;
    double flops = 0, bytes = 0, inputs = 0, records = 0;
  };
  std::vector<StepKernel> step_kernels;
  // Shards placed by core/variables/auto_placement.h (priced with
  // `placement_prices`) instead of round-robin in creation order.
  bool auto_placement = false;
  PsWorkPrices placement_prices;
  // Steps each train closure runs, one after another (a model spec's
  // training.steps_per_execution): fewer closures to dispatch, the same
  // pulls, compute and pushes per step.
  int steps_per_closure = 1;
  // > 0 (numeric only): the data is this many examples with ids 0 .. n - 1,
  // and every train step pushes, with its gradients, +1 to the `visits` row
  // of each example it trained on. Which examples a step takes: the split
  // its closure was given ([begin, end), exactly-once visitation, one step
  // per closure), else its worker's iterator over its shard of the ids
  // (shard_of_examples).
  std::int64_t examples_per_epoch = 0;
  // Exactly-once visitation: the coordinator's program gives every train
  // closure a split (core/coordinator/epoch_splits.h) and builds no
  // per-worker dataset. Workers need not know: a step reads what it is given.
  bool exactly_once = false;
};

// Worker `worker`'s shard of `examples` ids among `workers`: a contiguous
// range [begin, end), the first `examples % workers` shards one longer
// (dataset.shard as TensorFlow users write it, by ranges rather than strides).
struct ExampleRange {
  std::int64_t begin = 0, end = 0;
};
ExampleRange shard_of_examples(std::int64_t examples, int workers, int worker);

// kDatasetFn's arguments: the batch size and, with example ids, the examples
// and the workers they are sharded over.
std::vector<Value> dataset_args(const ModelSpec& spec, int workers);

// Floating-point operations of one numeric train step's compute (see above);
// the simulator charges compute time for them.
double step_flops(const ModelSpec& spec);

// A numeric step's computation on the values `w` it pulled of one variable:
// the gradient described above. Exposed so that `twinps calibrate` can time
// the very work a step does.
Matrix compute_gradient(const Matrix& w, int batch);

// The variables the coordinator creates for the model on `num_ps` parameter
// servers: the declared ones (sharded by the partitioner, placed round robin
// or by the automatic plan), then `iterations` and the flag `do_infinite_step`.
struct Variables {
  std::vector<VariableLayout> layouts;
  std::vector<ShardState> initial;  // uniform(-0.05, 0.05) from init_seed; meta shards when timing_only
};
StatusOr<Variables> build_variables(const ModelSpec& spec, int num_ps, bool timing_only, std::uint64_t init_seed);

class Workload {
 public:
  // `spec` is checked where it is read (sim/scenario_loader.h). Numeric step functions only read the
  // workload, so one instance may serve workers on several threads (an
  // in-process cluster); timing-only ones keep scratch state (one thread).
  Workload(ModelSpec spec, bool timing_only);

  void register_functions(FunctionRegistry& registry);

  const ModelSpec& spec() const { return spec_; }
  bool timing_only() const { return timing_only_; }
  // Index of a declared variable, or -1.
  int find(const std::string& name) const;

  // Fault injection in real runs (a straggler): every numeric step computes
  // each gradient `n` times, as a machine n times slower would take.
  void set_compute_repeats(int n) { compute_repeats_ = n < 1 ? 1 : n; }

  // Hotspot faults (the simulator): while > 0 every step also uses the variable.
  void add_hot(int variable, int delta) { hot_[static_cast<std::size_t>(variable)] += delta; }

  // schedule() arguments of a train closure, after the iterator (numeric).
  static std::vector<Value> train_args(double extra_s, bool infinite) {
    return {Value(extra_s), Value(std::int64_t{infinite ? 1 : 0})};
  }
  // ... followed, under exactly-once visitation, by the closure's split:
  // its example ids and its key (> 0, unique in the run), which the step's
  // pushes carry so that a ps applies the split once.
  static std::vector<Value> split_args(const ExampleRange& split, std::int64_t key) {
    return {Value(split.begin), Value(split.end), Value(key)};
  }

 private:
  Task<StatusOr<Value>> train(StepContext& ctx);
  // One step: pull, compute, push (with +1 visit for each of `examples`).
  Task<Status> step(StepContext& ctx, const std::vector<std::int64_t>& examples);
  RowIds draw_rows(const Variable& v, std::int64_t rows, RandomStream& r) const;
  // Timing-only: the distinct rows of each shard among a step's draws.

  ModelSpec spec_;
  bool timing_only_;
  std::vector<int> hot_;
  int compute_repeats_ = 1;
};

}  // namespace twinps::synthetic
