#include "tools/record_faults.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>

namespace twinps::cli {

Status check_record_path(const std::string& path) {
  namespace fs = std::filesystem;
  if (path.empty()) return absl::InvalidArgumentError("--record-faults needs a file name");
  std::error_code ec;
  if (fs::is_directory(path, ec))
    return absl::InvalidArgumentError("--record-faults " + path + ": is a directory, not a file");
  const fs::path parent = fs::path(path).parent_path();
  if (!parent.empty() && !fs::is_directory(parent, ec))
    return absl::InvalidArgumentError("--record-faults " + path + ": no directory " + parent.string());
  return absl::OkStatus();
}

Status write_recording(const std::string& path, const sim::FaultRecorder& recorder,
                       const scenario::Scenario& recorded, const std::string& how) {
  std::ofstream out(path);
  out << recorder.text(recorded, how);
  out.close();
  if (!out) return absl::UnavailableError("--record-faults: cannot write " + path);
  std::printf("\nrecorded to %s (replay: twinps sim %s):\n", path.c_str(), path.c_str());
  const auto notes = recorder.observations();
  if (notes.empty()) std::printf("  no failure observed\n");
  for (const auto& n : notes) std::printf("  %s\n", n.c_str());
  return absl::OkStatus();
}

sim::RecordedOutcome launcher_outcome(const scenario::Scenario& s, const sim::SimResult& result,
                                      sim::FaultRecorder& recorder) {
  sim::RecordedOutcome o;
  o.stats = result.stats;
  // Labelled actions: the last result of each label, in program order.
  std::map<std::string, std::size_t> position;
  for (const auto& a : result.actions) {
    if (a.label.empty()) continue;
    auto [it, inserted] = position.try_emplace(a.label, o.labelled.size());
    if (inserted) o.labelled.emplace_back(a.label, a.status);
    else o.labelled[it->second].second = a.status;
    // The iterations after the program's last labelled join, as the scenarios read them.
    if (a.kind == std::string("join") && a.iterations) {
      o.iterations_after = a.label;
      o.iterations = a.iterations;
    }
  }
  if (!o.iterations_after) o.iterations = result.final_iterations;
  bool resolved = !result.values.empty();
  for (const auto& v : result.values) resolved = resolved && v.status == RemoteValueStatus::kReady;
  o.all_closures_resolved = resolved;
  // Steps that loop, or compute extra, are not one step's time.
  std::map<std::string, bool> long_steps;
  for (const auto& a : s.program()) {
    if (!a.has_schedule()) continue;
    const bool long_step = a.schedule().infinite() || a.schedule().extra_s() > 0;
    if (a.schedule().infinite()) o.infinite_steps = true;
    if (long_step) long_steps[a.label()] = true;
  }
  for (const auto& v : result.values)
    if (long_steps.count(v.label)) recorder.exclude_from_step_time(v.closure);
  o.steps_per_closure = s.model().steps_per_closure();
  o.per_worker_dataset = true;  // a synthetic model's numeric steps read a per-worker dataset
  return o;
}

}  // namespace twinps::cli
