#pragma once
// Step and resource functions by name. TensorFlow ships a traced function to
// the worker; twinps follows TensorFlow's other rule instead — the same binary
// runs every task — so the coordinator schedules a name and each worker looks
// up the same function in its own registry. The registry is an object passed
// in, not a global, so tests can hold several.
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/messages/value.h"
#include "core/runtime/random.h"
#include "core/runtime/status.h"
#include "core/runtime/task.h"
#include "core/worker/resource.h"

namespace twinps {

class StepContext;

using StepFunction = std::function<Task<StatusOr<Value>>(StepContext&)>;

struct ResourceContext {
  int worker_index = 0;
  const std::vector<Value>& args;
  Resource* parent = nullptr;  // the resource this one is built from, if any
  RandomStream random;         // forked per worker and resource: workers shuffle differently (R6)
};
using ResourceFunction = std::function<StatusOr<std::unique_ptr<Resource>>(ResourceContext&)>;

class FunctionRegistry {
 public:
  void add_step(std::string name, StepFunction fn) { steps_[std::move(name)] = std::move(fn); }
  void add_resource(std::string name, ResourceFunction fn) { resources_[std::move(name)] = std::move(fn); }

  const StepFunction* step(std::string_view name) const {
    auto it = steps_.find(name);
    return it == steps_.end() ? nullptr : &it->second;
  }
  const ResourceFunction* resource(std::string_view name) const {
    auto it = resources_.find(name);
    return it == resources_.end() ? nullptr : &it->second;
  }
  std::vector<std::string> step_names() const {
    std::vector<std::string> out;
    for (const auto& [name, fn] : steps_) out.push_back(name);
    return out;
  }

 private:
  std::map<std::string, StepFunction, std::less<>> steps_;
  std::map<std::string, ResourceFunction, std::less<>> resources_;
};

}  // namespace twinps
