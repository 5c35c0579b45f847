#pragma once
// What closures take and return. A per-worker resource (a dataset, an
// iterator) crosses the wire as a ResourceRef; the worker resolves it in its
// own resource table.
#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "core/tensor/tensor.h"

namespace twinps {

using ResourceId = std::uint64_t;

struct ResourceRef {
  ResourceId id = 0;
  bool operator==(const ResourceRef&) const = default;
};

using Value = std::variant<std::monostate, double, std::int64_t, std::string, Matrix, ResourceRef>;

inline std::size_t byte_size(const Value& v) {
  struct {
    std::size_t operator()(std::monostate) const { return 0; }
    std::size_t operator()(double) const { return 8; }
    std::size_t operator()(std::int64_t) const { return 8; }
    std::size_t operator()(const std::string& s) const { return s.size(); }
    std::size_t operator()(const Matrix& m) const { return byte_size(m); }
    std::size_t operator()(const ResourceRef&) const { return 8; }
  } visitor;
  return std::visit(visitor, v);
}

}  // namespace twinps
