// twinps trace merge OUT IN...: the trace files of a real cluster's tasks
// (`twinps train --trace`, `twinps serve --trace`, one per task) as one
// Chrome Trace Event timeline, one process track per task.
//
// Clock alignment. Each task's times count from its own executor's epoch,
// and each file records that epoch (tools/trace_file.h):
//  * files whose "steady_clock_id" is the same (one machine, one boot) are
//    aligned on CLOCK_MONOTONIC: exact, since every process reads that one
//    clock;
//  * otherwise on the wall clock (CLOCK_REALTIME) origins: as good as the
//    machines' clock synchronisation (NTP: typically well under a
//    millisecond on a LAN; an unsynchronised host shows up as events out of
//    causal order, e.g. a worker's step starting before the chief sent it).
// The merged file says which was used ("otherData"). A file cut short by a
// crash (SIGKILL) is read up to its last complete event.
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/cluster/task_id.h"
#include "tools/cli.h"
#include "tools/commands/commands.h"

namespace twinps::cli {
namespace {

using Json = nlohmann::ordered_json;

struct Input {
  std::string path;
  std::string task;  // "ps:0": who wrote it
  std::string clock_id;
  std::int64_t steady_origin_ns = 0;
  std::int64_t unix_origin_us = 0;
  std::vector<Json> events;
  bool truncated = false;
};

// Reads a trace file; one a crash cut short (no closing bracket) is read up
// to its last complete event: the writer puts one event on each line.
bool read_input(const std::string& path, Input& in, std::string& error) {
  std::ifstream f(path, std::ios::binary);
  if (!f) {
    error = path + ": cannot read the trace file";
    return false;
  }
  std::stringstream text;
  text << f.rdbuf();
  const std::string all = text.str();
  Json doc = Json::parse(all, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) {
    std::istringstream lines(all);
    std::string line;
    bool header = false;
    while (std::getline(lines, line)) {
      if (!header) {
        header = line.rfind("{\"displayTimeUnit\"", 0) == 0;
        if (!header) break;
        continue;
      }
      if (!line.empty() && line.back() == ',') line.pop_back();
      Json event = Json::parse(line, nullptr, false);
      if (event.is_discarded() || !event.is_object()) break;  // the cut-off line, or the closing bracket
      in.events.push_back(std::move(event));
    }
    if (!header) {
      error = path + ": not a Chrome trace file (neither valid JSON nor a twinps trace cut short)";
      return false;
    }
    in.truncated = true;
  } else {
    if (!doc.is_object() || !doc.contains("traceEvents") || !doc["traceEvents"].is_array()) {
      error = path + ": not a Chrome trace file (no \"traceEvents\" array)";
      return false;
    }
    for (auto& e : doc["traceEvents"]) in.events.push_back(std::move(e));
  }
  // Who wrote it and where its clock starts: "otherData", or the metadata
  // events a file cut short still has.
  Json info = doc.is_object() && doc.contains("otherData") ? doc["otherData"] : Json::object();
  for (const auto& e : in.events)
    if (e.value("ph", "") == "M" && e.value("name", "") == "twinps_info" && e.contains("args"))
      for (const auto& [k, v] : e["args"].items())
        if (!info.contains(k)) info[k] = v;
  if (!info.contains("task") || !info.contains("steady_origin_ns") || !info.contains("unix_origin_us") ||
      !info.contains("steady_clock_id")) {
    error = path + ": has no clock information (task, steady_origin_ns, unix_origin_us); merge real-mode traces "
                   "written by `twinps train --trace` or `twinps serve --trace`";
    return false;
  }
  in.path = path;
  in.task = info["task"].get<std::string>();
  in.clock_id = info["steady_clock_id"].get<std::string>();
  in.steady_origin_ns = info["steady_origin_ns"].get<std::int64_t>();
  in.unix_origin_us = info["unix_origin_us"].get<std::int64_t>();
  return true;
}

// Tracks in task order: chief, then ps, workers, evaluators, each by index.
int task_rank(const std::string& name) {
  const auto colon = name.find(':');
  const auto job = parse_job(name.substr(0, colon));
  const int order = !job ? 9 : *job == Job::kChief ? 0 : *job == Job::kPs ? 1 : *job == Job::kWorker ? 2 : 3;
  const int index = colon == std::string::npos ? 0 : std::atoi(name.c_str() + colon + 1);
  return order * 1'000'000 + index;
}

int merge(const std::string& out_path, const std::vector<std::string>& paths) {
  std::vector<Input> inputs(paths.size());
  for (std::size_t i = 0; i < paths.size(); ++i) {
    std::string error;
    if (!read_input(paths[i], inputs[i], error)) {
      std::fprintf(stderr, "twinps trace merge: %s\n", error.c_str());
      return kExitBadInput;
    }
  }
  std::set<std::string> writers;
  for (const auto& in : inputs)
    if (!writers.insert(in.task).second) {
      std::fprintf(stderr, "twinps trace merge: two files were written by %s; give one file per task\n", in.task.c_str());
      return kExitBadInput;
    }
  // One clock for all when every file read the same CLOCK_MONOTONIC.
  const bool same_clock = std::all_of(inputs.begin(), inputs.end(),
                                      [&](const Input& in) { return in.clock_id == inputs.front().clock_id; });
  std::vector<double> shift_us(inputs.size());
  for (std::size_t i = 0; i < inputs.size(); ++i)
    shift_us[i] = same_clock ? static_cast<double>(inputs[i].steady_origin_ns) / 1000.0
                             : static_cast<double>(inputs[i].unix_origin_us);
  const double earliest = *std::min_element(shift_us.begin(), shift_us.end());
  for (auto& s : shift_us) s -= earliest;

  // The track of an event: the task named by its (pid, tid) in the file that
  // wrote it ("thread_name" metadata).
  std::map<std::string, int> pid_of_task;
  auto task_pid = [&](const std::string& task) { pid_of_task.emplace(task, 0); };
  std::vector<std::map<std::pair<int, int>, std::string>> names(inputs.size());
  for (std::size_t i = 0; i < inputs.size(); ++i)
    for (const auto& e : inputs[i].events)
      if (e.value("ph", "") == "M" && e.value("name", "") == "thread_name" && e.contains("args")) {
        const std::string task = e["args"].value("name", "");
        names[i][{e.value("pid", 0), e.value("tid", 0)}] = task;
        task_pid(task);
      }
  for (const auto& in : inputs) task_pid(in.task);
  std::vector<std::string> tasks;
  for (const auto& [t, p] : pid_of_task) tasks.push_back(t);
  std::sort(tasks.begin(), tasks.end(), [](const std::string& a, const std::string& b) {
    return task_rank(a) != task_rank(b) ? task_rank(a) < task_rank(b) : a < b;
  });
  Json events = Json::array();
  for (std::size_t k = 0; k < tasks.size(); ++k) {
    const int pid = static_cast<int>(k) + 1;
    pid_of_task[tasks[k]] = pid;
    events.push_back({{"ph", "M"}, {"name", "process_name"}, {"pid", pid}, {"args", {{"name", tasks[k]}}}});
    events.push_back({{"ph", "M"}, {"name", "process_sort_index"}, {"pid", pid}, {"args", {{"sort_index", pid}}}});
  }
  // Inside a task's process, one thread per file that recorded something on
  // it: its own events, and what others (the chief) saw of it.
  std::set<std::pair<int, int>> threads;
  std::vector<Json> body;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    const int tid = static_cast<int>(i) + 1;
    for (auto& e : inputs[i].events) {
      if (e.value("ph", "") == "M") continue;
      auto it = names[i].find({e.value("pid", 0), e.value("tid", 0)});
      if (it == names[i].end()) continue;  // no track named: not written by twinps
      const int pid = pid_of_task[it->second];
      if (threads.insert({pid, tid}).second) {
        const std::string label = it->second == inputs[i].task ? it->second : "seen by " + inputs[i].task;
        events.push_back({{"ph", "M"}, {"name", "thread_name"}, {"pid", pid}, {"tid", tid}, {"args", {{"name", label}}}});
      }
      e["pid"] = pid;
      e["tid"] = tid;
      if (e.contains("ts") && e["ts"].is_number()) e["ts"] = e["ts"].get<double>() + shift_us[i];
      body.push_back(std::move(e));
    }
  }
  std::stable_sort(body.begin(), body.end(), [](const Json& a, const Json& b) {
    return a.value("ts", 0.0) < b.value("ts", 0.0);
  });
  for (auto& e : body) events.push_back(std::move(e));

  Json sources = Json::array();
  for (std::size_t i = 0; i < inputs.size(); ++i)
    sources.push_back({{"file", inputs[i].path},
                       {"task", inputs[i].task},
                       {"shift_us", shift_us[i]},
                       {"events", inputs[i].events.size()},
                       {"cut_short", inputs[i].truncated}});
  Json out{{"displayTimeUnit", "ms"},
           {"traceEvents", std::move(events)},
           {"otherData",
            {{"merged_from", std::move(sources)},
             {"clock_alignment", same_clock ? "steady clock (CLOCK_MONOTONIC) of one machine: exact"
                                            : "wall clock (CLOCK_REALTIME) of each machine: as exact as their "
                                              "clock synchronisation"}}}};
  std::ofstream f(out_path, std::ios::binary | std::ios::trunc);
  if (!f) {
    std::fprintf(stderr, "twinps trace merge: cannot write '%s'\n", out_path.c_str());
    return kExitBadInput;
  }
  f << out.dump(-1, ' ', false, Json::error_handler_t::replace) << "\n";
  if (!f) {
    std::fprintf(stderr, "twinps trace merge: writing '%s' failed\n", out_path.c_str());
    return kExitFailed;
  }
  std::printf("merged %zu files (%zu tasks) into %s; clocks aligned on %s\n", inputs.size(), tasks.size(),
              out_path.c_str(), same_clock ? "one machine's steady clock" : "the machines' wall clocks");
  for (std::size_t i = 0; i < inputs.size(); ++i)
    std::printf("  %-10s %s: %zu events, shifted %+.3f ms%s\n", inputs[i].task.c_str(), inputs[i].path.c_str(),
                inputs[i].events.size(), shift_us[i] / 1000.0, inputs[i].truncated ? " (cut short: read up to its last complete event)" : "");
  return kExitOk;
}

}  // namespace

int run_trace(int argc, char** argv) {
  const std::string usage =
      "usage: twinps trace merge OUT IN...\n"
      "Merges the trace files of a real cluster's tasks (train --trace, serve --trace; one per task) into one\n"
      "Chrome Trace Event file with one process track per task, clocks aligned (exactly on one machine; by the\n"
      "wall clock across machines).";
  if (argc >= 2 && (std::string(argv[1]) == "--help" || std::string(argv[1]) == "-h")) {
    std::printf("%s\n", usage.c_str());
    return kExitOk;
  }
  if (argc < 2 || std::string(argv[1]) != "merge") {
    std::fprintf(stderr, "twinps trace: %s\n%s\n", argc < 2 ? "which action?" : ("unknown action '" + std::string(argv[1]) + "'").c_str(),
                 usage.c_str());
    return kExitBadInput;
  }
  std::vector<std::string> files;
  for (int i = 2; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      std::printf("%s\n", usage.c_str());
      return kExitOk;
    }
    if (a.rfind("-", 0) == 0) {
      std::fprintf(stderr, "twinps trace merge: unknown option '%s'\n%s\n", a.c_str(), usage.c_str());
      return kExitBadInput;
    }
    files.push_back(a);
  }
  if (files.size() < 2) {
    std::fprintf(stderr, "twinps trace merge: give the output file and at least one input\n%s\n", usage.c_str());
    return kExitBadInput;
  }
  return merge(files.front(), std::vector<std::string>(files.begin() + 1, files.end()));
}

}  // namespace twinps::cli
