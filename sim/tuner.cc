#include "sim/tuner.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>

#include "sim/report.h"
#include "sim/scenario_loader.h"
#include "sim/simulation.h"
#include "sim/workload.h"

namespace twinps::sim {

namespace {

constexpr double kTimeLimitS = 36000;   // 10 simulated hours: a prediction that needs more is useless
constexpr std::int64_t kElementBytes = 4;  // float32, as the ParameterStore holds values

std::string percent(double fraction) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.0f %%", fraction * 100);
  return buf;
}

std::string percent1(double fraction) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f %%", fraction * 100);
  return buf;
}

std::string steps_string(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f steps/s", v);
  return buf;
}

// busy / span, at most 1: busy time is counted when a request's service or a
// message's transmission begins, so a phase can be charged a little of the
// next.
double busy_fraction(Duration busy, Duration span) {
  if (span <= 0) return 0;
  return std::min(1.0, static_cast<double>(busy) / static_cast<double>(span));
}

}  // namespace

namespace {

Status check_request(const PredictRequest& request) {
  if (request.workers < 1)
    return absl::InvalidArgumentError("workers must be at least 1 (got " + std::to_string(request.workers) + ")");
  if (request.ps < 1) return absl::InvalidArgumentError("ps must be at least 1 (got " + std::to_string(request.ps) + ")");
  if (request.warmup < 0 || request.measured < 0)
    return absl::InvalidArgumentError("warmup and measured must not be negative");
  return absl::OkStatus();
}

}  // namespace

scenario::Scenario throughput_scenario(const PredictRequest& request, CostsOf costs, double measured_for_s) {
  scenario::Scenario s;
  s.set_name("throughput");
  s.set_seed(request.seed);
  s.set_fidelity(request.timing_only ? scenario::TIMING_ONLY : scenario::NUMERIC);
  s.mutable_cluster()->set_workers(request.workers);
  s.mutable_cluster()->set_ps(request.ps);
  *s.mutable_model() = request.model;
  if (costs == CostsOf::kProfile) {
    apply_profile(request.profile, s);
  } else {
    // A real cluster's costs are this machine's: no step time is injected.
    s.mutable_compute()->mutable_step_time()->set_constant_s(0);
  }
  for (const auto& [worker, factor] : request.stragglers) {
    auto* st = s.mutable_compute()->add_straggler();
    st->set_worker(worker);
    st->set_factor(factor);
  }
  // Unlabelled actions: a labelled one would read `iterations` from its ps
  // after it, a request outside the measurement.
  s.add_program()->mutable_schedule()->set_count(request.warmup > 0 ? request.warmup : 4 * request.workers);
  s.add_program()->mutable_join();
  auto* measured = s.add_program()->mutable_schedule();
  if (request.measured > 0 || !(measured_for_s > 0))
    measured->set_count(request.measured > 0 ? request.measured : 20 * request.workers);
  else
    measured->set_for_s(measured_for_s);
  s.add_program()->mutable_join();
  // A real run that needs more than half an hour is stuck, not slow.
  s.set_time_limit_s(costs == CostsOf::kProfile ? kTimeLimitS : 1800);
  return s;
}

StatusOr<Prediction> read_throughput(const SimResult& r, const PredictRequest& request) {
  if (!r.setup_error.ok()) return r.setup_error;
  if (!r.starts.empty() && !r.starts.back().start_status.ok()) return r.starts.back().start_status;
  if (!r.finished)
    return absl::DeadlineExceededError("the program did not finish within " +
                                       std::to_string(to_seconds(r.time_limit)) + " s");
  for (const auto& a : r.actions)
    if (!a.status.ok()) return a.status;
  if (r.actions.size() != 4) return absl::InternalError("the throughput program did not run as written");
  const ActionRecord& scheduled = r.actions[2];
  const ActionRecord& joined = r.actions[3];
  const std::size_t warmup = r.actions[0].values_end;
  const std::size_t closures = scheduled.values_end - warmup;
  if (closures == 0 || r.values.size() != scheduled.values_end)
    return absl::InternalError("the throughput program did not run as written");
  const Duration span = joined.ended - scheduled.started;
  // A closure runs the model's steps_per_closure steps: figures are per step.
  const int per_closure = request.model.steps_per_closure();
  const double measured_steps = static_cast<double>(closures) * per_closure;
  Prediction p;
  p.warmup = static_cast<int>(warmup);
  p.measured = static_cast<int>(closures);
  p.measured_seconds = to_seconds(span);
  p.steps_per_second = span > 0 ? measured_steps / to_seconds(span) : 0;
  p.simulated_seconds = to_seconds(r.end_time);
  p.events = r.events;

  // Step times of the measured closures (by closure id), where recorded.
  std::set<std::uint64_t> ids;
  for (std::size_t i = warmup; i < r.values.size(); ++i) ids.insert(r.values[i].closure);
  std::vector<Duration> steps;
  for (const auto& st : r.steps)
    if (st.ok && st.fn == kTrainFn && ids.count(st.closure)) steps.push_back(st.duration / per_closure);
  p.step_p50_s = quantile_s(steps, 0.5);
  p.step_p99_s = quantile_s(std::move(steps), 0.99);

  // CPU per step of every task, by slot (the chief, the workers, the ps).
  const std::size_t slots = 1 + static_cast<std::size_t>(request.workers + request.ps);
  if (scheduled.cpu_at_start.size() == slots && joined.cpu_at_end.size() == slots) {
    for (std::size_t k = 0; k < slots; ++k)
      p.cpu_per_step_s.push_back(to_seconds(joined.cpu_at_end[k] - scheduled.cpu_at_start[k]) / measured_steps);
    p.chief_cpu_per_step_s = p.cpu_per_step_s[0];
    for (int w = 0; w < request.workers; ++w) p.worker_cpu_per_step_s += p.cpu_per_step_s[1 + w];
    for (int i = 0; i < request.ps; ++i) p.ps_cpu_per_step_s += p.cpu_per_step_s[1 + request.workers + i];
  }
  if (scheduled.waiting_at_start.size() == slots && joined.waiting_at_end.size() == slots)
    for (std::size_t k = 0; k < slots; ++k)
      p.waiting_per_step_s.push_back(to_seconds(joined.waiting_at_end[k] - scheduled.waiting_at_start[k]) /
                                     measured_steps);

  // The simulator's ps service model, where it ran.
  const auto ps = static_cast<std::size_t>(request.ps);
  if (scheduled.ps_at_start.size() == ps && joined.ps_at_end.size() == ps) {
    const int threads = request.profile.ps_service().threads();
    for (std::size_t i = 0; i < ps; ++i) {
      const PsReport& a = scheduled.ps_at_start[i];
      const PsReport& b = joined.ps_at_end[i];
      const double service = busy_fraction(b.service.busy - a.service.busy, span * threads);
      const double out = busy_fraction(b.uplink.busy - a.uplink.busy, span);
      const double in = busy_fraction(b.downlink.busy - a.downlink.busy, span);
      p.ps_utilisation.push_back(std::max({service, out, in}));
      const auto bytes = (b.service.bytes_in + b.service.bytes_out) - (a.service.bytes_in + a.service.bytes_out);
      p.ps_bytes_per_step.push_back(static_cast<double>(bytes) / measured_steps);
    }
  }
  return p;
}

namespace {

StatusOr<Prediction> predict_once(const PredictRequest& request) {
  scenario::Scenario s = throughput_scenario(request, CostsOf::kProfile);
  if (auto errors = validate_scenario(s, "the prediction's scenario"); !errors.empty()) {
    std::string message;
    for (const auto& e : errors) message += (message.empty() ? "" : "; ") + e.to_string();
    return absl::InvalidArgumentError(message);
  }
  Simulation simulation(s);
  return read_throughput(simulation.run(), request);
}

// Element by element; `total` of equal-sized vectors.
void add_to(std::vector<double>& total, const std::vector<double>& v) {
  if (total.size() != v.size()) return;
  for (std::size_t i = 0; i < v.size(); ++i) total[i] += v[i];
}

// The runs of one program with other seeds as one longer run: steps over
// the mean measured time, the other figures their means, the events their
// sum (what the prediction cost).
Prediction pooled(const std::vector<Prediction>& runs, const PredictRequest& request) {
  Prediction out = runs.front();
  for (std::size_t k = 1; k < runs.size(); ++k) {
    const Prediction& r = runs[k];
    out.measured_seconds += r.measured_seconds;
    out.step_p50_s += r.step_p50_s;
    out.step_p99_s += r.step_p99_s;
    out.simulated_seconds += r.simulated_seconds;
    out.events += r.events;
    out.chief_cpu_per_step_s += r.chief_cpu_per_step_s;
    out.worker_cpu_per_step_s += r.worker_cpu_per_step_s;
    out.ps_cpu_per_step_s += r.ps_cpu_per_step_s;
    add_to(out.ps_utilisation, r.ps_utilisation);
    add_to(out.ps_bytes_per_step, r.ps_bytes_per_step);
    add_to(out.cpu_per_step_s, r.cpu_per_step_s);
    add_to(out.waiting_per_step_s, r.waiting_per_step_s);
  }
  const double n = static_cast<double>(runs.size());
  for (double* v : {&out.measured_seconds, &out.step_p50_s, &out.step_p99_s, &out.simulated_seconds,
                    &out.chief_cpu_per_step_s, &out.worker_cpu_per_step_s, &out.ps_cpu_per_step_s})
    *v /= n;
  for (auto* v : {&out.ps_utilisation, &out.ps_bytes_per_step, &out.cpu_per_step_s, &out.waiting_per_step_s})
    for (double& x : *v) x /= n;
  const double steps = static_cast<double>(out.measured) * request.model.steps_per_closure();
  out.steps_per_second = out.measured_seconds > 0 ? steps / out.measured_seconds : 0;
  return out;
}

}  // namespace

int draws_per_prediction(const scenario::CostProfile& profile) {
  return profile.hosts().duration_spread() > 0 ? 3 : 1;
}

StatusOr<Prediction> predict(const PredictRequest& request) {
  TWINPS_RETURN_IF_ERROR(check_request(request));
  std::vector<Prediction> runs;
  for (int k = 0; k < draws_per_prediction(request.profile); ++k) {
    PredictRequest r = request;
    r.seed = request.seed + static_cast<std::uint64_t>(k);
    auto p = predict_once(r);
    if (!p.ok()) return p.status();
    runs.push_back(std::move(*p));
  }
  return runs.size() == 1 ? runs.front() : pooled(runs, request);
}

// ---------------------------------------------------------------- sweep

const char* partitioner_name(PartitionerKind kind) {
  switch (kind) {
    case PartitionerKind::kFixed: return "fixed";
    case PartitionerKind::kMinSize: return "min_size";
    case PartitionerKind::kMaxSize: return "max_size";
  }
  return "?";
}

const char* placement_name(scenario::VariablePlacement placement) {
  return placement == scenario::AUTO ? "auto" : "round_robin";
}

StatusOr<scenario::VariablePlacement> parse_placement(const std::string& name) {
  for (auto p : {scenario::ROUND_ROBIN, scenario::AUTO})
    if (name == placement_name(p)) return p;
  return absl::InvalidArgumentError("unknown placement \"" + name + "\" (choose round_robin or auto)");
}

StatusOr<PartitionerKind> parse_partitioner_kind(const std::string& name) {
  for (auto k : {PartitionerKind::kFixed, PartitionerKind::kMinSize, PartitionerKind::kMaxSize})
    if (name == partitioner_name(k)) return k;
  return absl::InvalidArgumentError("unknown partitioner \"" + name + "\" (choose fixed, min_size or max_size)");
}

namespace {

struct Largest {
  const scenario::Variable* variable = nullptr;
  std::int64_t rows = 0;
  std::int64_t bytes = 0;
};

// The variable the shard count is about: the largest in bytes (the first of
// equals). Scalars have no rows to split and never count.
Largest largest_variable(const scenario::SyntheticModel& model) {
  Largest out;
  for (const auto& v : model.variable()) {
    if (v.shape_size() == 0) continue;
    std::int64_t elements = 1;
    for (auto d : v.shape()) elements *= d;
    if (elements * kElementBytes > out.bytes) out = Largest{&v, v.shape(0), elements * kElementBytes};
  }
  return out;
}

}  // namespace

StatusOr<scenario::Partitioner> partitioner_for(const scenario::SyntheticModel& model, PartitionerKind kind,
                                                int shards) {
  if (shards < 1) return absl::InvalidArgumentError("shards must be at least 1 (got " + std::to_string(shards) + ")");
  const Largest big = largest_variable(model);
  if (big.variable == nullptr) return absl::InvalidArgumentError("the model has no variable with rows to shard");
  if (big.rows < shards)
    return absl::InvalidArgumentError(std::to_string(shards) + " shards of \"" + big.variable->name() + "\", which has " +
                                      std::to_string(big.rows) + " rows");
  scenario::Partitioner p;
  switch (kind) {
    case PartitionerKind::kFixed: p.set_fixed_shards(shards); break;
    case PartitionerKind::kMinSize:
      // ceil(bytes / floor(bytes / shards)) >= shards, capped at shards.
      p.mutable_min_size()->set_min_shard_bytes(std::max<std::int64_t>(1, big.bytes / shards));
      p.mutable_min_size()->set_max_shards(shards);
      break;
    case PartitionerKind::kMaxSize: {
      // ceil(rows / shards) rows per shard, which makes ceil(rows / that)
      // shards: `shards`, or fewer for some small row counts (checked below).
      const std::int64_t rows_per_shard = (big.rows + shards - 1) / shards;
      p.mutable_max_size()->set_max_shard_bytes(rows_per_shard * (big.bytes / big.rows));
      p.mutable_max_size()->set_max_shards(shards);
      break;
    }
  }
  // What core's partitioner really gives the variable.
  scenario::SyntheticModel with = model;
  *with.mutable_partitioner() = p;
  auto spec = model_spec(with);
  if (!spec.ok()) return spec.status();
  const Shape shape(big.variable->shape().begin(), big.variable->shape().end());
  const std::int64_t got = spec->partitioner->partition(shape, kElementBytes)[0];
  if (got != shards)
    return absl::InvalidArgumentError(std::string(partitioner_name(kind)) + " cannot split \"" +
                                      big.variable->name() + "\" (" + std::to_string(big.rows) + " rows) into " +
                                      std::to_string(shards) + " shards; it gives " + std::to_string(got));
  return p;
}

ClosureCounts closures_for(int workers, int ps_per_step, std::int64_t rows_per_step, std::uint64_t event_budget) {
  ClosureCounts c;
  c.warmup = 2 * workers;
  // A closure: dispatch and completion on the coordinator, then per ps a pull
  // and a push, each a delivery, a reply and a resumption; a timing-only step
  // also draws its rows (a power law and a sort: about 25 per event's time).
  const std::uint64_t per_closure = 10 + 6 * static_cast<std::uint64_t>(std::max(ps_per_step, 1)) +
                                    static_cast<std::uint64_t>(std::max<std::int64_t>(rows_per_step, 0)) / 25;
  const std::int64_t affordable =
      static_cast<std::int64_t>(event_budget / per_closure) - static_cast<std::int64_t>(c.warmup);
  const std::int64_t least = std::max<std::int64_t>(4 * std::int64_t{workers}, 200);
  const std::int64_t most = std::max<std::int64_t>(20 * std::int64_t{workers}, least);
  c.measured = static_cast<int>(std::clamp(affordable, least, most));
  return c;
}

namespace {

// What a configuration looks like to the simulator: which ps holds how many
// rows of what. Two candidates with the same layout give the same run.
struct Layout {
  std::string signature;
  int ps_per_step = 0;  // distinct ps a step visits, at most
  std::int64_t rows_per_step = 0;  // embedding rows a step draws
};

StatusOr<Layout> layout_of(const scenario::SyntheticModel& model, int ps, const scenario::PsService& prices) {
  auto spec = model_spec(model, prices);
  if (!spec.ok()) return spec.status();
  auto vars = synthetic::build_variables(*spec, ps, /*timing_only=*/true, 0);
  if (!vars.ok()) return vars.status();
  Layout out;
  std::set<int> visited;
  for (std::size_t i = 0; i < vars->layouts.size(); ++i) {
    const auto& v = vars->layouts[i];
    out.signature += v.name + ":";
    for (const auto& sh : v.shards) out.signature += std::to_string(sh.ps) + "/" + std::to_string(sh.rows) + ",";
    out.signature += ";";
    const bool per_step = i >= spec->variables.size() ? v.name == kIterationsVar : spec->variables[i].per_step;
    if (!per_step) continue;
    for (const auto& sh : v.shards) visited.insert(sh.ps);
    if (i < spec->variables.size()) out.rows_per_step += spec->variables[i].rows_per_step;
  }
  out.ps_per_step = static_cast<int>(visited.size());
  return out;
}

void fill_row_metrics(SweepRow& row) {
  const auto& bytes = row.prediction.ps_bytes_per_step;
  double total = 0;
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    total += bytes[i];
    if (bytes[i] > bytes[static_cast<std::size_t>(row.busiest_ps)]) row.busiest_ps = static_cast<int>(i);
  }
  row.bytes_per_step_max_ps = bytes.empty() ? 0 : bytes[static_cast<std::size_t>(row.busiest_ps)];
  row.max_ps_bytes_share = total > 0 ? row.bytes_per_step_max_ps / total : 0;
  for (double u : row.prediction.ps_utilisation) row.max_ps_utilisation = std::max(row.max_ps_utilisation, u);
}

std::string describe_row(const SweepRow& r) {
  return "ps " + std::to_string(r.ps) + ", " + partitioner_name(r.partitioner) + ", " + std::to_string(r.shards) +
         " shards" + (r.placement == scenario::AUTO ? ", auto placement" : "");
}

// "ps 4..7" or "ps 3" or "ps 1, 3"
std::string ps_list(const std::vector<int>& ps) {
  if (ps.size() == 1) return "ps " + std::to_string(ps[0]);
  bool contiguous = true;
  for (std::size_t i = 1; i < ps.size(); ++i) contiguous &= ps[i] == ps[i - 1] + 1;
  if (contiguous) return "ps " + std::to_string(ps.front()) + ".." + std::to_string(ps.back());
  std::string s = "ps ";
  for (std::size_t i = 0; i < ps.size(); ++i) s += (i ? ", " : "") + std::to_string(ps[i]);
  return s;
}

// What the numbers say about one configuration: idle ps, a hotspot, a
// saturated ps. Empty when nothing stands out.
std::vector<std::string> observations(const SweepRow& r) {
  std::vector<std::string> out;
  const auto& bytes = r.prediction.ps_bytes_per_step;
  std::vector<int> idle;
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    // A ps that only holds the step counter, or nothing, moves almost nothing.
    if (bytes[i] < 1e-3 * bytes[static_cast<std::size_t>(r.busiest_ps)]) idle.push_back(static_cast<int>(i));
  }
  if (!idle.empty())
    out.push_back(std::to_string(r.shards) + " shard" + (r.shards == 1 ? "" : "s") + " leave " + ps_list(idle) +
                  " idle");
  const int active = r.ps - static_cast<int>(idle.size());
  int busiest = 0;  // by utilisation
  for (std::size_t i = 0; i < r.prediction.ps_utilisation.size(); ++i)
    if (r.prediction.ps_utilisation[i] > r.prediction.ps_utilisation[static_cast<std::size_t>(busiest)])
      busiest = static_cast<int>(i);
  const bool saturated = r.max_ps_utilisation >= 0.85;
  // A hotspot: the busiest ps carries half again its fair share of the active ps.
  const bool hotspot = active > 1 && r.max_ps_bytes_share > 1.5 / active;
  if (hotspot)
    out.push_back("ps " + std::to_string(r.busiest_ps) + " is a hotspot: " + percent(r.max_ps_bytes_share) +
                  " of bytes (busy " +
                  percent(r.prediction.ps_utilisation[static_cast<std::size_t>(r.busiest_ps)]) + ")");
  if (saturated && !(hotspot && busiest == r.busiest_ps))
    out.push_back("ps " + std::to_string(busiest) + " is saturated (busy " + percent(r.max_ps_utilisation) + ")");
  if (r.max_ps_utilisation < 0.5)
    out.push_back("no ps limits it (the busiest is " + percent(r.max_ps_utilisation) + " busy)");
  return out;
}

std::string join(const std::vector<std::string>& parts, const char* sep) {
  std::string s;
  for (const auto& p : parts) s += (s.empty() ? "" : sep) + p;
  return s;
}

// Prefers the cheaper of the configurations close to the fastest — the
// fewest ps, then the fastest with that many — and says why from the numbers.
void recommend(SweepResult& out, double tolerance, const std::set<int>& ps_counts) {
  const SweepRow& fastest = out.rows.front();
  const double floor = fastest.prediction.steps_per_second * (1 - tolerance);
  int best = 0;
  for (std::size_t i = 1; i < out.rows.size(); ++i) {
    const SweepRow& r = out.rows[i];
    const SweepRow& b = out.rows[static_cast<std::size_t>(best)];
    // Rows are ranked: the first with the fewest ps is the fastest of those.
    if (r.prediction.steps_per_second >= floor && r.ps < b.ps) best = static_cast<int>(i);
  }
  out.recommended = best;
  SweepRow& chosen = out.rows[static_cast<std::size_t>(best)];
  chosen.recommended = true;

  std::vector<std::string> why;
  if (best == 0) {
    why.push_back(out.rows.size() > 1 ? "the fastest" : "the only candidate");
  } else {
    const double behind = 1 - chosen.prediction.steps_per_second / fastest.prediction.steps_per_second;
    why.push_back("within " + percent1(behind) + " of the fastest (" + describe_row(fastest) + ", " +
                  steps_string(fastest.prediction.steps_per_second) + ") with fewer ps (tolerance " +
                  percent1(tolerance) + ")");
  }
  for (auto& o : observations(chosen)) why.push_back(o);
  const int most_ps = *std::max_element(ps_counts.begin(), ps_counts.end());
  if (chosen.ps == most_ps && chosen.max_ps_utilisation >= 0.85 && ps_counts.size() > 1)
    why.push_back("its ps are busy at the most ps tried (" + std::to_string(most_ps) + "): more may be faster");
  // Why more ps do not pay: what limits the best configuration that has more.
  const SweepRow* more = nullptr;
  for (const auto& r : out.rows)
    if (r.ps > chosen.ps && (more == nullptr || r.ps > more->ps)) more = &r;  // rows are ranked: the first is its best
  // (Unless that is the fastest, already named, and nothing stands out in it.)
  if (more != nullptr && !(more == &out.rows.front() && observations(*more).empty())) {
    const double gain = more->prediction.steps_per_second / chosen.prediction.steps_per_second - 1;
    std::string s = "at " + std::to_string(more->ps) + " ps the best (" + partitioner_name(more->partitioner) + ", " +
                    std::to_string(more->shards) + " shards" +
                    (more->placement == scenario::AUTO ? ", auto placement" : "") + ") is " +
                    (gain >= 0 ? percent1(gain) + " faster" : percent1(-gain) + " slower");
    auto obs = observations(*more);
    if (!obs.empty()) s += ": " + join(obs, ", ");
    why.push_back(s);
  }
  out.reason = join(why, "; ");
}

}  // namespace

StatusOr<SweepResult> sweep(const SweepRequest& request, const std::function<void(int, int)>& progress) {
  if (request.workers < 1)
    return absl::InvalidArgumentError("workers must be at least 1 (got " + std::to_string(request.workers) + ")");
  if (request.ps.empty() || request.partitioners.empty() || request.shards.empty())
    return absl::InvalidArgumentError("name at least one ps count, partitioner and shard count");
  for (int p : request.ps)
    if (p < 1) return absl::InvalidArgumentError("a ps count must be at least 1 (got " + std::to_string(p) + ")");
  for (int s : request.shards)
    if (s < 1) return absl::InvalidArgumentError("a shard count must be at least 1 (got " + std::to_string(s) + ")");
  if (!(request.tolerance >= 0 && request.tolerance < 1))
    return absl::InvalidArgumentError("the tolerance must be in [0, 1)");

  // Candidates, in a stable order, without repeats.
  const std::set<int> ps_set(request.ps.begin(), request.ps.end());
  const std::set<int> shard_set(request.shards.begin(), request.shards.end());
  std::vector<PartitionerKind> kinds;
  for (auto k : request.partitioners)
    if (std::find(kinds.begin(), kinds.end(), k) == kinds.end()) kinds.push_back(k);

  SweepResult out;
  struct Candidate {
    SweepRow row;
    scenario::SyntheticModel model;
    Layout layout;
  };
  std::vector<Candidate> candidates;
  std::vector<scenario::VariablePlacement> placements;
  for (auto p : request.placements)
    if (std::find(placements.begin(), placements.end(), p) == placements.end()) placements.push_back(p);
  if (placements.empty()) return absl::InvalidArgumentError("name at least one placement");
  for (int ps : ps_set) {
    for (auto kind : kinds) {
      for (int shards : shard_set) {
        auto partitioner = partitioner_for(request.model, kind, shards);
        if (!partitioner.ok()) {
          out.skipped.push_back(std::string(partitioner_name(kind)) + " " + std::to_string(shards) + " shards: " +
                                std::string(partitioner.status().message()));
          continue;
        }
        for (auto placement : placements) {
          Candidate c;
          c.row.ps = ps;
          c.row.partitioner = kind;
          c.row.shards = shards;
          c.row.placement = placement;
          c.row.partitioner_config = *partitioner;
          c.model = request.model;
          *c.model.mutable_partitioner() = *partitioner;
          c.model.set_placement(placement);
          auto layout = layout_of(c.model, ps, request.profile.ps_service());
          if (!layout.ok()) return layout.status();
          c.layout = std::move(*layout);
          candidates.push_back(std::move(c));
        }
      }
    }
  }
  if (candidates.empty())
    return absl::InvalidArgumentError("no candidate can exist: " + join(out.skipped, "; "));

  // Predict each layout once.
  std::map<std::string, std::size_t> predicted;  // (ps, layout) -> candidate
  const std::string sep = "|";
  int done = 0;
  for (std::size_t i = 0; i < candidates.size(); ++i) {
    Candidate& c = candidates[i];
    const std::string key = std::to_string(c.row.ps) + sep + c.layout.signature;
    if (auto it = predicted.find(key); it != predicted.end()) {
      const SweepRow& earlier = candidates[it->second].row;
      c.row.prediction = earlier.prediction;
      c.row.warmup = earlier.warmup;
      c.row.measured = earlier.measured;
      c.row.same_as_earlier = true;
    } else {
      const ClosureCounts counts = closures_for(request.workers, c.layout.ps_per_step, c.layout.rows_per_step, request.event_budget);
      PredictRequest p;
      p.model = c.model;
      p.workers = request.workers;
      p.ps = c.row.ps;
      p.profile = request.profile;
      p.warmup = counts.warmup;
      p.measured = counts.measured;
      p.seed = request.seed;
      auto prediction = predict(p);
      if (!prediction.ok())
        return Status(prediction.status().code(),
                      describe_row(c.row) + ": " + std::string(prediction.status().message()));
      c.row.prediction = std::move(*prediction);
      c.row.warmup = counts.warmup;
      c.row.measured = counts.measured;
      out.events += c.row.prediction.events;
      predicted.emplace(key, i);
    }
    fill_row_metrics(c.row);
    if (progress) progress(++done, static_cast<int>(candidates.size()));
  }

  for (auto& c : candidates) out.rows.push_back(std::move(c.row));
  // Fastest first; equals (the same layout) in the order they were listed:
  // fewer ps, then the partitioner as given, then fewer shards.
  std::stable_sort(out.rows.begin(), out.rows.end(), [](const SweepRow& a, const SweepRow& b) {
    return a.prediction.steps_per_second > b.prediction.steps_per_second;
  });
  for (std::size_t i = 0; i < out.rows.size(); ++i) out.rows[i].rank = static_cast<int>(i) + 1;
  recommend(out, request.tolerance, ps_set);
  return out;
}

}  // namespace twinps::sim
