#pragma once
// The variables a worker (or the coordinator) can address, by name.
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "core/variables/layout.h"

namespace twinps {

class VariableDirectory {
 public:
  VariableDirectory() = default;
  explicit VariableDirectory(std::vector<VariableLayout> variables) : variables_(std::move(variables)) {
    for (std::size_t i = 0; i < variables_.size(); ++i) index_.emplace(variables_[i].name, i);
  }
  const VariableLayout* find(std::string_view name) const {
    auto it = index_.find(name);
    return it == index_.end() ? nullptr : &variables_[it->second];
  }
  const std::vector<VariableLayout>& all() const { return variables_; }
  bool empty() const { return variables_.empty(); }

 private:
  std::vector<VariableLayout> variables_;
  std::map<std::string, std::size_t, std::less<>> index_;
};

}  // namespace twinps
