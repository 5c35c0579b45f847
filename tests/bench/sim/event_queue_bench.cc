// Google Benchmark for the simulator's hot path: the (time, sequence) event
// queue and the LocalEngine that drives every simulated node.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <vector>

#include "core/local/local_engine.h"
#include "core/runtime/event_queue.h"
#include "core/runtime/random.h"

namespace twinps {
namespace {

// A queue holding `range(0)` pending events; each iteration pops the earliest
// and pushes a new one a random delay later (the classic "hold" model).
void BM_EventQueueHold(benchmark::State& state) {
  EventQueue<std::uint64_t> q;
  RandomStream r(1);
  const auto n = static_cast<std::size_t>(state.range(0));
  for (std::size_t i = 0; i < n; ++i) q.push(static_cast<Time>(r.below(1000000)), i);
  for (auto _ : state) {
    auto e = q.pop();
    q.push(e.time + static_cast<Time>(r.below(1000000)), e.payload);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_EventQueueHold)->Arg(64)->Arg(4096)->Arg(262144);

// Zero-delay posts (coroutine resumptions, task starts): the common case.
void BM_EventQueueSameTime(benchmark::State& state) {
  EventQueue<std::uint64_t> q;
  Time now = 0;
  for (int i = 0; i < 64; ++i) q.push(now + 1000 * i, 0);
  for (auto _ : state) {
    auto e = q.pop();
    now = e.time;
    q.push(now, e.payload + 1);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_EventQueueSameTime);

// Pushes a timer and cancels it before it fires (deadlines that are met).
void BM_EventQueueCancel(benchmark::State& state) {
  EventQueue<std::uint64_t> q;
  Time now = 0;
  for (int i = 0; i < 1024; ++i) q.push(i * 1000, 0);
  for (auto _ : state) {
    auto id = q.push(now + 30000000000, 0);
    auto e = q.pop();
    now = e.time;
    q.push(now + 1024 * 1000, 0);
    q.cancel(id);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_EventQueueCancel);

// The whole engine: `range(0)` nodes each re-posting a callback with a
// random delay, so every event pays for the callback, the incarnation check
// and the clock update.
void BM_EngineEvents(benchmark::State& state) {
  LocalEngine engine;
  const int nodes = static_cast<int>(state.range(0));
  std::vector<LocalEngine::NodeSlot> slots;
  for (int i = 0; i < nodes; ++i) slots.push_back(engine.add_node());
  RandomStream r(7);
  struct Chain {
    LocalEngine* engine;
    LocalEngine::NodeSlot node;
    RandomStream* random;
    void operator()() const {
      engine->post_at(node, engine->incarnation(node), engine->now() + static_cast<Time>(random->below(10000)), *this);
    }
  };
  for (auto s : slots) engine.post_at(s, engine.incarnation(s), 0, Chain{&engine, s, &r});
  for (auto _ : state) engine.step();
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_EngineEvents)->Arg(16)->Arg(1024)->Arg(65536);

// Zero-delay posts through the engine, as coroutine resumptions do.
void BM_EngineZeroDelay(benchmark::State& state) {
  LocalEngine engine;
  auto node = engine.add_node();
  struct Chain {
    LocalEngine* engine;
    LocalEngine::NodeSlot node;
    void operator()() const { engine->post_at(node, engine->incarnation(node), engine->now(), *this); }
  };
  for (int i = 0; i < 8; ++i) engine.post_at(node, 1, 0, Chain{&engine, node});
  for (auto _ : state) engine.step();
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_EngineZeroDelay);

}  // namespace
}  // namespace twinps

BENCHMARK_MAIN();
