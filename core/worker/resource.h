#pragma once
// Per-worker resources: objects a worker builds on the coordinator's request
// (datasets, iterators) and closures then use by reference. They live only in
// the worker's memory, so a restarted worker has none and the coordinator
// rebuilds them (spec R7–R10).
namespace twinps {

class Resource {
 public:
  virtual ~Resource() = default;
};

}  // namespace twinps
