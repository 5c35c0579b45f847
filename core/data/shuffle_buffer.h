#pragma once
// tf.data's shuffle(buffer_size) over a stream: fill a buffer with the first
// `capacity` elements, then repeatedly emit a uniformly chosen buffer element
// and put the next input element in its place; once the input is exhausted,
// drain the buffer the same way. A buffer at least as large as the input is
// a uniform shuffle; a smaller one only mixes elements that are close in the
// input. Memory: `capacity` elements.
//
// shuffle_order() (in-memory datasets) and file datasets both run this one
// implementation, so an in-memory list and the same records read from files
// come out in the same order for the same random stream.
#include <cstddef>
#include <utility>
#include <vector>

#include "core/runtime/random.h"
#include "core/runtime/status.h"

namespace twinps {

template <typename T>
class ShuffleBuffer {
 public:
  ShuffleBuffer(std::size_t capacity, RandomStream random) : capacity_(capacity < 1 ? 1 : capacity), random_(random) {}

  // The next element in shuffled order into `out`; false when the input and
  // the buffer are both exhausted. `pull(T&)` reads the next input element
  // and returns StatusOr<bool> (false at the end of the input); its errors
  // are returned as they are.
  template <typename Pull>
  StatusOr<bool> next(Pull&& pull, T& out) {
    if (!filled_) {
      while (!input_done_ && buffer_.size() < capacity_) {
        T item;
        auto got = pull(item);
        if (!got.ok()) return got.status();
        if (*got) {
          buffer_.push_back(std::move(item));
        } else {
          input_done_ = true;
        }
      }
      filled_ = true;
    }
    if (buffer_.empty()) return false;
    const std::size_t pick = static_cast<std::size_t>(random_.below(buffer_.size()));
    out = std::move(buffer_[pick]);
    if (!input_done_) {
      auto got = pull(buffer_[pick]);
      if (got.ok() && *got) return true;
      input_done_ = true;
      remove(pick);
      if (!got.ok()) return got.status();
      return true;
    }
    remove(pick);
    return true;
  }

  std::size_t buffered() const { return buffer_.size(); }
  // The stream after the draws made so far.
  const RandomStream& random() const { return random_; }

 private:
  void remove(std::size_t i) {
    if (i + 1 != buffer_.size()) buffer_[i] = std::move(buffer_.back());
    buffer_.pop_back();
  }

  std::size_t capacity_;
  RandomStream random_;
  std::vector<T> buffer_;
  bool filled_ = false;
  bool input_done_ = false;
};

}  // namespace twinps
