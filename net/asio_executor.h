#pragma once
// The real-mode Executor: a boost::asio::io_context that exactly one thread
// runs at a time — either the caller of run_until() (a client program's main
// loop) or the executor's own thread after start() (a server node). Every
// callback a node sees runs there, one at a time, so core code takes no lock.
//
//   * now(): steady-clock nanoseconds since the executor was constructed.
//   * post(): thread-safe; gRPC threads post completions through it.
//   * post_at()/cancel(): thread-safe; timers live in one (time, sequence)
//     queue behind a single asio timer. Cancelling a fired or unknown id is a
//     no-op.
//   * run_until(pred, limit): runs callbacks on the calling thread until
//     pred() holds (true), the clock reaches `limit` (false), or nothing is
//     left that could ever run a callback (false): no queued callback, no
//     timer, and no outstanding Work (a transport holds Work for each call
//     in flight, since its completion will arrive later). Sockets waiting on
//     the io_context (a data-plane listener, an idle connection) do not
//     count: I/O that is ready runs, but nobody waits for I/O that no Work
//     stands for.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>

#include "core/runtime/event_queue.h"
#include "core/runtime/executor.h"

namespace twinps::net {

class AsioExecutor final : public Executor {
 public:
  AsioExecutor();
  // now() counts from `epoch` rather than from construction: executors that
  // share an epoch (the tasks of an in-process cluster) share a clock, and
  // their traces line up.
  explicit AsioExecutor(std::chrono::steady_clock::time_point epoch);
  ~AsioExecutor() override;  // stops the thread if started; queued callbacks are destroyed unrun
  AsioExecutor(const AsioExecutor&) = delete;
  AsioExecutor& operator=(const AsioExecutor&) = delete;

  Time now() const override;
  void post(Callback fn) override;
  TimerId post_at(Time when, Callback fn) override;
  void cancel(TimerId id) override;
  bool run_until(const std::function<bool()>& done, Time limit = kTimeNever) override;

  // Runs the loop on a thread of its own until stop() (for server nodes).
  // run_until() must not be called while started.
  void start();
  // Stops and joins the thread; callbacks still queued stay queued. Idempotent.
  // Not callable from the executor's own thread.
  void stop();
  bool started() const { return thread_.joinable(); }

  // Runs `fn` on the executor and waits for it: the way another thread (a
  // test, a launcher) touches a node whose executor runs on its own thread.
  // Must not be called from the executor's own thread, and the loop must be
  // running (start()) or be driven by someone else meanwhile.
  void run_sync(std::function<void()> fn);

  // True on the thread currently running the loop.
  bool in_executor_thread() const;

  // Callbacks post()ed and not yet run. Order between posters: what another
  // thread posts while a callback runs is run before what that callback
  // posts (asio holds the executor thread's own posts until its callback
  // returns), so code must not rely on the order of posts across threads.
  std::int64_t queued() const { return posted_.load(std::memory_order_acquire); }

  // Keeps run_until() from treating the loop as idle while a completion is
  // due from another thread. Movable, thread-safe to create and destroy; must
  // not outlive the executor.
  class Work {
   public:
    Work() = default;
    explicit Work(AsioExecutor& ex) : ex_(&ex), guard_(std::in_place, ex.io_.get_executor()) {
      ex.works_.fetch_add(1, std::memory_order_relaxed);
    }
    Work(Work&& o) noexcept : ex_(std::exchange(o.ex_, nullptr)) {
      if (o.guard_) guard_.emplace(std::move(*o.guard_));
      o.guard_.reset();
    }
    Work& operator=(Work&& o) noexcept {
      if (this != &o) {
        reset();
        ex_ = std::exchange(o.ex_, nullptr);
        if (o.guard_) guard_.emplace(std::move(*o.guard_));
        o.guard_.reset();
      }
      return *this;
    }
    ~Work() { reset(); }
    void reset() {
      if (!ex_) return;
      guard_.reset();
      ex_->works_.fetch_sub(1, std::memory_order_release);
      ex_ = nullptr;
    }
    explicit operator bool() const { return ex_ != nullptr; }

   private:
    AsioExecutor* ex_ = nullptr;
    std::optional<boost::asio::executor_work_guard<boost::asio::io_context::executor_type>> guard_;
  };

  boost::asio::io_context& context() { return io_; }

  // Converts between this executor's clock and std::chrono::steady_clock.
  std::chrono::steady_clock::time_point to_steady(Time t) const;
  Time from_steady(std::chrono::steady_clock::time_point t) const;
  // The steady-clock instant now() counts from.
  std::chrono::steady_clock::time_point epoch() const { return epoch_; }

 private:
  void arm_timer();       // executor thread only
  void on_timer(const boost::system::error_code& ec);
  void request_arm();     // from any thread
  // No queued callback, no timer, no Work: only sockets could still run something.
  bool idle() const;

  const std::chrono::steady_clock::time_point epoch_;
  mutable boost::asio::io_context io_;  // mutable: get_executor() is non-const
  boost::asio::steady_timer timer_;
  Time armed_for_ = kTimeNever;  // executor thread only

  mutable std::mutex timers_mu_;
  EventQueue<Callback> timers_;  // guarded by timers_mu_
  std::atomic<bool> arm_pending_{false};
  std::atomic<std::int64_t> posted_{0};  // post()ed callbacks not yet run
  std::atomic<std::int64_t> works_{0};   // live Work objects

  std::thread thread_;
  std::optional<boost::asio::executor_work_guard<boost::asio::io_context::executor_type>> keep_alive_;
};

}  // namespace twinps::net
