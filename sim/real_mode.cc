#include "sim/real_mode.h"

#include <algorithm>

namespace twinps::sim {

std::vector<std::string> real_mode_obstacles(const scenario::Scenario& s, int max_tasks) {
  std::vector<std::string> out;
  if (s.fidelity() != scenario::NUMERIC)
    out.push_back("fidelity: TIMING_ONLY parameter servers hold shapes only; real ones hold values");
  const int tasks = 1 + s.cluster().workers() + s.cluster().ps();
  if (tasks > max_tasks)
    out.push_back("cluster: " + std::to_string(tasks) + " tasks; real mode launches at most " +
                  std::to_string(max_tasks) + " processes on one machine");
  if (s.has_random_faults() && s.random_faults().count() > 0)
    out.push_back("random_faults: drawn for the simulator (they include coordinator crashes)");
  if (s.has_message_faults())
    out.push_back("message_faults: real mode applies task faults only (the FaultyTransport plan is not passed to "
                  "the worker processes)");
  if (s.has_hosts() || s.has_messages() || s.has_cost_profile() || s.has_ps_service())
    out.push_back("hosts/messages/cost_profile/ps_service: costs the simulator models; this machine has its own");
  for (int i = 0; i < s.fault_size(); ++i) {
    const auto& f = s.fault(i);
    const std::string where = "fault[" + std::to_string(i) + "] ";
    if (f.has_kill_coordinator())
      out.push_back(where + "kill_coordinator: the coordinator is the `twinps sim --real` process itself");
    if (f.has_slow_link()) out.push_back(where + "slow_link: a host link exists in the simulator's network model only");
    if (f.has_hotspot()) out.push_back(where + "hotspot: changes the simulated workload's access pattern");
  }
  return out;
}

std::optional<std::string> simulated_time_only(const scenario::Expectation& e) {
  switch (e.kind_case()) {
    case scenario::Expectation::kPsUtilisation:
      return "a ps's utilisation is the simulator's service model's busy time";
    case scenario::Expectation::kStepTime:
      return "step times are simulated compute; a real step takes the injected delay plus this machine's work";
    case scenario::Expectation::kInvariants:
      return "the invariants read every push the simulated ps applied, which real ps do not log";
    default: return std::nullopt;
  }
}

double real_step_delay_s(const scenario::Scenario& s, int worker) {
  double d = 0.01;  // the simulator's default step time
  const auto& st = s.compute().step_time();
  switch (st.kind_case()) {
    case scenario::Distribution::kConstantS: d = st.constant_s(); break;
    case scenario::Distribution::kUniform: d = (st.uniform().min_s() + st.uniform().max_s()) / 2; break;
    case scenario::Distribution::kLognormal: d = st.lognormal().median_s(); break;
    case scenario::Distribution::kNormal: d = std::max(0.0, st.normal().mean_s()); break;
    case scenario::Distribution::kExponentialMeanS: d = st.exponential_mean_s(); break;
    case scenario::Distribution::KIND_NOT_SET: break;
  }
  for (const auto& g : s.compute().straggler())
    if (g.worker() == worker) d *= g.factor();
  return d;
}

}  // namespace twinps::sim
