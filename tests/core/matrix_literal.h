#pragma once
// mat({{1, 2}, {3, 4}}): a Matrix written out row by row, for tests.
#include <initializer_list>

#include "core/tensor/tensor.h"

namespace twinps::testutil {

inline Matrix mat(std::initializer_list<std::initializer_list<float>> rows) {
  Matrix m(static_cast<Eigen::Index>(rows.size()), static_cast<Eigen::Index>(rows.begin()->size()));
  Eigen::Index r = 0;
  for (const auto& row : rows) {
    Eigen::Index c = 0;
    for (float v : row) m(r, c++) = v;
    ++r;
  }
  return m;
}

}  // namespace twinps::testutil
