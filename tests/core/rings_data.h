#pragma once
// A small non-tutorial model and its data for tests of training on files:
// points in three rings around the origin, with the quadrant as a string
// feature, written as CSV ("ring,xy,quadrant"), and an MLP spec that learns
// the ring from them (held-out accuracy near 1.0).
#include <cmath>
#include <filesystem>
#include <fstream>

#include "core/runtime/random.h"

namespace twinps::testing {

// The learning rate's body (e.g. "constant: 0.01") and `training` are
// filled in by the caller (%s).
inline constexpr char kRingsSpecFormat[] = R"pb(# rings: an MLP on CSV files
input { name: "xy" dense { width: 2 } }
input { name: "quadrant" categorical { vocabulary { token: ["ne", "nw", "sw", "se"] } } }
label { column: "ring" type: INT64 }
layer { name: "q" input: "quadrant" embedding { dim: 2 } }
layer { name: "in" input: ["xy", "q"] concatenate {} }
layer { name: "h1" input: "in" dense { units: 32 activation: RELU } }
layer { name: "h2" input: "h1" dense { units: 32 activation: RELU } }
layer { name: "logits" input: "h2" dense { units: 3 } }
head { input: "logits" loss: SOFTMAX_CROSS_ENTROPY }
metric: ACCURACY
metric: LOSS
optimizer { adam {} learning_rate { %s } }
batch_size: 32
%s
)pb";

inline std::string rings_spec(const std::string& learning_rate, const std::string& training = "") {
  char buf[2048];
  std::snprintf(buf, sizeof buf, kRingsSpecFormat, learning_rate.c_str(), training.c_str());
  return buf;
}

// `n` points in rings 0, 1, 2 (radius < 1, < 2, < 3; a margin of 0.1 left
// out around the borders), drawn from `seed`.
inline void write_rings(const std::filesystem::path& path, int n, std::uint64_t seed) {
  RandomStream r(seed);
  std::ofstream out(path);
  out << "ring,xy,quadrant\n";
  for (int written = 0; written < n;) {
    const double x = r.uniform(-3, 3), y = r.uniform(-3, 3);
    const double radius = std::sqrt(x * x + y * y);
    if (radius >= 3 || std::abs(radius - 1) < 0.1 || std::abs(radius - 2) < 0.1) continue;
    const char* q = x >= 0 ? (y >= 0 ? "ne" : "se") : (y >= 0 ? "nw" : "sw");
    out << static_cast<int>(radius) << "," << x << " " << y << "," << q << "\n";
    ++written;
  }
}

// train-0.csv .. train-3.csv (500 points each) and test.csv (500) in `dir`.
inline void write_rings_files(const std::filesystem::path& dir) {
  std::filesystem::create_directories(dir);
  for (int i = 0; i < 4; ++i) write_rings(dir / ("train-" + std::to_string(i) + ".csv"), 500, 10 + i);
  write_rings(dir / "test.csv", 500, 99);
}

}  // namespace twinps::testing
