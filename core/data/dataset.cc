#include "core/data/dataset.h"

#include "core/data/record_dataset.h"
#include "core/data/shuffle_buffer.h"

namespace twinps {

std::vector<std::size_t> shuffle_order(std::size_t n, std::size_t buffer_size, RandomStream& random) {
  std::vector<std::size_t> out;
  out.reserve(n);
  ShuffleBuffer<std::size_t> buffer(buffer_size, random);
  std::size_t next = 0;
  auto pull = [&](std::size_t& item) -> StatusOr<bool> {
    if (next >= n) return false;
    item = next++;
    return true;
  };
  std::size_t index = 0;
  while (*buffer.next(pull, index)) out.push_back(index);
  random = buffer.random();
  return out;
}

namespace {

class InMemoryIterator final : public IteratorResource {
 public:
  InMemoryIterator(std::shared_ptr<const std::vector<Example>> examples, DatasetOptions options, RandomStream random)
      : examples_(std::move(examples)), options_(options), random_(random) {
    start_pass();
  }

  StatusOr<Batch> next() override {
    const std::size_t n = examples_->size();
    if (n == 0 || options_.batch_size <= 0) return absl::OutOfRangeError("the dataset is empty");
    if (position_ >= order_.size()) {
      if (options_.repeat >= 0 && passes_done_ + 1 >= options_.repeat) return absl::OutOfRangeError("end of dataset");
      ++passes_done_;
      start_pass();
    }
    std::size_t remaining = order_.size() - position_;
    auto want = static_cast<std::size_t>(options_.batch_size);
    if (remaining < want && options_.drop_remainder) {
      position_ = order_.size();
      return next();
    }
    std::size_t take = std::min(remaining, want);
    const std::size_t width = (*examples_)[order_[position_]].ids.size();
    Batch b;
    b.ids.resize(static_cast<Eigen::Index>(take), static_cast<Eigen::Index>(width));
    b.labels.resize(static_cast<Eigen::Index>(take), 1);
    for (std::size_t r = 0; r < take; ++r) {
      const Example& e = (*examples_)[order_[position_ + r]];
      if (e.ids.size() != width) return absl::InvalidArgumentError("examples have different numbers of ids");
      for (std::size_t c = 0; c < width; ++c) b.ids(static_cast<Eigen::Index>(r), static_cast<Eigen::Index>(c)) = e.ids[c];
      b.labels(static_cast<Eigen::Index>(r), 0) = e.label;
    }
    position_ += take;
    return b;
  }

 private:
  void start_pass() {
    const std::size_t n = examples_->size();
    position_ = 0;
    if (options_.shuffle_buffer > 0) {
      RandomStream pass_random = options_.reshuffle_each_iteration ? random_.fork("pass", passes_done_) : random_;
      order_ = shuffle_order(n, static_cast<std::size_t>(options_.shuffle_buffer), pass_random);
    } else {
      order_.resize(n);
      for (std::size_t i = 0; i < n; ++i) order_[i] = i;
    }
  }

  std::shared_ptr<const std::vector<Example>> examples_;
  DatasetOptions options_;
  RandomStream random_;
  std::vector<std::size_t> order_;
  std::size_t position_ = 0;
  std::int64_t passes_done_ = 0;
};

}  // namespace

StatusOr<std::unique_ptr<InMemoryDataset>> InMemoryDataset::create(
    std::shared_ptr<const std::vector<Example>> examples, DatasetOptions options) {
  if (options.batch_size <= 0) return absl::InvalidArgumentError("batch_size must be positive");
  if (options.shuffle_buffer < 0) return absl::InvalidArgumentError("shuffle buffer must not be negative");
  if (options.repeat == 0 || options.repeat < -1) return absl::InvalidArgumentError("repeat must be -1 or positive");
  return std::unique_ptr<InMemoryDataset>(new InMemoryDataset(std::move(examples), options));
}

std::unique_ptr<IteratorResource> InMemoryDataset::make_iterator(RandomStream random) const {
  return std::make_unique<InMemoryIterator>(examples_, options_, random);
}

void register_dataset_functions(FunctionRegistry& registry) {
  registry.add_resource("iterator", [](ResourceContext& ctx) -> StatusOr<std::unique_ptr<Resource>> {
    if (auto* dataset = dynamic_cast<DatasetResource*>(ctx.parent))
      return std::unique_ptr<Resource>(dataset->make_iterator(ctx.random));
    if (auto* files = dynamic_cast<data::RecordDatasetResource*>(ctx.parent))
      return std::unique_ptr<Resource>(files->make_iterator(ctx.random));
    return absl::InvalidArgumentError("\"iterator\" needs a dataset resource as its parent");
  });
}

}  // namespace twinps
