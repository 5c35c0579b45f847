#pragma once
// A small tf.data: an in-memory list of examples with shuffle (tf.data's
// buffer algorithm), batch and repeat, as per-worker resources. Each worker
// builds its own dataset from the same examples; only the shuffle order
// differs, drawn from the worker's random stream (spec R6). An iterator
// rebuilt after a worker restart starts over (R10).
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <Eigen/Core>

#include "core/runtime/random.h"
#include "core/runtime/status.h"
#include "core/tensor/tensor.h"
#include "core/worker/function_registry.h"
#include "core/worker/resource.h"

namespace twinps {

using IdMatrix = Eigen::Matrix<std::int64_t, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

struct Example {
  std::vector<std::int64_t> ids;  // categorical features (already looked up)
  float label = 0;
};

struct Batch {
  IdMatrix ids;   // [batch x ids per example]
  Matrix labels;  // [batch x 1]
  std::int64_t size() const { return labels.rows(); }
};

struct DatasetOptions {
  std::int64_t shuffle_buffer = 0;  // 0: no shuffle
  bool reshuffle_each_iteration = true;
  std::int64_t batch_size = 1;
  bool drop_remainder = false;
  std::int64_t repeat = 1;  // passes over the data; -1 = forever
};

class IteratorResource : public Resource {
 public:
  // The next batch, or OUT_OF_RANGE when the data is exhausted.
  virtual StatusOr<Batch> next() = 0;
};

class DatasetResource : public Resource {
 public:
  virtual std::unique_ptr<IteratorResource> make_iterator(RandomStream random) const = 0;
};

// examples -> shuffle -> batch -> repeat, the tutorial's pipeline shape.
class InMemoryDataset final : public DatasetResource {
 public:
  static StatusOr<std::unique_ptr<InMemoryDataset>> create(std::shared_ptr<const std::vector<Example>> examples,
                                                           DatasetOptions options);
  std::unique_ptr<IteratorResource> make_iterator(RandomStream random) const override;
  std::int64_t size() const { return static_cast<std::int64_t>(examples_->size()); }

 private:
  InMemoryDataset(std::shared_ptr<const std::vector<Example>> examples, DatasetOptions options)
      : examples_(std::move(examples)), options_(options) {}
  std::shared_ptr<const std::vector<Example>> examples_;
  DatasetOptions options_;
};

// The order tf.data's shuffle(buffer_size) produces for `n` elements.
std::vector<std::size_t> shuffle_order(std::size_t n, std::size_t buffer_size, RandomStream& random);

// Registers the built-in "iterator" resource function (iter() of a dataset).
void register_dataset_functions(FunctionRegistry& registry);

}  // namespace twinps
