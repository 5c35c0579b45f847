#include "core/variables/initializers.h"

#include <cmath>

namespace twinps {

Matrix initial_value(const Initializer& init, const Shape& shape, RandomStream& random) {
  const auto rows = storage_rows(shape), cols = storage_cols(shape);
  Matrix m(rows, cols);
  switch (init.kind) {
    case Initializer::Kind::kZeros: m.setZero(); break;
    case Initializer::Kind::kConstant: m.setConstant(static_cast<float>(init.a)); break;
    case Initializer::Kind::kUniform:
      for (Eigen::Index i = 0; i < m.size(); ++i) m.data()[i] = static_cast<float>(random.uniform(init.a, init.b));
      break;
    case Initializer::Kind::kGlorotUniform: {
      // Keras: for a kernel (fan_in, fan_out); a vector has fan_in = fan_out = its length.
      const double fan_in = shape.size() >= 2 ? static_cast<double>(num_elements(shape) / shape.back())
                                              : static_cast<double>(rows);
      const double fan_out = shape.size() >= 2 ? static_cast<double>(shape.back()) : static_cast<double>(rows);
      const double limit = std::sqrt(6.0 / (fan_in + fan_out));
      for (Eigen::Index i = 0; i < m.size(); ++i) m.data()[i] = static_cast<float>(random.uniform(-limit, limit));
      break;
    }
    case Initializer::Kind::kNormal:
      for (Eigen::Index i = 0; i < m.size(); ++i) m.data()[i] = static_cast<float>(random.normal(init.a, init.b));
      break;
  }
  return m;
}

std::vector<ShardState> shard_states(const VariableLayout& layout, const Matrix& full) {
  std::vector<ShardState> out;
  for (std::size_t i = 0; i < layout.shards.size(); ++i) {
    const auto& s = layout.shards[i];
    ShardState st;
    st.spec = ShardSpec{s.id, layout.shard_name(i), layout.kind, s.rows, layout.cols()};
    st.spec.optimizer = layout.optimizer;
    st.value = full.middleRows(s.row_offset, s.rows);
    out.push_back(std::move(st));
  }
  return out;
}

std::vector<ShardState> meta_shard_states(const VariableLayout& layout) {
  std::vector<ShardState> out;
  for (std::size_t i = 0; i < layout.shards.size(); ++i) {
    const auto& s = layout.shards[i];
    ShardState st;
    st.spec = ShardSpec{s.id, layout.shard_name(i), layout.kind, s.rows, layout.cols()};
    st.spec.meta = true;
    st.spec.optimizer = layout.optimizer;
    out.push_back(std::move(st));
  }
  return out;
}

std::vector<ShardState> counter_shard_states(const VariableLayout& layout, std::int64_t start) {
  ShardState st;
  st.spec = ShardSpec{layout.shards.front().id, layout.name, VariableKind::kCounter, 1, 1};
  st.counter = start;
  return {st};
}

}  // namespace twinps
