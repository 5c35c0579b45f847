#pragma once
// Names of the tasks in a cluster, as TensorFlow spells them.
#include <compare>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace twinps {

enum class Job : std::uint8_t { kChief = 0, kWorker = 1, kPs = 2, kEvaluator = 3 };
inline constexpr Job kAllJobs[] = {Job::kChief, Job::kWorker, Job::kPs, Job::kEvaluator};

constexpr std::string_view job_name(Job j) {
  switch (j) {
    case Job::kChief: return "chief";
    case Job::kWorker: return "worker";
    case Job::kPs: return "ps";
    case Job::kEvaluator: return "evaluator";
  }
  return "?";
}

inline std::optional<Job> parse_job(std::string_view s) {
  for (Job j : kAllJobs)
    if (job_name(j) == s) return j;
  return std::nullopt;
}

struct TaskId {
  Job job = Job::kChief;
  int index = 0;

  auto operator<=>(const TaskId&) const = default;

  // "/job:ps/replica:0/task:1", the device-style name TensorFlow prints.
  std::string device_name() const {
    return "/job:" + std::string(job_name(job)) + "/replica:0/task:" + std::to_string(index);
  }
  // "ps:1", for tables and trace tracks.
  std::string short_name() const { return std::string(job_name(job)) + ":" + std::to_string(index); }

  static TaskId chief() { return {Job::kChief, 0}; }
  static TaskId worker(int i) { return {Job::kWorker, i}; }
  static TaskId ps(int i) { return {Job::kPs, i}; }
  static TaskId evaluator(int i = 0) { return {Job::kEvaluator, i}; }
};

}  // namespace twinps
