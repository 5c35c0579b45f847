#pragma once
// A deterministic event queue: events pop in (time, insertion sequence) order,
// so equal-time events run in the order they were posted, on every machine.
// Cancellation is lazy: a cancelled event's slot is freed at once and its heap
// entry is skipped when it surfaces. Used by the test executor in core/local
// and by the simulator's engine.
#include <cstdint>
#include <utility>
#include <vector>

#include "core/runtime/time.h"

namespace twinps {

template <typename Payload>
class EventQueue {
 public:
  using EventId = std::uint64_t;  // 0 is never a valid id

  EventId push(Time when, Payload payload) {
    std::uint32_t slot;
    if (!free_.empty()) {
      slot = free_.back();
      free_.pop_back();
      slots_[slot].payload = std::move(payload);
    } else {
      slot = static_cast<std::uint32_t>(slots_.size());
      slots_.push_back(Slot{std::move(payload), 1});
    }
    Entry e{when, next_seq_++, slot, slots_[slot].generation};
    heap_.push_back(e);
    sift_up(heap_.size() - 1);
    ++live_;
    return (static_cast<EventId>(e.generation) << 32) | (slot + 1ull);
  }

  // Returns true if the event was pending and is now cancelled.
  bool cancel(EventId id) {
    if (id == 0) return false;
    auto slot = static_cast<std::uint32_t>((id & 0xffffffffull) - 1);
    auto gen = static_cast<std::uint32_t>(id >> 32);
    if (slot >= slots_.size() || slots_[slot].generation != gen) return false;
    release(slot);
    --live_;
    return true;
  }

  bool empty() const { return live_ == 0; }
  std::size_t size() const { return live_; }
  std::uint64_t pushed() const { return next_seq_; }

  // Time of the earliest live event; call only when !empty().
  Time next_time() {
    drop_cancelled();
    return heap_.front().time;
  }

  // Removes the earliest live event; call only when !empty().
  struct Popped {
    Time time;
    std::uint64_t sequence;
    Payload payload;
  };
  Popped pop() {
    drop_cancelled();
    Entry top = heap_.front();
    remove_top();
    Popped out{top.time, top.seq, std::move(slots_[top.slot].payload)};
    release(top.slot);
    --live_;
    return out;
  }

 private:
  struct Entry {
    Time time;
    std::uint64_t seq;
    std::uint32_t slot;
    std::uint32_t generation;
    bool before(const Entry& o) const { return time != o.time ? time < o.time : seq < o.seq; }
  };
  struct Slot {
    Payload payload;
    std::uint32_t generation;
  };
  static constexpr std::size_t kArity = 4;  // shallower than binary, friendlier to the cache

  void release(std::uint32_t slot) {
    slots_[slot].payload = Payload{};
    if (++slots_[slot].generation == 0) slots_[slot].generation = 1;
    free_.push_back(slot);
  }
  void drop_cancelled() {
    while (slots_[heap_.front().slot].generation != heap_.front().generation) remove_top();
  }
  void remove_top() {
    heap_.front() = heap_.back();
    heap_.pop_back();
    if (!heap_.empty()) sift_down(0);
  }
  void sift_up(std::size_t i) {
    Entry e = heap_[i];
    while (i > 0) {
      std::size_t parent = (i - 1) / kArity;
      if (!e.before(heap_[parent])) break;
      heap_[i] = heap_[parent];
      i = parent;
    }
    heap_[i] = e;
  }
  void sift_down(std::size_t i) {
    Entry e = heap_[i];
    const std::size_t n = heap_.size();
    for (;;) {
      std::size_t first = i * kArity + 1;
      if (first >= n) break;
      std::size_t best = first;
      std::size_t last = first + kArity < n ? first + kArity : n;
      for (std::size_t c = first + 1; c < last; ++c)
        if (heap_[c].before(heap_[best])) best = c;
      if (!heap_[best].before(e)) break;
      heap_[i] = heap_[best];
      i = best;
    }
    heap_[i] = e;
  }

  std::vector<Entry> heap_;
  std::vector<Slot> slots_;
  std::vector<std::uint32_t> free_;
  std::uint64_t next_seq_ = 0;
  std::size_t live_ = 0;
};

}  // namespace twinps
