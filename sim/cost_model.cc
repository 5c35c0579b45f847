#include "sim/cost_model.h"

#include <algorithm>
#include <cmath>

#include "sim/hosts.h"

namespace twinps::sim {

double Distribution::sample(RandomStream& r) const {
  double s = 0;
  switch (kind) {
    case Kind::kConstant: s = a; break;
    case Kind::kUniform: s = r.uniform(a, b); break;
    case Kind::kLogNormal: s = r.lognormal(a, b); break;
    case Kind::kNormal: s = r.normal(a, b); break;
    case Kind::kExponential: s = r.exponential(a); break;
  }
  return std::max(s, 0.0);
}

SimCostModel::SimCostModel(Distribution step_time, double per_example_s, double per_gflop_s, int workers,
                           const RandomStream& root)
    : step_time_(step_time),
      per_example_s_(per_example_s),
      per_gflop_s_(per_gflop_s),
      base_(static_cast<std::size_t>(workers), 1.0),
      active_(static_cast<std::size_t>(workers)),
      root_(root.fork("compute")) {
  for (int i = 0; i < workers; ++i) restart(i, 1);
}

void SimCostModel::restart(int worker, int start) {
  RandomStream s = root_.fork("worker", static_cast<std::uint64_t>(worker)).fork("start", static_cast<std::uint64_t>(start));
  if (streams_.size() <= static_cast<std::size_t>(worker)) streams_.resize(static_cast<std::size_t>(worker) + 1, s);
  streams_[static_cast<std::size_t>(worker)] = s;
}

double SimCostModel::factor(int worker) const {
  double f = base_[static_cast<std::size_t>(worker)];
  for (double a : active_[static_cast<std::size_t>(worker)]) f *= a;
  return f;
}

void SimCostModel::push_factor(int worker, double factor) { active_[static_cast<std::size_t>(worker)].push_back(factor); }

void SimCostModel::pop_factor(int worker, double factor) {
  auto& a = active_[static_cast<std::size_t>(worker)];
  if (auto it = std::find(a.begin(), a.end(), factor); it != a.end()) a.erase(it);
}

double KernelPrice::seconds(const KernelWork& k) const {
  double s = per_call_s + per_gflop_s * k.flops / 1e9 + per_gib_s * k.bytes / double(1 << 30) +
             per_ginput_s * k.inputs / 1e9 + per_record_s * k.records;
  // Operands: the weights and the input the kernel builds (floats).
  const double operands = k.bytes + 4.0 * k.inputs;
  if (cache_bytes > 0 && operands > cache_bytes)
    s += per_gflop_per_doubling_s * k.flops / 1e9 * std::log2(operands / cache_bytes);
  return s;
}

Duration SimCostModel::compute(const TaskId& task, const ComputeCost& cost) {
  if (task.job != Job::kWorker || task.index < 0 || static_cast<std::size_t>(task.index) >= streams_.size()) return 0;
  double seconds = step_time_.sample(streams_[static_cast<std::size_t>(task.index)]) +
                   per_example_s_ * static_cast<double>(cost.examples);
  if (cost.kernels.empty() || kernels_.empty()) {
    seconds += per_gflop_s_ * cost.flops / 1e9;
  } else {
    for (const KernelWork& k : cost.kernels) {
      auto it = kernels_.find(k.kind);
      if (it == kernels_.end()) {
        seconds += per_gflop_s_ * k.flops / 1e9;
        continue;
      }
      seconds += it->second.seconds(k);
    }
  }
  return from_seconds(seconds * factor(task.index));
}

Duration SimCostModel::copy(const TaskId& task, double bytes) {
  (void)task;
  if (!hosts_ || copy_curve_.empty()) return 0;
  return static_cast<Duration>(std::llround(curve_cost(copy_curve_, bytes)));
}

void SimCostModel::run(const TaskId& task, Duration work, Callback done) {
  hosts_->run(hosts_->slot(task), work, std::move(done));
}

}  // namespace twinps::sim
