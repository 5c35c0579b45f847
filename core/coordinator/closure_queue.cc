#include "core/coordinator/closure_queue.h"

#include <algorithm>
#include <cassert>

namespace twinps {

ClosureQueue::ClosureQueue(Executor& ex, std::size_t capacity, int num_workers)
    : executor_(ex), capacity_(capacity), tagged_(static_cast<std::size_t>(num_workers)), changed_(ex) {}

Task<void> ClosureQueue::wait_for_space() {
  while (capacity_ != 0 && queue_.size() >= capacity_) co_await changed_.wait();
}

void ClosureQueue::put(std::shared_ptr<Closure> closure) {
  queue_.push_back(std::move(closure));
  dispatch();
  changed_.notify_all();
}

Task<void> ClosureQueue::wait_until_idle_or_error() {
  while (!idle() && !error_) co_await changed_.wait();
}

Task<void> ClosureQueue::wait_until_nothing_in_flight() {
  while (in_flight_ > 0) co_await changed_.wait();
}

std::size_t ClosureQueue::cancel_queued() {
  std::size_t n = queue_.size();
  auto cancelled = std::move(queue_);
  queue_.clear();
  for (auto& c : cancelled) c->output.set_error(absl::CancelledError(kCancelledClosureMessage));
  changed_.notify_all();
  return n;
}

Status ClosureQueue::take_error() {
  Status s = error_.value_or(absl::OkStatus());
  error_.reset();
  changed_.notify_all();
  return s;
}

Future<ClosureQueue::Work> ClosureQueue::next_work(int worker) {
  Promise<Work> promise(executor_);
  auto future = promise.future();
  if (stopped_) {
    promise.set(Work{nullptr, std::nullopt, true});
    return future;
  }
  idle_.insert_or_assign(worker, std::move(promise));
  dispatch();
  return future;
}

void ClosureQueue::put_tagged(int worker, ResourceClosure closure) {
  tagged_[static_cast<std::size_t>(worker)].push_back(std::move(closure));
  with_tagged_.insert(worker);
  dispatch();
}

void ClosureQueue::clear_tagged(int worker) {
  tagged_[static_cast<std::size_t>(worker)].clear();
  with_tagged_.erase(worker);
}

// An idle worker with resource closures of its own gets the first of them;
// the other idle workers, lowest index first, the queue's closures in order.
// Only those workers are visited, not every idle one: with thousands of
// workers waiting, a put costs O(log workers), not O(workers). They are
// handed their work in worker order, so wake-ups (and so traces) come in the
// order one walk over every idle worker gave.
void ClosureQueue::dispatch() {
  if (paused_) return;
  std::vector<int> chosen;
  for (int w : with_tagged_)
    if (idle_.count(w)) chosen.push_back(w);
  std::size_t closures = queue_.size();
  for (auto it = idle_.begin(); it != idle_.end() && closures > 0; ++it)
    if (!with_tagged_.count(it->first)) {
      chosen.push_back(it->first);
      --closures;
    }
  std::sort(chosen.begin(), chosen.end());
  for (int worker : chosen) {
    auto it = idle_.find(worker);
    auto& tagged = tagged_[static_cast<std::size_t>(worker)];
    if (!tagged.empty()) {
      // Resource closures are never counted in flight (C8): join does not wait for them.
      Work w{nullptr, std::move(tagged.front()), false};
      tagged.pop_front();
      if (tagged.empty()) with_tagged_.erase(worker);
      it->second.set(std::move(w));
      idle_.erase(it);
    } else {
      Work w{std::move(queue_.front()), std::nullopt, false};
      queue_.pop_front();
      ++in_flight_;
      it->second.set(std::move(w));
      idle_.erase(it);
      changed_.notify_all();  // space freed for a blocked put
    }
  }
}

void ClosureQueue::finish_in_flight() {
  assert(in_flight_ > 0 && "closure finished that was not in flight");
  --in_flight_;
  changed_.notify_all();
}

void ClosureQueue::mark_finished() { finish_in_flight(); }

void ClosureQueue::mark_failed(Status error) {
  if (!error_) error_ = std::move(error);
  finish_in_flight();
}

void ClosureQueue::report_error(Status error) {
  if (!error_) error_ = std::move(error);
  changed_.notify_all();
}

void ClosureQueue::put_back(std::shared_ptr<Closure> closure) {
  if (error_) {
    closure->output.set_error(absl::CancelledError(kCancelledClosureMessage));
  } else {
    queue_.push_back(std::move(closure));
  }
  finish_in_flight();
  dispatch();
}

void ClosureQueue::resume() {
  paused_ = false;
  dispatch();
  changed_.notify_all();
}

void ClosureQueue::mark_cancelled_in_flight() { finish_in_flight(); }

void ClosureQueue::stop() {
  stopped_ = true;
  auto idle = std::move(idle_);
  idle_.clear();
  for (auto& [worker, promise] : idle) promise.set(Work{nullptr, std::nullopt, true});
}

}  // namespace twinps
