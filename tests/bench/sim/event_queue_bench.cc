// Google Benchmark for the simulator's hot path: the (time, sequence) event
// queue and the DeterministicEngine that drives every simulated node, and the random
// streams. Each hand-written piece is measured beside the library it stands
// in for (std::priority_queue, Boost.Random), so the comments in
// core/runtime/event_queue.h and random.h can say what it buys:
//   twinps_sim_bench --benchmark_filter='Hold|Below|Uniform'
#include <benchmark/benchmark.h>

#include <boost/random/mersenne_twister.hpp>
#include <boost/random/uniform_int_distribution.hpp>
#include <boost/random/uniform_real_distribution.hpp>

#include <cstdint>
#include <functional>
#include <queue>
#include <tuple>
#include <vector>

#include "inmemory/deterministic_engine.h"
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

// The same hold model on std::priority_queue ordered by (time, sequence): the
// standard library's binary heap, with no same-instant FIFO and no
// cancellation (EventQueue has both).
void BM_StdPriorityQueueHold(benchmark::State& state) {
  using Entry = std::tuple<Time, std::uint64_t, std::uint64_t>;  // time, sequence, payload
  std::priority_queue<Entry, std::vector<Entry>, std::greater<Entry>> q;
  RandomStream r(1);
  std::uint64_t seq = 0;
  const auto n = static_cast<std::size_t>(state.range(0));
  for (std::size_t i = 0; i < n; ++i) q.emplace(static_cast<Time>(r.below(1000000)), seq++, i);
  for (auto _ : state) {
    auto [time, s, payload] = q.top();
    q.pop();
    q.emplace(time + static_cast<Time>(r.below(1000000)), seq++, payload);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_StdPriorityQueueHold)->Arg(64)->Arg(4096)->Arg(262144);

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

// The same zero-delay posts on std::priority_queue (time, sequence): every one
// goes through the heap.
void BM_StdPriorityQueueSameTime(benchmark::State& state) {
  using Entry = std::tuple<Time, std::uint64_t, std::uint64_t>;
  std::priority_queue<Entry, std::vector<Entry>, std::greater<Entry>> q;
  std::uint64_t seq = 0;
  Time now = 0;
  for (int i = 0; i < 64; ++i) q.emplace(now + 1000 * i, seq++, 0);
  for (auto _ : state) {
    auto [time, s, payload] = q.top();
    q.pop();
    now = time;
    q.emplace(now, seq++, payload + 1);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_StdPriorityQueueSameTime);

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
  DeterministicEngine engine;
  const int nodes = static_cast<int>(state.range(0));
  std::vector<DeterministicEngine::NodeSlot> slots;
  for (int i = 0; i < nodes; ++i) slots.push_back(engine.add_node());
  RandomStream r(7);
  struct Chain {
    DeterministicEngine* engine;
    DeterministicEngine::NodeSlot node;
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
  DeterministicEngine engine;
  auto node = engine.add_node();
  struct Chain {
    DeterministicEngine* engine;
    DeterministicEngine::NodeSlot node;
    void operator()() const { engine->post_at(node, engine->incarnation(node), engine->now(), *this); }
  };
  for (int i = 0; i < 8; ++i) engine.post_at(node, 1, 0, Chain{&engine, node});
  for (auto _ : state) engine.step();
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_EngineZeroDelay);

// Random draws as the simulator makes them: integers below a bound, doubles in [0, 1).
void BM_RandomStreamBelow(benchmark::State& state) {
  RandomStream r(1);
  std::uint64_t sum = 0;
  for (auto _ : state) sum += r.below(1000003);
  benchmark::DoNotOptimize(sum);
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_RandomStreamBelow);

void BM_BoostMt19937Below(benchmark::State& state) {
  boost::random::mt19937_64 engine(1);
  boost::random::uniform_int_distribution<std::uint64_t> below(0, 1000002);
  std::uint64_t sum = 0;
  for (auto _ : state) sum += below(engine);
  benchmark::DoNotOptimize(sum);
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_BoostMt19937Below);

void BM_RandomStreamUniform(benchmark::State& state) {
  RandomStream r(1);
  double sum = 0;
  for (auto _ : state) sum += r.uniform();
  benchmark::DoNotOptimize(sum);
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_RandomStreamUniform);

void BM_BoostMt19937Uniform(benchmark::State& state) {
  boost::random::mt19937_64 engine(1);
  boost::random::uniform_real_distribution<double> uniform(0.0, 1.0);
  double sum = 0;
  for (auto _ : state) sum += uniform(engine);
  benchmark::DoNotOptimize(sum);
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_BoostMt19937Uniform);

// Forking a stream per purpose, as every node and component does at start.
void BM_RandomStreamFork(benchmark::State& state) {
  RandomStream r(1);
  std::uint64_t i = 0;
  for (auto _ : state) benchmark::DoNotOptimize(r.fork("worker", i++).next_u64());
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_RandomStreamFork);

}  // namespace
}  // namespace twinps

BENCHMARK_MAIN();
