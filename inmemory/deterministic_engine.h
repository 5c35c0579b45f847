#pragma once
// A deterministic single-threaded event loop with a manual clock: events run in
// (time, sequence) order and the clock jumps to each event's time. Nodes get
// executor views tagged with an incarnation; when a node is killed its
// incarnation is bumped and every event still queued for the old incarnation
// is skipped, so a dead node's callbacks never run.
//
// Core's tests run whole clusters on it; the simulator (sim/) adds a network
// model, faults and tracing on top of the same engine.
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <vector>

#include "core/runtime/event_queue.h"
#include "core/runtime/executor.h"

namespace twinps {

class DeterministicEngine {
 public:
  using NodeSlot = std::uint32_t;

  DeterministicEngine() = default;
  DeterministicEngine(const DeterministicEngine&) = delete;
  DeterministicEngine& operator=(const DeterministicEngine&) = delete;

  Time now() const { return now_; }

  NodeSlot add_node() {
    incarnations_.push_back(1);
    held_.emplace_back();
    paused_.push_back(false);
    return static_cast<NodeSlot>(incarnations_.size() - 1);
  }
  std::uint32_t incarnation(NodeSlot node) const { return incarnations_[node]; }
  // Every queued event of the node's current incarnation becomes a no-op
  // (and a paused node is no longer paused: what it held is dropped).
  void bump_incarnation(NodeSlot node) {
    ++incarnations_[node];
    paused_[node] = false;
    held_count_ -= held_[node].size();
    held_[node].clear();
  }

  // SIGSTOP and SIGCONT: while a node is paused its events (timers, messages
  // delivered to it) are held, in order, and run when it resumes — late, as
  // a stopped process's would. Nothing is lost and nothing runs meanwhile.
  void pause(NodeSlot node) { paused_[node] = true; }
  void resume(NodeSlot node) {
    if (!paused_[node]) return;
    paused_[node] = false;
    auto held = std::move(held_[node]);
    held_[node].clear();
    held_count_ -= held.size();
    // Re-posted now, in the order they were due; an id given out before keeps
    // cancelling its event through `reposted_`.
    for (auto& [old_id, ev] : held) {
      const TimerId id = queue_.push(now_, std::move(ev));
      reposted_[old_id] = id;
    }
  }
  bool paused(NodeSlot node) const { return paused_[node]; }

  TimerId post_at(NodeSlot node, std::uint32_t incarnation, Time when, Callback fn) {
    if (when < now_) when = now_;
    return queue_.push(when, Event{std::move(fn), node, incarnation});
  }
  void cancel(TimerId id) {
    if (queue_.cancel(id) || (reposted_.empty() && held_count_ == 0)) return;
    if (auto it = reposted_.find(id); it != reposted_.end()) {
      const TimerId now_id = it->second;
      reposted_.erase(it);
      cancel(now_id);
      return;
    }
    for (auto& held : held_)
      for (auto it = held.begin(); it != held.end(); ++it)
        if (it->first == id) {
          held.erase(it);
          --held_count_;
          return;
        }
  }

  // Runs one event; false if none is left.
  bool step() {
    if (queue_.empty()) return false;
    auto ev = queue_.pop();
    now_ = ev.time;
    if (incarnations_[ev.payload.node] != ev.payload.incarnation) {
      ++skipped_;
      return true;
    }
    if (paused_[ev.payload.node]) {
      held_[ev.payload.node].emplace_back(ev.id, std::move(ev.payload));
      ++held_count_;
      return true;
    }
    ++processed_;
    if (observer_) observer_(ev.time, ev.payload.node);
    ev.payload.fn();
    return true;
  }

  bool run_until(const std::function<bool()>& done, Time limit = kTimeNever) {
    while (!done()) {
      if (queue_.empty() || queue_.next_time() > limit) {
        // Time passes up to the limit even when nothing happens in between.
        if (limit != kTimeNever && limit > now_) now_ = limit;
        return false;
      }
      step();
    }
    return true;
  }
  // Runs until no event is left or the clock would pass `limit`.
  void run(Time limit = kTimeNever) {
    run_until([] { return false; }, limit);
  }

  std::uint64_t events_processed() const { return processed_; }
  std::uint64_t events_skipped() const { return skipped_; }
  bool idle() const { return queue_.empty(); }
  // Called before each event runs (the simulator folds it into the trace hash).
  void set_observer(std::function<void(Time, NodeSlot)> fn) { observer_ = std::move(fn); }

 private:
  struct Event {
    Callback fn;
    NodeSlot node = 0;
    std::uint32_t incarnation = 0;
  };
  EventQueue<Event> queue_;
  std::vector<std::uint32_t> incarnations_;
  std::vector<bool> paused_;
  std::vector<std::vector<std::pair<TimerId, Event>>> held_;  // per node, in the order they were due
  std::size_t held_count_ = 0;
  std::map<TimerId, TimerId> reposted_;  // id before the pause -> id of the re-posted event
  Time now_ = 0;
  std::uint64_t processed_ = 0;
  std::uint64_t skipped_ = 0;
  std::function<void(Time, NodeSlot)> observer_;
};

// One node's view of the engine, bound to the incarnation it was created for.
class NodeExecutor final : public Executor {
 public:
  NodeExecutor(DeterministicEngine& engine, DeterministicEngine::NodeSlot node)
      : engine_(engine), node_(node), incarnation_(engine.incarnation(node)) {}

  Time now() const override { return engine_.now(); }
  void post(Callback fn) override { engine_.post_at(node_, incarnation_, engine_.now(), std::move(fn)); }
  TimerId post_at(Time when, Callback fn) override { return engine_.post_at(node_, incarnation_, when, std::move(fn)); }
  void cancel(TimerId id) override { engine_.cancel(id); }
  bool run_until(const std::function<bool()>& done, Time limit) override { return engine_.run_until(done, limit); }

  DeterministicEngine::NodeSlot node() const { return node_; }
  bool alive() const { return engine_.incarnation(node_) == incarnation_; }

 private:
  DeterministicEngine& engine_;
  DeterministicEngine::NodeSlot node_;
  std::uint32_t incarnation_;
};

}  // namespace twinps
