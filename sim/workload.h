#pragma once
// The synthetic workload: a model described by its variables' shapes and
// access pattern, with step functions that run on core's WorkerNode like any
// other (pull through ParameterClient, ctx.compute, push gradients and
// iterations += 1).
//
// NUMERIC: variables hold real values; a step pulls them (looking up
// `rows_per_step` rows drawn from the access distribution for an embedding),
// computes the gradient of 0.05 * ||w||^2 on what it pulled (so a stale read
// gives a different update) and pushes it.
// TIMING_ONLY: variables are shape-only shards; a step draws its rows the same
// way but reads and writes only how many distinct rows each shard holds, as
// sizes, so a step allocates no tensor and a thousand workers fit in memory.
//
// Also registered: "fail" (an application error), and the per-worker dataset
// and iterator every NUMERIC train step consumes (rebuilt when a worker
// recovers, so the rebuild is observable). TIMING_ONLY steps take none: a
// per-worker argument is one RemoteValue per worker, and copying a thousand
// of them into every closure would cost more than the step.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/messages/messages.h"
#include "core/ps/optimizer_config.h"
#include "core/variables/layout.h"
#include "core/variables/partitioner.h"
#include "core/worker/function_registry.h"
#include "scenario.pb.h"  // generated from sim/scenario.proto

namespace twinps::sim {

inline constexpr char kTrainFn[] = "train";
inline constexpr char kFailFn[] = "fail";
inline constexpr char kDatasetFn[] = "sim/dataset";
inline constexpr char kIteratorFn[] = "sim/iterator";
inline constexpr char kIterationsVar[] = "iterations";
inline constexpr char kInfiniteFlagVar[] = "do_infinite_step";

class SyntheticWorkload {
 public:
  // The scenario must have passed validation.
  static StatusOr<std::unique_ptr<SyntheticWorkload>> create(const scenario::SyntheticModel& model, int num_ps,
                                                             bool timing_only, std::uint64_t init_seed);

  void register_functions(FunctionRegistry& registry);

  const std::vector<VariableLayout>& layouts() const { return layouts_; }
  const std::vector<ShardState>& initial() const { return initial_; }
  const OptimizerConfig& optimizer() const { return optimizer_; }
  int batch_size() const { return batch_size_; }
  bool timing_only() const { return timing_only_; }
  // Index of a declared variable, or -1.
  int find(const std::string& name) const;

  // Hotspot faults: while > 0 every step also uses the variable.
  void add_hot(int variable, int delta) { vars_[static_cast<std::size_t>(variable)].hot += delta; }

  // schedule() arguments of a train closure.
  static std::vector<Value> train_args(double extra_s, bool infinite) {
    return {Value(extra_s), Value(std::int64_t{infinite ? 1 : 0})};
  }

 private:
  struct Var {
    std::string name;
    std::size_t layout = 0;  // index into layouts_
    bool read_only = false;
    bool per_step = true;
    int hot = 0;
    std::int64_t rows_per_step = 0;
    double zipf = 0;
  };
  SyntheticWorkload() = default;
  Task<StatusOr<Value>> train(StepContext& ctx);
  RowIds draw_rows(const Var& v, RandomStream& r) const;
  // Timing-only: the distinct rows of each shard among a step's draws.
  std::vector<std::int64_t> draw_rows_per_shard(const Var& v, const VariableLayout& layout, RandomStream& r);

  bool timing_only_ = false;
  int batch_size_ = 32;
  std::vector<VariableLayout> layouts_;
  std::vector<ShardState> initial_;
  OptimizerConfig optimizer_;
  std::vector<Var> vars_;
  RowIds scratch_;  // reused by draw_rows_per_shard (one thread, no await in between)
};

}  // namespace twinps::sim
