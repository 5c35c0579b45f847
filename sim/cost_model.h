#pragma once
// How long a worker's step computes on the simulated clock (core's CostModel
// hook: steps call ctx.compute). A duration is drawn from the step-time
// distribution with the worker's own random stream, plus a per-example term
// and a per-GFLOP term (the step's declared floating-point work), times the
// worker's straggler factor (permanent ones from the scenario,
// times every straggler fault active now).
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/runtime/cost_model.h"
#include "core/runtime/random.h"
#include "sim/cost_curve.h"

namespace twinps::sim {

// A distribution of durations in seconds (negative draws count as 0).
struct Distribution {
  enum class Kind { kConstant, kUniform, kLogNormal, kNormal, kExponential };
  Kind kind = Kind::kConstant;
  double a = 0.01;  // constant; uniform min; lognormal median; normal mean; exponential mean
  double b = 0;     // uniform max; lognormal sigma; normal stddev
  double sample(RandomStream& r) const;
};

// What one kind of kernel costs: per call, per GFLOP, per GiB moved, per
// 1e9 input elements built, per GFLOP per doubling of its operands beyond
// a core's cache, and per record read (scenario.KernelPrice).
struct KernelPrice {
  double per_call_s = 0;
  double per_gflop_s = 0;
  double per_gib_s = 0;
  double per_ginput_s = 0;
  double per_gflop_per_doubling_s = 0;
  double cache_bytes = 0;
  double per_record_s = 0;

  double seconds(const KernelWork& k) const;
};

class HostModel;

class SimCostModel final : public CostModel {
 public:
  // `per_gflop_s`: seconds per 1e9 of ComputeCost::flops (0: flops cost nothing).
  SimCostModel(Distribution step_time, double per_example_s, double per_gflop_s, int workers, const RandomStream& root);

  Duration compute(const TaskId& task, const ComputeCost& cost) override;
  // A step that lists its kernels is charged their prices instead of per_gflop_s
  // (a kind without a price: per_gflop_s on its flops).
  void set_kernel_price(const std::string& kind, KernelPrice price) { kernels_[kind] = price; }
  // The price of a worker's copies between a variable's value and its
  // shards, a curve over the variable's bytes in ns (MessageCosts.
  // data_assembly). Charged on hosts only, as a message's CPU is.
  void set_copy_curve(CostCurve curve) { copy_curve_ = std::move(curve); }
  Duration copy(const TaskId& task, double bytes) override;
  // Compute runs on the worker's host cores (shared with its other tasks).
  void set_hosts(HostModel* hosts) { hosts_ = hosts; }
  bool shares_cpu() const override { return hosts_ != nullptr; }
  void run(const TaskId& task, Duration work, Callback done) override;

  // A worker restarted: its new incarnation draws from a stream of its own.
  void restart(int worker, int start);
  // Permanent factor (scenario stragglers).
  void set_base_factor(int worker, double factor) { base_[static_cast<std::size_t>(worker)] = factor; }
  // Straggler faults: multiply while active.
  void push_factor(int worker, double factor);
  void pop_factor(int worker, double factor);
  double factor(int worker) const;

 private:
  Distribution step_time_;
  double per_example_s_;
  double per_gflop_s_;
  std::vector<RandomStream> streams_;             // per worker and incarnation, forked from the run's seed
  std::vector<double> base_;
  std::vector<std::vector<double>> active_;        // per worker: straggler faults now active
  RandomStream root_;
  std::map<std::string, KernelPrice, std::less<>> kernels_;
  CostCurve copy_curve_;
  HostModel* hosts_ = nullptr;
};

}  // namespace twinps::sim
