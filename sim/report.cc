#include "sim/report.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "core/training/model_functions.h"
#include "sim/workload.h"

namespace twinps::sim {

namespace {

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

std::string bytes(double b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (b >= 1024 && u < 4) {
    b /= 1024;
    ++u;
  }
  char buf[64];
  std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.1f %s", b, units[u]);
  return buf;
}

std::string duration(double s) {
  if (s >= 1) return fmt("%.3f s", s);
  if (s >= 1e-3) return fmt("%.3f ms", s * 1e3);
  return fmt("%.1f us", s * 1e6);
}

}  // namespace

StepSummary summarize_steps(const SimResult& r) {
  StepSummary out;
  std::vector<Duration> d;
  for (const auto& s : r.steps)
    if (s.ok && (s.fn == kTrainFn || s.fn == training::kTrainStep)) d.push_back(s.duration);
  out.steps = d.size();
  if (r.end_time > 0) out.steps_per_second = static_cast<double>(d.size()) / to_seconds(r.end_time);
  out.p50_s = quantile_s(d, 0.5);
  out.p99_s = quantile_s(std::move(d), 0.99);
  return out;
}

double quantile_s(std::vector<Duration> d, double q) {
  if (d.empty()) return 0;
  std::sort(d.begin(), d.end());
  auto rank = static_cast<std::size_t>(std::ceil(q * static_cast<double>(d.size())));
  rank = std::clamp<std::size_t>(rank, 1, d.size());
  return to_seconds(d[rank - 1]);
}

std::vector<std::pair<std::string, std::string>> training_rows(const SimResult& r) {
  std::vector<std::pair<std::string, std::string>> rows;
  auto row = [&](std::string k, std::string v) { rows.emplace_back(std::move(k), std::move(v)); };
  if (!r.epochs.empty()) row("last epoch accuracy", fmt("%.6f", r.epochs.back().train.accuracy.value_or(0)));
  if (r.eval) {
    std::string text = fmt("loss %.6f", r.eval->loss);
    if (r.eval->accuracy) text += fmt(", accuracy %.6f", *r.eval->accuracy);
    if (r.eval->auc) text += fmt(", auc %.6f", *r.eval->auc);
    row("evaluation", text + fmt(" (%.0f examples)", r.eval->examples));
  }
  if (!r.stats.staleness.empty()) row("gradient staleness", r.stats.staleness.describe());
  if (r.stats.sync_steps > 0) row("sync steps applied", std::to_string(r.stats.sync_steps));
  return rows;
}

// restore/rollback (P10): each recovery in place, one row each.
std::vector<std::pair<std::string, std::string>> ps_recovery_rows(const SimResult& r) {
  std::vector<std::pair<std::string, std::string>> rows;
  auto row = [&](std::string k, std::string v) { rows.emplace_back(std::move(k), std::move(v)); };
  for (const auto& start : r.starts)
    for (const auto& rec : start.ps_recoveries) {
      std::string failed, reloaded;
      for (int p : rec.failed) failed += (failed.empty() ? "ps:" : ",ps:") + std::to_string(p);
      for (int p : rec.reloaded) reloaded += (reloaded.empty() ? "ps:" : ",ps:") + std::to_string(p);
      row(std::string("ps ") + (rec.policy == PsFailurePolicy::kRollback ? "rollback" : "restore"),
          failed + " failed (seen at " + fmt("%.3f s", to_seconds(rec.detected)) + "); " +
              (!rec.status.ok()       ? "failed: " + describe(rec.status)
               : rec.reloaded.empty() ? "it answered as the same process: nothing reloaded, closures run again" +
                                            fmt(" at %.3f s", to_seconds(rec.finished))
                                      : reloaded + " reloaded from " + rec.source +
                                            fmt(" at %.3f s", to_seconds(rec.finished))));
    }
  if (r.steps_made_up > 0) row("steps made up", std::to_string(r.steps_made_up) + " (lost to ps recoveries, P14)");
  return rows;
}

std::vector<std::pair<std::string, std::string>> summary_rows(const SimResult& r) {
  std::vector<std::pair<std::string, std::string>> rows;
  auto row = [&](std::string k, std::string v) { rows.emplace_back(std::move(k), std::move(v)); };
  row("scenario", r.name.empty() ? "(unnamed)" : r.name);
  row("seed", std::to_string(r.seed));
  row("cluster", std::to_string(r.shape.workers) + " workers, " + std::to_string(r.shape.ps) + " ps, " +
                     (r.fidelity == scenario::TIMING_ONLY ? "timing-only" : "numeric"));
  row("simulated time", fmt("%.6f s", to_seconds(r.end_time)) + (r.finished ? "" : " (time limit reached)"));
  const auto steps = summarize_steps(r);
  row("training steps", steps.steps == 0 ? std::string("0 (no training step finished: no throughput)")
                                          : std::to_string(steps.steps) +
                                                fmt(" (%.2f steps/s simulated)", steps.steps_per_second));
  row("step time p50 / p99", duration(steps.p50_s) + " / " + duration(steps.p99_s));
  row("closures", std::to_string(r.stats.scheduled) + " scheduled, " + std::to_string(r.stats.completed) +
                      " completed, " + std::to_string(r.stats.retried) + " retried, " +
                      std::to_string(r.stats.cancelled) + " cancelled, " + std::to_string(r.stats.failed) + " failed");
  row("worker failures / recoveries", std::to_string(r.stats.worker_failures) + " / " +
                                          std::to_string(r.stats.worker_recoveries));
  row("errors raised", std::to_string(r.stats.errors_raised));
  if (r.starts.size() > 1) row("coordinator starts", std::to_string(r.starts.size()));
  for (auto& kv : ps_recovery_rows(r)) rows.push_back(std::move(kv));
  for (auto& kv : training_rows(r)) rows.push_back(std::move(kv));
  if (r.final_iterations) row("iterations", std::to_string(*r.final_iterations));
  if (r.parameter_hash) {
    char hex[32];
    std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(*r.parameter_hash));
    row("parameter hash", hex);
  }
  // With many ps only the busiest few are listed, then a line for the rest.
  std::vector<std::size_t> order(r.ps.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  const std::size_t shown = r.ps.size() <= 8 ? r.ps.size() : 5;
  if (shown < r.ps.size())
    std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
      return r.ps[a].utilisation > r.ps[b].utilisation;
    });
  for (std::size_t k = 0; k < shown; ++k) {
    const auto& p = r.ps[order[k]];
    const double mean_wait =
        p.service.requests ? to_seconds(p.service.total_wait) / static_cast<double>(p.service.requests) : 0;
    auto link_busy = [&](const NetworkModel::LinkStats& l) {
      return r.end_time > 0 ? 100.0 * static_cast<double>(l.busy) / static_cast<double>(r.end_time) : 0.0;
    };
    row("ps:" + std::to_string(order[k]),
        bytes(static_cast<double>(p.service.bytes_in)) + " in, " + bytes(static_cast<double>(p.service.bytes_out)) +
            " out, " + std::to_string(p.service.requests) + " requests, utilisation " +
            fmt("%.1f%%", 100 * p.utilisation) + ", queue max " + std::to_string(p.service.max_queue) + " mean wait " +
            duration(mean_wait) + ", link in/out busy " + fmt("%.1f%%", link_busy(p.downlink)) + "/" +
            fmt("%.1f%%", link_busy(p.uplink)));
  }
  if (shown < r.ps.size()) {
    double total = 0, lo = 1, hi = 0;
    for (const auto& p : r.ps) {
      total += p.utilisation;
      lo = std::min(lo, p.utilisation);
      hi = std::max(hi, p.utilisation);
    }
    row("ps utilisation (all " + std::to_string(r.ps.size()) + ")",
        fmt("mean %.1f%%", 100 * total / static_cast<double>(r.ps.size())) + fmt(", min %.1f%%", 100 * lo) +
            fmt(", max %.1f%%", 100 * hi));
  }
  if (r.messages_lost > 0) row("messages lost", std::to_string(r.messages_lost));
  if (r.message_faults.calls > 0) {
    const auto& m = r.message_faults;
    row("message faults", std::to_string(m.duplicated) + " duplicated, " + std::to_string(m.delayed) + " held back, " +
                              std::to_string(m.requests_dropped) + " requests and " + std::to_string(m.replies_dropped) +
                              " replies lost, of " + std::to_string(m.calls) + " pulls and pushes");
    row("duplicate pushes", std::to_string(r.duplicate_pushes_dropped) + " dropped by the ps");
  }
  row("events processed", std::to_string(r.events) + " (" + std::to_string(r.events_skipped) + " of dead incarnations skipped)");
  char hash[32];
  std::snprintf(hash, sizeof hash, "%016llx", static_cast<unsigned long long>(r.trace_hash));
  row("trace hash", hash);
  return rows;
}

std::optional<std::string> no_progress(const SimResult& r, bool time_limited) {
  const auto steps = summarize_steps(r);
  const std::string at = fmt("%.3f s", to_seconds(r.end_time));
  if (!r.starts.empty() && !r.starts.back().start_status.ok())
    return "the coordinator did not start (" + describe(r.starts.back().start_status) +
           "): no closure ran, nothing was trained";
  if (time_limited && steps.steps == 0) {
    std::string why = "no progress: no training step finished in " + at + " simulated (" +
                      std::to_string(r.stats.scheduled) + " closures scheduled, " +
                      std::to_string(r.stats.completed) + " completed)";
    if (r.stats.scheduled == 0)
      why += "; nothing was scheduled: the cluster was still forming when the time limit came";
    else if (r.actions.empty())
      why += "; the program was still in its first action (scheduling) when the time limit came: schedule fewer "
             "closures at a time, or let the run go longer";
    return why;
  }
  if (!time_limited && !r.finished) {
    std::string why = "no progress to report: the program did not finish within its time limit (" +
                      fmt("%.3f s", to_seconds(r.time_limit)) + "); " + std::to_string(steps.steps) +
                      " training steps, " + std::to_string(r.stats.completed) + " of " +
                      std::to_string(r.stats.scheduled) + " closures completed";
    for (auto it = r.actions.rbegin(); it != r.actions.rend(); ++it) {
      why += "; the last action to finish was " + it->kind + (it->label.empty() ? "" : " \"" + it->label + "\"");
      break;
    }
    return why;
  }
  return std::nullopt;
}

Status write_steps_csv(const SimResult& r, const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "w");
  if (!f) return absl::UnavailableError("cannot open '" + path + "' for writing: " + std::strerror(errno));
  std::fputs("worker,closure,function,start_s,duration_s,ok,program_start,gradients,max_staleness\n", f);
  for (const auto& s : r.steps)
    std::fprintf(f, "%d,%llu,%s,%.9f,%.9f,%d,%d,%llu,%lld\n", s.worker, static_cast<unsigned long long>(s.closure),
                 s.fn.c_str(), to_seconds(s.start), to_seconds(s.duration), s.ok ? 1 : 0, s.program_start,
                 static_cast<unsigned long long>(s.gradients), static_cast<long long>(s.max_staleness));
  const bool ok = std::ferror(f) == 0;
  if (std::fclose(f) != 0 || !ok) return absl::DataLossError("writing '" + path + "' failed");
  return absl::OkStatus();
}

}  // namespace twinps::sim
