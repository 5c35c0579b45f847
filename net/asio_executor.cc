#include "net/asio_executor.h"

#include <algorithm>
#include <cassert>
#include <condition_variable>

#include <boost/asio/post.hpp>

namespace twinps::net {

namespace {
// Longest single wait inside run_until(): keeps asio's deadline arithmetic far
// from overflow when the limit is "never".
constexpr Duration kMaxWaitSlice = 3600 * kSecond;
}  // namespace

AsioExecutor::AsioExecutor() : AsioExecutor(std::chrono::steady_clock::now()) {}
AsioExecutor::AsioExecutor(std::chrono::steady_clock::time_point epoch) : epoch_(epoch), io_(1), timer_(io_) {}

AsioExecutor::~AsioExecutor() { stop(); }

Time AsioExecutor::now() const { return from_steady(std::chrono::steady_clock::now()); }

std::chrono::steady_clock::time_point AsioExecutor::to_steady(Time t) const {
  using std::chrono::steady_clock;
  const auto headroom = std::chrono::duration_cast<std::chrono::nanoseconds>(steady_clock::time_point::max() - epoch_);
  if (t >= headroom.count()) return steady_clock::time_point::max();
  return epoch_ + std::chrono::duration_cast<steady_clock::duration>(std::chrono::nanoseconds(t));
}

Time AsioExecutor::from_steady(std::chrono::steady_clock::time_point t) const {
  if (t == std::chrono::steady_clock::time_point::max()) return kTimeNever;
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t - epoch_).count();
}

bool AsioExecutor::in_executor_thread() const { return io_.get_executor().running_in_this_thread(); }

void AsioExecutor::post(Callback fn) {
  posted_.fetch_add(1, std::memory_order_relaxed);
  boost::asio::post(io_, [this, fn = std::move(fn)]() mutable {
    posted_.fetch_sub(1, std::memory_order_relaxed);
    fn();
  });
}

bool AsioExecutor::idle() const {
  if (posted_.load(std::memory_order_acquire) != 0 || works_.load(std::memory_order_acquire) != 0) return false;
  std::lock_guard lock(timers_mu_);
  return timers_.empty();
}

TimerId AsioExecutor::post_at(Time when, Callback fn) {
  TimerId id;
  {
    std::lock_guard lock(timers_mu_);
    id = timers_.push(when, std::move(fn));
  }
  if (in_executor_thread()) {
    if (when < armed_for_) arm_timer();
  } else {
    request_arm();
  }
  return id;
}

void AsioExecutor::cancel(TimerId id) {
  {
    std::lock_guard lock(timers_mu_);
    if (!timers_.cancel(id)) return;
  }
  // Re-arm so that a cancelled timer neither fires nor keeps the loop busy.
  if (in_executor_thread()) {
    arm_timer();
  } else {
    request_arm();
  }
}

void AsioExecutor::request_arm() {
  if (arm_pending_.exchange(true)) return;
  boost::asio::post(io_, [this] {
    arm_pending_.store(false);
    arm_timer();
  });
}

void AsioExecutor::arm_timer() {
  Time next;
  {
    std::lock_guard lock(timers_mu_);
    next = timers_.empty() ? kTimeNever : timers_.next_time();
  }
  if (next == armed_for_) return;
  armed_for_ = next;
  if (next == kTimeNever) {
    timer_.cancel();
    return;
  }
  timer_.expires_at(to_steady(next));  // cancels the wait for the previous expiry
  timer_.async_wait([this](const boost::system::error_code& ec) { on_timer(ec); });
}

void AsioExecutor::on_timer(const boost::system::error_code& ec) {
  if (ec == boost::asio::error::operation_aborted) return;
  armed_for_ = kTimeNever;
  // One timer at a time, so that a callback can cancel a later one due at the same instant.
  for (;;) {
    Callback fn;
    {
      std::lock_guard lock(timers_mu_);
      if (timers_.empty() || timers_.next_time() > now()) break;
      fn = std::move(timers_.pop().payload);
    }
    fn();
  }
  arm_timer();
}

bool AsioExecutor::run_until(const std::function<bool()>& done, Time limit) {
  assert(!started() && "run_until() while the executor runs on its own thread");
  assert(!in_executor_thread() && "run_until() from a callback");
  for (;;) {
    if (done()) return true;
    const Time t = now();
    if (t >= limit) return false;
    if (io_.stopped()) io_.restart();
    if (idle()) {
      // Nothing queued, no timer, no call in flight: run whatever I/O is
      // ready, and once none is, nothing can ever make `done` true.
      if (io_.poll_one() == 0 && idle()) {
        if (io_.stopped()) io_.restart();
        return done();
      }
      continue;
    }
    const Duration wait = std::min<Duration>(limit - t, kMaxWaitSlice);
    io_.run_one_for(std::chrono::nanoseconds(wait));
  }
}

void AsioExecutor::start() {
  if (started()) return;
  if (io_.stopped()) io_.restart();
  keep_alive_.emplace(io_.get_executor());
  thread_ = std::thread([this] { io_.run(); });
}

void AsioExecutor::stop() {
  if (!started()) return;
  assert(!in_executor_thread() && "stop() from the executor's own thread");
  keep_alive_.reset();
  io_.stop();
  thread_.join();
  io_.restart();
}

void AsioExecutor::run_sync(std::function<void()> fn) {
  assert(!in_executor_thread() && "run_sync() from the executor's own thread");
  std::mutex mu;
  std::condition_variable cv;
  bool finished = false;
  post([&] {
    fn();
    std::lock_guard lock(mu);
    finished = true;
    cv.notify_one();
  });
  std::unique_lock lock(mu);
  cv.wait(lock, [&] { return finished; });
}

}  // namespace twinps::net
