#include "sim/expectations.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <optional>

#include "core/coordinator/closure_queue.h"
#include "core/training/model_functions.h"
#include "sim/real_mode.h"
#include "sim/report.h"
#include "sim/workload.h"

namespace twinps::sim {

namespace {

std::string num(double v) {
  char buf[64];
  if (v == std::floor(v) && std::fabs(v) < 1e15) std::snprintf(buf, sizeof buf, "%.0f", v);
  else std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

// equals / at_least / at_most of any check message, by reflection.
struct Bounds {
  std::optional<double> eq, lo, hi;
  template <typename M>
  static Bounds of(const M& m) {
    Bounds b;
    if (m.has_equals()) b.eq = m.equals();
    if (m.has_at_least()) b.lo = m.at_least();
    if (m.has_at_most()) b.hi = m.at_most();
    return b;
  }
  bool holds(double v) const {
    return (!eq || v == *eq) && (!lo || v >= *lo) && (!hi || v <= *hi);
  }
  std::string str() const {
    std::string s;
    auto add = [&](const std::string& part) { s += (s.empty() ? "" : " and ") + part; };
    if (eq) add("== " + num(*eq));
    if (lo) add(">= " + num(*lo));
    if (hi) add("<= " + num(*hi));
    return s;
  }
};

std::string code_name(StatusCode c) { return absl::StatusCodeToString(c); }

std::string codes_str(const google::protobuf::RepeatedField<int>& codes) {
  std::string s;
  for (int c : codes) s += (s.empty() ? "" : " or ") + scenario::Code_Name(static_cast<scenario::Code>(c));
  return s;
}
bool code_in(StatusCode c, const google::protobuf::RepeatedField<int>& codes) {
  return std::any_of(codes.begin(), codes.end(), [&](int x) { return x == static_cast<int>(c); });
}

std::string counter_name(scenario::StatCheck::Counter c) { return scenario::StatCheck::Counter_Name(c); }

std::uint64_t counter_value(const CoordinatorStats& s, scenario::StatCheck::Counter c) {
  switch (c) {
    case scenario::StatCheck::SCHEDULED: return s.scheduled;
    case scenario::StatCheck::COMPLETED: return s.completed;
    case scenario::StatCheck::FAILED: return s.failed;
    case scenario::StatCheck::RETRIED: return s.retried;
    case scenario::StatCheck::CANCELLED: return s.cancelled;
    case scenario::StatCheck::DISPATCHED: return s.dispatched;
    case scenario::StatCheck::WORKER_FAILURES: return s.worker_failures;
    case scenario::StatCheck::WORKER_RECOVERIES: return s.worker_recoveries;
    case scenario::StatCheck::RESOURCES_BUILT: return s.resources_built;
    case scenario::StatCheck::PS_FAILURES_RETRIED: return s.ps_failures_retried;
    case scenario::StatCheck::TIMEOUTS_RETRIED: return s.timeouts_retried;
    case scenario::StatCheck::ERRORS_RAISED: return s.errors_raised;
    case scenario::StatCheck::SYNC_STEPS: return s.sync_steps;
    case scenario::StatCheck::DROPPED_GRADIENTS: return s.staleness.dropped;
    case scenario::StatCheck::PS_RECOVERIES: return s.ps_recoveries;
  }
  return 0;
}

// The last run of the labelled action (a restarted program runs it again).
const ActionRecord* last_action(const SimResult& r, const std::string& label) {
  const ActionRecord* found = nullptr;
  for (const auto& a : r.actions)
    if (a.label == label) found = &a;
  return found;
}

const ValueRecord* last_value(const SimResult& r, const std::string& label, int index) {
  const ValueRecord* found = nullptr;
  for (const auto& v : r.values)
    if (v.label == label && v.index == index) found = &v;
  return found;
}

std::string value_result(const ValueRecord& v) {
  if (v.status == RemoteValueStatus::kNotReady) return "NOT_READY";
  if (v.status == RemoteValueStatus::kAborted) return "ABORTED";
  return v.outcome.ok() ? "OK (a value)" : code_name(v.outcome.code()) + " (" + std::string(v.outcome.message()) + ")";
}

// An expectation that only a simulated run can check, named for the report.
std::string simulated_expectation_name(const scenario::Expectation& x) {
  switch (x.kind_case()) {
    case scenario::Expectation::kPsUtilisation:
      return "ps:" + std::to_string(x.ps_utilisation().ps()) + " utilisation " + Bounds::of(x.ps_utilisation()).str();
    case scenario::Expectation::kStepTime:
      return "step time p" + num(x.step_time().quantile() * 100) +
             (x.step_time().has_worker() ? " of worker:" + std::to_string(x.step_time().worker()) : "") + " " +
             Bounds::of(x.step_time()).str() + " s";
    case scenario::Expectation::kInvariants: return "the coordinator's invariants hold";
    case scenario::Expectation::kResumedAtEpoch:
      return "the last coordinator program resumed at epoch " + Bounds::of(x.resumed_at_epoch()).str();
    case scenario::Expectation::kAccuracy: return "accuracy of the last epoch " + Bounds::of(x.accuracy()).str();
    default: return "expectation";
  }
}

// Visit counts summarised: how many examples were visited how often, and
// the first few outside the bounds ("400 examples: 380 x1, 20 x2; outside:
// example 0 (2), ...").
std::string describe_visits(const std::vector<std::int64_t>& visits, const Bounds& b) {
  std::map<std::int64_t, std::int64_t> how_often;
  for (std::int64_t n : visits) ++how_often[n];
  std::string out = std::to_string(visits.size()) + " examples:";
  bool first = true;
  for (const auto& [n, count] : how_often) {
    out += (first ? " " : ", ") + std::to_string(count) + " x" + std::to_string(n);
    first = false;
  }
  std::string outside;
  int shown = 0;
  for (std::size_t i = 0; i < visits.size() && shown < 5; ++i) {
    if (b.holds(static_cast<double>(visits[i]))) continue;
    outside += (shown == 0 ? "" : ", ") + std::string("example ") + std::to_string(i) + " (" + std::to_string(visits[i]) + ")";
    ++shown;
  }
  if (!outside.empty()) out += "; outside the bounds: " + outside + (shown == 5 ? ", ..." : "");
  return out;
}

bool is_train_step(const std::string& fn) { return fn == kTrainFn || fn == training::kTrainStep; }

}  // namespace

std::vector<ExpectationResult> check_expectations(const scenario::Scenario& sc, const SimResult& r, RunMode mode) {
  std::vector<ExpectationResult> out;
  {
    ExpectationResult e{"the program finishes within the time limit (" + num(sc.time_limit_s()) + " s" +
                            (mode == RunMode::kReal ? " of wall-clock time" : "") + ")",
                        r.finished, ""};
    if (!r.finished) {
      e.observed = "still running at " + num(to_seconds(r.end_time)) + " s";
      for (auto it = r.actions.rbegin(); it != r.actions.rend(); ++it) {
        e.observed += "; last finished action: " + it->kind + (it->label.empty() ? "" : " \"" + it->label + "\"");
        break;
      }
    } else if (!r.starts.empty() && !r.starts.back().start_status.ok()) {
      e.passed = false;
      e.observed = "the coordinator did not start: " + describe(r.starts.back().start_status);
    } else {
      e.observed = "finished at " + num(to_seconds(r.end_time)) + " s";
    }
    out.push_back(e);
  }
  const int last_start = static_cast<int>(r.starts.size()) - 1;

  for (const auto& x : sc.expect()) {
    ExpectationResult e;
    if (mode == RunMode::kReal) {
      if (auto why = simulated_time_only(x)) {
        // What it would check, for the report, from a run that cannot show it.
        e.what = simulated_expectation_name(x);
        e.applicable = false;
        e.observed = "n/a: " + *why;
        out.push_back(std::move(e));
        continue;
      }
    }
    switch (x.kind_case()) {
      case scenario::Expectation::kClosuresAccounted: {
        e.what = "every closure accounted for (scheduled = completed + failed + cancelled, every value OK)";
        const auto& s = r.stats;
        int total = 0, not_ok = 0;
        for (const auto& v : r.values) {
          if (v.program_start != last_start) continue;
          ++total;
          if (v.status != RemoteValueStatus::kReady || !v.outcome.ok()) ++not_ok;
        }
        const bool adds_up = s.scheduled == s.completed + s.failed + s.cancelled;
        e.passed = total > 0 && adds_up && not_ok == 0;
        e.observed = std::to_string(s.scheduled) + " scheduled, " + std::to_string(s.completed) + " completed, " +
                     std::to_string(s.failed) + " failed, " + std::to_string(s.cancelled) + " cancelled, " +
                     std::to_string(s.retried) + " retried; " + std::to_string(total - not_ok) + " of " +
                     std::to_string(total) + " values OK";
        break;
      }
      case scenario::Expectation::kAllClosuresResolved: {
        e.what = "every closure resolved";
        int total = 0, unresolved = 0;
        std::string first;
        for (const auto& v : r.values) {
          if (v.program_start != last_start) continue;
          ++total;
          if (v.status != RemoteValueStatus::kReady) {
            if (unresolved++ == 0) first = v.label + "[" + std::to_string(v.index) + "]";
          }
        }
        // A check over nothing proves nothing: no closure means the program
        // never scheduled one (or never got to), which must not read as a pass.
        e.passed = total > 0 && unresolved == 0;
        e.observed = total == 0       ? "vacuous: the program got no RemoteValue to check"
                     : unresolved == 0 ? std::to_string(total) + " of " + std::to_string(total) + " resolved"
                                       : std::to_string(unresolved) + " of " + std::to_string(total) +
                                             " without a result (first: " + first + ")";
        break;
      }
      case scenario::Expectation::kStat: {
        const auto b = Bounds::of(x.stat());
        const auto v = counter_value(r.stats, x.stat().counter());
        e.what = "stat " + counter_name(x.stat().counter()) + " " + b.str();
        e.passed = b.holds(static_cast<double>(v));
        e.observed = std::to_string(v);
        break;
      }
      case scenario::Expectation::kRaised: {
        e.what = "some schedule/join/done raised " + codes_str(x.raised().code());
        std::string seen;
        for (const auto& a : r.actions) {
          if (a.status.ok()) continue;
          seen += (seen.empty() ? "" : ", ") + a.kind + " " + code_name(a.status.code());
          if (code_in(a.status.code(), x.raised().code())) e.passed = true;
        }
        e.observed = seen.empty() ? "nothing raised" : seen;
        break;
      }
      case scenario::Expectation::kOutcome: {
        e.what = "\"" + x.outcome().label() + "\" ends with " + codes_str(x.outcome().code());
        if (const auto* a = last_action(r, x.outcome().label())) {
          e.passed = code_in(a->status.code(), x.outcome().code());
          e.observed = a->status.ok() ? "OK" : describe(a->status);
        } else {
          e.observed = "it never ran";
        }
        break;
      }
      case scenario::Expectation::kRemoteValue: {
        const auto& rv = x.remote_value();
        e.what = "RemoteValue " + rv.label() + "[" + std::to_string(rv.index()) + "] is " + codes_str(rv.code());
        if (const auto* v = last_value(r, rv.label(), rv.index())) {
          e.passed = v->status == RemoteValueStatus::kReady && code_in(v->outcome.code(), rv.code());
          e.observed = value_result(*v);
        } else {
          e.observed = "it was never scheduled";
        }
        break;
      }
      case scenario::Expectation::kAccuracy: {
        const auto b = Bounds::of(x.accuracy());
        e.what = "accuracy of the last epoch " + b.str();
        if (r.epochs.empty()) {
          e.observed = "no epoch finished";
        } else {
          e.passed = b.holds(r.epochs.back().train.accuracy.value_or(0));
          e.observed = num(r.epochs.back().train.accuracy.value_or(0)) + " (epoch " + std::to_string(r.epochs.back().epoch) + ")";
        }
        break;
      }
      case scenario::Expectation::kIterations: {
        const auto& it = x.iterations();
        const auto b = Bounds::of(it);
        std::optional<std::int64_t> v;
        if (it.has_after()) {
          e.what = "iterations after \"" + it.after() + "\" " + b.str();
          const auto* a = last_action(r, it.after());
          if (a) v = a->iterations;
          if (!a) e.observed = "\"" + it.after() + "\" never ran";
        } else {
          e.what = "iterations at the end " + b.str();
          v = r.final_iterations;
        }
        if (v) {
          e.passed = b.holds(static_cast<double>(*v));
          e.observed = std::to_string(*v);
        } else if (e.observed.empty()) {
          e.observed = "unreadable (the ps holding it is down or was restarted empty)";
        }
        break;
      }
      case scenario::Expectation::kDatasetRebuilt: {
        const int w = x.dataset_rebuilt().worker();
        e.what = "worker:" + std::to_string(w) + " rebuilds its dataset before its next closure after each recovery";
        int recoveries = 0;
        std::string problem;
        for (const auto& s : r.starts) {
          const auto& log = s.dispatch_log;
          for (std::size_t i = 0; i < log.size(); ++i) {
            if (log[i].worker != w || log[i].kind != DispatchRecord::Kind::kWorkerRecovered) continue;
            ++recoveries;
            int rebuilt = 0;
            for (std::size_t j = i + 1; j < log.size(); ++j) {
              if (log[j].worker != w) continue;
              if (log[j].kind == DispatchRecord::Kind::kResource) {
                ++rebuilt;
                continue;
              }
              if (log[j].kind == DispatchRecord::Kind::kClosure && rebuilt == 0 && problem.empty())
                problem = "after the recovery at " + num(to_seconds(log[i].time)) + " s, closure " +
                          std::to_string(log[j].id) + " ran before any resource was rebuilt";
              break;
            }
          }
        }
        e.passed = recoveries > 0 && problem.empty();
        e.observed = !problem.empty() ? problem
                                      : "recovered " + std::to_string(recoveries) + " time" + (recoveries == 1 ? "" : "s");
        break;
      }
      case scenario::Expectation::kResumedAtEpoch: {
        const auto b = Bounds::of(x.resumed_at_epoch());
        e.what = "the last coordinator program resumed at epoch " + b.str();
        if (r.starts.empty()) {
          e.observed = "never started";
        } else {
          e.passed = b.holds(r.starts.back().start_epoch);
          e.observed = "epoch " + std::to_string(r.starts.back().start_epoch) + " (program start " +
                       std::to_string(r.starts.size()) + ")";
        }
        break;
      }
      case scenario::Expectation::kPsUtilisation: {
        const auto b = Bounds::of(x.ps_utilisation());
        const int p = x.ps_utilisation().ps();
        e.what = "ps:" + std::to_string(p) + " utilisation " + b.str();
        const double u = r.ps[static_cast<std::size_t>(p)].utilisation;
        e.passed = b.holds(u);
        e.observed = num(u);
        break;
      }
      case scenario::Expectation::kWorkerClosures: {
        const auto b = Bounds::of(x.worker_closures());
        const int w = x.worker_closures().worker();
        e.what = "closures dispatched to worker:" + std::to_string(w) + " " + b.str();
        const auto& per = r.stats.closures_per_worker;
        const double v = static_cast<std::size_t>(w) < per.size() ? static_cast<double>(per[static_cast<std::size_t>(w)]) : 0;
        e.passed = b.holds(v);
        e.observed = num(v);
        break;
      }
      case scenario::Expectation::kStepTime: {
        const auto& st = x.step_time();
        const auto b = Bounds::of(st);
        e.what = "step time p" + num(st.quantile() * 100) + (st.has_worker() ? " of worker:" + std::to_string(st.worker()) : "") +
                 " " + b.str() + " s";
        std::vector<Duration> d;
        for (const auto& s : r.steps)
          if (s.ok && is_train_step(s.fn) && (!st.has_worker() || s.worker == st.worker())) d.push_back(s.duration);
        if (d.empty()) {
          e.observed = "no step finished";
        } else {
          const double q = quantile_s(d, st.quantile());
          e.passed = b.holds(q);
          e.observed = num(q) + " s over " + std::to_string(d.size()) + " steps";
        }
        break;
      }
      case scenario::Expectation::kInvariants: {
        e.what = "the coordinator's invariants hold";
        auto v = check_invariants(r);
        e.passed = v.empty() && !r.values.empty();
        e.observed = !v.empty()         ? std::to_string(v.size()) + " violated; first: " + v.front()
                     : r.values.empty() ? "vacuous: no closure was scheduled, so nothing was checked"
                                        : "all hold over " + std::to_string(r.values.size()) + " closures";
        break;
      }
      case scenario::Expectation::kMaxStaleness: {
        const auto b = Bounds::of(x.max_staleness());
        const StalenessHistogram& st = r.stats.staleness;
        e.what = "max gradient staleness " + b.str();
        if (st.total == 0) {
          e.observed = "no gradient was measured";
        } else {
          e.passed = b.holds(static_cast<double>(st.max));
          e.observed = st.describe();
        }
        break;
      }
      case scenario::Expectation::kVisitsPerExample: {
        const auto& v = x.visits_per_example();
        const auto b = Bounds::of(v);
        e.what = "every example's visits after \"" + v.after() + "\" " + b.str();
        const auto* a = last_action(r, v.after());
        if (!a) {
          e.observed = "\"" + v.after() + "\" never ran";
        } else if (a->visits.empty()) {
          e.observed = "unreadable (the model has no examples, or the ps holding the visits did not answer)";
        } else {
          e.observed = describe_visits(a->visits, b);
          e.passed = std::all_of(a->visits.begin(), a->visits.end(),
                                 [&](std::int64_t n) { return b.holds(static_cast<double>(n)); });
        }
        break;
      }
      case scenario::Expectation::KIND_NOT_SET: continue;
    }
    out.push_back(std::move(e));
  }
  return out;
}

std::vector<std::string> check_invariants(const SimResult& r) {
  std::vector<std::string> bad;
  auto t = [](Time at) { return num(to_seconds(at)) + " s"; };
  if (!r.finished) bad.push_back("the program did not finish: a join, schedule or done never returned");
  if (!r.invariants_recorded) {
    bad.push_back("the run did not record what the invariants need (SimOptions::record_invariants)");
    return bad;
  }
  for (int s = 0; s < static_cast<int>(r.starts.size()); ++s) {
    const ProgramStart& start = r.starts[static_cast<std::size_t>(s)];
    auto name = [](const ValueRecord& v) {
      return "closure " + std::to_string(v.closure) + " (" + v.label + "[" + std::to_string(v.index) + "], " + v.fn + ")";
    };
    // The values this program start got, among the first `end` of the run.
    auto each_value = [&](std::size_t end, auto&& fn) {
      for (std::size_t i = 0; i < end && i < r.values.size(); ++i)
        if (r.values[i].program_start == s) fn(r.values[i]);
    };

    if (start.finished && start.start_status.ok()) {
      each_value(r.values.size(), [&](const ValueRecord& v) {
        if (v.status != RemoteValueStatus::kReady) bad.push_back(name(v) + " has no result at the end of the program");
      });
    }

    // Joins and raised errors, in program order.
    Time last_raise = -1;
    for (const auto& a : r.actions) {
      if (a.program_start != s) continue;
      if (a.kind != "schedule" && a.kind != "join" && a.kind != "done") continue;
      if (a.kind == "join" && a.status.ok()) {
        each_value(a.values_end, [&](const ValueRecord& v) {
          if (v.resolved_at < 0 || v.resolved_at > a.ended) {
            bad.push_back(name(v) + " was not resolved when the join at " + t(a.ended) + " returned");
          } else if (v.scheduled_at > last_raise && !v.outcome.ok()) {
            bad.push_back(name(v) + " ended " + describe(v.outcome) + " though no error was raised before the join at " +
                          t(a.ended) + " returned OK");
          }
        });
      }
      if (a.status.ok()) continue;
      // E2: when an error is raised nothing is running any more.
      each_value(a.values_end, [&](const ValueRecord& v) {
        if (v.resolved_at < 0 || v.resolved_at > a.ended)
          bad.push_back(name(v) + " was still unresolved when " + a.kind + " raised at " + t(a.ended));
      });
      bool from_a_closure = false;
      each_value(r.values.size(), [&](const ValueRecord& v) {
        from_a_closure |= v.outcome.code() == a.status.code() && v.outcome.message() == a.status.message();
      });
      // The one other source (W3/P4): a worker's recovery found a ps down.
      const auto culprit = failed_task(a.status);
      const bool from_recovery = culprit && culprit->job == Job::kPs &&
                                 (a.status.code() == StatusCode::kUnavailable ||
                                  a.status.code() == StatusCode::kDeadlineExceeded);
      if (!from_a_closure && !from_recovery)
        bad.push_back(a.kind + " at " + t(a.ended) + " raised " + describe(a.status) +
                      ", which no closure of the program failed with");
      // No update of a generation it cancelled lands after the raise.
      for (const auto& p : r.pushes) {
        if (p.applied && p.at > a.ended && p.fence.coordinator == start.chief_incarnation &&
            p.fence.generation < a.generation_after) {
          bad.push_back("ps:" + std::to_string(p.ps) + " applied a push of cancelled generation " +
                        std::to_string(p.fence.generation) + " at " + t(p.at) + ", after " + a.kind + " raised at " +
                        t(a.ended));
          break;
        }
      }
      last_raise = a.ended;
    }

    // Nothing is dispatched after its result was set.
    std::map<ClosureId, const ValueRecord*> by_id;
    each_value(r.values.size(), [&](const ValueRecord& v) { by_id[v.closure] = &v; });
    for (const auto& d : start.dispatch_log) {
      if (d.kind != DispatchRecord::Kind::kClosure) continue;
      auto it = by_id.find(d.id);
      if (it == by_id.end()) continue;
      const ValueRecord& v = *it->second;
      if (v.resolved_at >= 0 && d.time > v.resolved_at)
        bad.push_back(name(v) + " was dispatched to worker:" + std::to_string(d.worker) + " at " + t(d.time) +
                      " after it was resolved (" + value_result(v) + ") at " + t(v.resolved_at));
    }
  }
  return bad;
}

}  // namespace twinps::sim
