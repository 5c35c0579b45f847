#pragma once
// Tensors are float32 Eigen matrices, row-major so that a row (one embedding,
// one slice along axis 0) is contiguous: sharding along axis 0, row gathers
// and row scatters all work on contiguous memory. A variable of any rank is
// stored as rows = shape[0] and cols = product of the other dimensions.
#include <cstdint>
#include <string>
#include <vector>

#include <Eigen/Core>

namespace twinps {

using Matrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using RowIds = std::vector<std::int64_t>;
using Shape = std::vector<std::int64_t>;

// Whether every id is greater than the one before it: an embedding's rows
// as its plan lists them, and each shard's rows as a worker cuts a push.
// Routing and applying such rows needs no sort and no summing of repeats.
inline bool ascending_distinct(const RowIds& ids) {
  for (std::size_t i = 1; i < ids.size(); ++i)
    if (ids[i] <= ids[i - 1]) return false;
  return true;
}

inline std::int64_t num_elements(const Shape& s) {
  std::int64_t n = 1;
  for (auto d : s) n *= d;
  return n;
}
// Rows of the 2-D storage: shape[0], or 1 for a scalar.
inline std::int64_t storage_rows(const Shape& s) { return s.empty() ? 1 : s[0]; }
// Columns of the 2-D storage: the product of every dimension after the first.
inline std::int64_t storage_cols(const Shape& s) {
  std::int64_t n = 1;
  for (std::size_t i = 1; i < s.size(); ++i) n *= s[i];
  return n;
}
inline std::string shape_string(const Shape& s) {
  std::string out = "(";
  for (std::size_t i = 0; i < s.size(); ++i) out += (i ? "," : "") + std::to_string(s[i]);
  if (s.size() == 1) out += ",";
  return out + ")";
}

// A gradient or update that touches only some rows (an embedding gradient).
struct SparseRows {
  RowIds rows;    // row ids, local to the shard the update is addressed to
  Matrix values;  // values.rows() == rows.size()
};

// out.row(i) = from.row(rows[i]) for every i; `out` is resized. The rows of
// an embedding's lookups are at random places in a table larger than the
// caches, so a plain loop waits for memory once per row. This one asks for
// each row's cache lines a few rows ahead of its copy, so that the fetches of
// several rows overlap.
inline void gather_rows(const Matrix& from, const RowIds& rows, Matrix& out) {
  constexpr std::size_t kAhead = 8;  // rows in flight: enough to cover memory's latency
  constexpr std::size_t kLine = 64;
  const std::size_t row_bytes = static_cast<std::size_t>(from.cols()) * sizeof(float);
  auto prefetch = [&](std::int64_t row) {
    const char* p = reinterpret_cast<const char*>(from.data()) + static_cast<std::size_t>(row) * row_bytes;
    for (std::size_t b = 0; b < row_bytes; b += kLine) __builtin_prefetch(p + b);
  };
  out.resize(static_cast<Eigen::Index>(rows.size()), from.cols());
  for (std::size_t i = 0; i < rows.size() && i < kAhead; ++i) prefetch(rows[i]);
  for (std::size_t i = 0; i < rows.size(); ++i) {
    if (i + kAhead < rows.size()) prefetch(rows[i + kAhead]);
    out.row(static_cast<Eigen::Index>(i)) = from.row(static_cast<Eigen::Index>(rows[i]));
  }
}

inline std::size_t byte_size(const Matrix& m) { return static_cast<std::size_t>(m.size()) * sizeof(float); }

// A "meta" tensor: the shape of a rows x cols float matrix without its
// storage (PyTorch's meta device has the same idea). Timing-only simulation
// moves these in place of values, so a 1,000-worker cluster with a 256 MiB
// embedding costs the simulator no tensor memory and no arithmetic, while
// every message still has the size its values would give it. Only the
// simulator ever creates one; net/ refuses to send one.
struct MetaTensor {
  std::int64_t rows = 0;
  std::int64_t cols = 0;
  bool operator==(const MetaTensor&) const = default;
};

// The bytes its values would take (what the simulator's network charges).
inline std::size_t byte_size(const MetaTensor& m) { return static_cast<std::size_t>(m.rows * m.cols) * sizeof(float); }

}  // namespace twinps
