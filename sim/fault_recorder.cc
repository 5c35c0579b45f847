#include "sim/fault_recorder.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>

#include <google/protobuf/text_format.h>

namespace twinps::sim {

namespace {

using Kind = CoordinatorEvent::Kind;

std::string seconds(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f s", s);
  return buf;
}

scenario::Code code_of(const Status& s) { return static_cast<scenario::Code>(static_cast<int>(s.code())); }

}  // namespace

std::function<void(const CoordinatorEvent&)> FaultRecorder::observer() {
  return [this](const CoordinatorEvent& e) {
    if (e.kind == Kind::kStarted && !started_) started_ = e.at;
    events_.push_back(e);
  };
}

double FaultRecorder::since_start(Time t) const {
  // Before the cluster was formed (a task found failed while it formed) counts as its start.
  return std::max(0.0, to_seconds(t - started_.value_or(0)));
}

std::vector<FaultRecorder::Observed> FaultRecorder::observed_faults() const {
  std::vector<Observed> out;
  std::set<TaskId> ps_seen;
  for (std::size_t i = 0; i < events_.size(); ++i) {
    const CoordinatorEvent& e = events_[i];
    if (e.kind == Kind::kPsFailed) {
      // The first report of each ps: later ones are the same failure seen by other closures.
      if (!ps_seen.insert(e.task).second) continue;
      Observed o;
      o.fault.set_at_s(since_start(e.at));
      if (e.heartbeats_missed) {
        o.fault.set_pause(e.task.short_name());
        o.note = e.task.short_name() + " missed its health checks at " + seconds(since_start(e.at)) + " (" +
                 describe(e.cause) + "): hung for the rest of the run";
      } else {
        o.fault.set_kill_ps(e.task.index);
        o.note = e.task.short_name() + " failed a closure's call at " + seconds(since_start(e.at)) + " (" +
                 describe(e.cause) + "): killed for the rest of the run";
      }
      out.push_back(std::move(o));
      continue;
    }
    if (e.kind != Kind::kWorkerFailed) continue;
    // When it came back: its next recovery.
    const CoordinatorEvent* back = nullptr;
    for (std::size_t j = i + 1; j < events_.size() && !back; ++j)
      if (events_[j].kind == Kind::kWorkerRecovered && events_[j].task == e.task) back = &events_[j];
    const bool new_incarnation = back && back->incarnation != back->previous_incarnation;
    const bool refused = !e.heartbeats_missed;
    Observed o;
    const std::string name = e.task.short_name();
    Time from = e.at;
    if (new_incarnation || (refused && !back)) {
      // Died: the coordinator found it gone when it found its call failed (or its answer from another process).
      o.fault.set_kill_worker(e.task.index);
      o.note = name + " given up at " + seconds(since_start(e.at)) + " (" +
               (e.heartbeats_missed ? "missed health checks: " : "a call failed: ") + describe(e.cause) + ")";
      o.note += back ? "; back as a new incarnation at " + seconds(since_start(back->at)) + ": died and restarted"
                     : "; never back: died";
    } else {
      // Alive all along (the same incarnation came back, or it failed only its health checks): hung from
      // when it last answered, or unreachable if its checks were refused rather than timed out.
      from = std::min(e.last_heard, e.at);
      const bool unreachable = e.heartbeats_missed && e.cause.code() == StatusCode::kUnavailable;
      if (unreachable) {
        o.fault.mutable_partition()->add_a(name);
      } else {
        o.fault.set_pause(name);
      }
      o.note = name + " last answered at " + seconds(since_start(from)) + ", given up at " + seconds(since_start(e.at)) +
               " (" + (e.heartbeats_missed ? "missed health checks: " : "a call failed: ") + describe(e.cause) + ")";
      o.note += back ? "; back as the same incarnation at " + seconds(since_start(back->at)) + ": " +
                           (unreachable ? "unreachable" : "hung") + " meanwhile"
                     : std::string("; never back: ") + (unreachable ? "unreachable" : "hung") + " for the rest of the run";
    }
    o.fault.set_at_s(since_start(from));
    if (back) o.fault.set_duration_s(std::max(0.0, since_start(back->at) - since_start(from)));
    out.push_back(std::move(o));
  }
  std::stable_sort(out.begin(), out.end(),
                   [](const Observed& a, const Observed& b) { return a.fault.at_s() < b.fault.at_s(); });
  return out;
}

std::vector<std::string> FaultRecorder::observations() const {
  std::vector<std::string> out;
  for (const auto& o : observed_faults()) out.push_back(o.note);
  return out;
}

std::optional<std::pair<double, std::size_t>> FaultRecorder::median_step_s() const {
  std::vector<double> runs;
  for (const auto& e : events_) {
    if (e.kind != Kind::kClosureFinished) continue;
    if (std::find(excluded_.begin(), excluded_.end(), e.closure) != excluded_.end()) continue;
    runs.push_back(to_seconds(e.at - e.dispatched_at));
  }
  if (runs.empty()) return std::nullopt;
  std::sort(runs.begin(), runs.end());
  return std::make_pair(runs[runs.size() / 2], runs.size());
}

scenario::Scenario FaultRecorder::scenario(scenario::Scenario s, const RecordedOutcome& outcome) const {
  s.clear_fault();
  s.clear_random_faults();
  s.clear_expect();
  s.clear_sim_only();
  s.set_name("recorded: " + (s.name().empty() ? std::string("a real run") : s.name()));
  s.clear_description();
  if (auto step = median_step_s()) {
    s.mutable_compute()->clear_straggler();
    s.mutable_compute()->mutable_step_time()->set_constant_s(step->first);
  }
  for (auto& o : observed_faults()) *s.add_fault() = std::move(o.fault);

  const CoordinatorStats& st = outcome.stats;
  auto stat = [&s](scenario::StatCheck::Counter c) {
    auto* x = s.add_expect()->mutable_stat();
    x->set_counter(c);
    return x;
  };
  for (const auto& [label, status] : outcome.labelled) {
    auto* x = s.add_expect()->mutable_outcome();
    x->set_label(label);
    x->add_code(code_of(status));
  }
  stat(scenario::StatCheck::WORKER_FAILURES)->set_equals(static_cast<double>(st.worker_failures));
  stat(scenario::StatCheck::WORKER_RECOVERIES)->set_equals(static_cast<double>(st.worker_recoveries));
  // Which closure is in flight when a failure is found depends on timing:
  // each failure may put back one closure more or less.
  const std::uint64_t failures = st.worker_failures + st.ps_failures_retried + st.timeouts_retried;
  const std::uint64_t retried_min = std::max(st.retried > failures ? st.retried - failures : std::uint64_t{0}, std::min(st.retried, failures));
  const std::uint64_t retried_max = st.retried + failures;
  {
    auto* x = stat(scenario::StatCheck::RETRIED);
    if (retried_min == retried_max) {
      x->set_equals(static_cast<double>(st.retried));
    } else {
      x->set_at_least(static_cast<double>(retried_min));
      x->set_at_most(static_cast<double>(retried_max));
    }
  }
  if (st.ps_failures_retried > 0)
    stat(scenario::StatCheck::PS_FAILURES_RETRIED)->set_equals(static_cast<double>(st.ps_failures_retried));
  stat(scenario::StatCheck::ERRORS_RAISED)->set_equals(static_cast<double>(st.errors_raised));
  {
    std::set<int> codes;
    for (const auto& [label, status] : outcome.labelled)
      if (!status.ok()) codes.insert(code_of(status));
    if (!codes.empty()) {
      auto* x = s.add_expect()->mutable_raised();
      for (int c : codes) x->add_code(static_cast<scenario::Code>(c));
    }
  }
  if (outcome.per_worker_dataset) {
    std::set<int> recovered;
    for (const auto& e : events_)
      if (e.kind == Kind::kWorkerRecovered) recovered.insert(e.task.index);
    for (int w : recovered) s.add_expect()->mutable_dataset_rebuilt()->set_worker(w);
  }
  if (outcome.all_closures_resolved && *outcome.all_closures_resolved) s.add_expect()->set_all_closures_resolved(true);
  // Iterations: a run that raised an error cancelled closures depending on
  // timing, so its count has no bound of its own (none is written). Looping
  // steps add at least one each. Otherwise every closure's update was applied
  // once, and each retried one possibly twice (it may have been applied
  // before its worker was given up): the count is within the retries, each
  // worth the steps a closure runs.
  if (outcome.iterations && st.errors_raised == 0) {
    auto* x = s.add_expect()->mutable_iterations();
    if (outcome.iterations_after) x->set_after(*outcome.iterations_after);
    const auto it = static_cast<double>(*outcome.iterations);
    const auto steps = static_cast<double>(std::max<std::int64_t>(1, outcome.steps_per_closure));
    if (outcome.infinite_steps) {
      x->set_at_least(std::min(it, static_cast<double>(st.completed)));
    } else {
      x->set_at_least(std::max(0.0, it - steps * static_cast<double>(st.retried)));
      x->set_at_most(it + steps * static_cast<double>(retried_max));
    }
  }
  return s;
}

std::string FaultRecorder::text(const scenario::Scenario& s, const std::string& how) const {
  std::string out;
  out += "# Recorded by " + how + ".\n";
  out += "# Replay it with `twinps sim FILE`: its expectations are the real run's outcome.\n#\n";
  out += "# Faults: as the coordinator observed them (its failure and recovery events,\n";
  out += "# CoordinatorOptions::on_event), not as anything injected them; times from the\n";
  out += "# moment the coordinator had formed the cluster. A worker that came back as a new\n";
  out += "# incarnation died (kill_worker, from when it was given up); one that came back as\n";
  out += "# the same incarnation after missing health checks that timed out was hung (pause,\n";
  out += "# from when it last answered); refused ones: unreachable (partition).\n";
  const auto notes = observations();
  if (notes.empty()) out += "#   (no failure observed)\n";
  for (const auto& n : notes) out += "#   " + n + "\n";
  if (auto step = median_step_s())
    out += "# compute.step_time: the median of " + std::to_string(step->second) +
           " closures' run time on the workers, from dispatch to reply.\n";
  else
    out += "# compute.step_time: no closure finished to measure; the run's own setting is kept.\n";
  out += "# Expectations: the run's counters; retries within one closure per failure either\n";
  out += "# way, iterations within the retries (a retried step may have been applied twice).\n";
  std::string body;
  google::protobuf::TextFormat::PrintToString(s, &body);
  return out + body;
}

scenario::Coordinator scenario_coordinator(const CoordinatorOptions& o, double ps_call_timeout_s) {
  scenario::Coordinator c;
  c.set_transient_ps_failures(o.transient_ps_failures);
  c.set_transient_timeouts(o.transient_timeouts);
  c.set_heartbeat_interval_s(to_seconds(o.heartbeat_interval));
  c.set_heartbeat_timeout_s(to_seconds(o.heartbeat_timeout));
  c.set_heartbeat_misses(o.heartbeat_misses);
  c.set_closure_timeout_s(to_seconds(o.closure_timeout));
  c.set_rpc_timeout_s(to_seconds(o.rpc_timeout));
  c.set_ps_call_timeout_s(ps_call_timeout_s);
  c.set_queue_capacity(static_cast<std::int64_t>(o.queue_capacity));
  c.set_mode(o.mode == TrainingMode::kSsp ? scenario::SSP : o.mode == TrainingMode::kSync ? scenario::SYNC : scenario::ASYNC);
  if (o.mode == TrainingMode::kSsp) c.set_staleness_bound(o.staleness_bound);
  if (o.mode == TrainingMode::kSync) c.set_backup_workers(o.backup_workers);
  // The ps failure policy: a run that recovered a ps in place replays as one.
  if (o.ps_failure != PsFailurePolicy::kRaise) {
    c.set_ps_failure(o.ps_failure == PsFailurePolicy::kRestore ? scenario::RESTORE : scenario::ROLLBACK);
    c.set_ps_recovery_wait_s(to_seconds(o.ps_recovery_wait));
  }
  return c;
}

}  // namespace twinps::sim
