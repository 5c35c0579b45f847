// twinps bench sim: how fast the simulator runs a large timing-only cluster.
// Reports simulated time, events, events per second of wall time and the
// simulated-to-wall-time ratio (the wall clock is read here, not in sim/).
#include <chrono>
#include <cstdio>

#include "sim/generated_scenarios.h"
#include "sim/report.h"
#include "sim/resource_estimate.h"
#include "sim/scenario_loader.h"
#include "sim/simulation.h"
#include "tools/cli.h"
#include "tools/commands/commands.h"
#include "tools/resource_limits.h"

namespace twinps::cli {

int run_bench_sim(int argc, char** argv) {
  sim::BenchOptions b;
  std::uint64_t seed = 1;
  std::string network = "fifo";
  po::options_description opts("twinps bench sim options");
  opts.add_options()("help,h", "show this help")
      ("workers", value_or(&b.workers, b.workers)->notifier(at_least(1)), "worker tasks")
      ("ps", value_or(&b.ps, b.ps)->notifier(at_least(1)), "parameter-server tasks")
      ("seconds", value_or(&b.sim_seconds, b.sim_seconds)->notifier(positive()), "simulated seconds to run")
      ("rows-per-step", value_or(&b.rows_per_step, b.rows_per_step)->notifier(at_least(0)),
       "embedding rows each step looks up (about the number of ps a step visits)")
      ("tower-kib", value_or(&b.tower_kib, b.tower_kib)->notifier(at_least(0)),
       "dense variable every step reads and updates, KiB")
      ("step-time", value_or(&b.step_s, b.step_s)->notifier(positive()), "median compute time of a step, seconds")
      ("seed", value_or(&seed, std::uint64_t{1}), "seed of the run")
      ("network", value_or(&network, std::string("fifo"))->notifier(one_of({"fifo", "flow", "lv08"})),
       "network model: fifo (per-link queues), flow (max-min fair sharing) or lv08 (flow with SimGrid's LV08 corrections)");
  po::variables_map vm;
  if (int rc = parse(argc, argv, "usage: twinps bench sim [--workers N] [--ps N] [--seconds S] [--rows-per-step R]",
                     opts, vm);
      rc >= 0)
    return rc;
  const int workers = b.workers, ps = b.ps;
  scenario::Scenario s = sim::bench_scenario(b);
  if (network != "fifo") s.mutable_network()->set_model(scenario::Network::FLOW);
  if (network == "lv08") s.mutable_network()->set_lv08(true);
  if (auto errors = sim::validate_scenario(s, "bench"); !errors.empty()) {
    std::fprintf(stderr, "twinps bench sim: %s\n", errors.front().to_string().c_str());
    return kExitBadInput;
  }
  {
    // A cluster whose model cannot fit in memory is refused before it is built.
    const MemoryLimit m = memory_limit();
    sim::ResourceLimits limits;
    limits.memory_bytes = m.bytes;
    limits.memory_source = m.source;
    const auto too_big = sim::check_resources(s, limits, "twinps bench sim");
    for (const auto& e : too_big) std::fprintf(stderr, "%s\n", e.to_string().c_str());
    if (!too_big.empty()) return kExitBadInput;
  }
  sim::SimOptions options;
  options.seed = seed;
  const auto t0 = std::chrono::steady_clock::now();
  sim::Simulation simulation(s, options);
  const auto t1 = std::chrono::steady_clock::now();
  sim::SimResult r = simulation.run();
  const auto t2 = std::chrono::steady_clock::now();
  if (!r.setup_error.ok()) {
    std::fprintf(stderr, "twinps bench sim: %s\n", describe(r.setup_error).c_str());
    return kExitFailed;
  }
  const double setup_s = std::chrono::duration<double>(t1 - t0).count();
  const double wall_s = std::chrono::duration<double>(t2 - t1).count();
  const auto steps = sim::summarize_steps(r);
  if (auto stalled = sim::no_progress(r, /*time_limited=*/true)) {
    // Nothing was trained: a throughput or speed-up figure would be meaningless.
    std::fprintf(stderr, "twinps bench sim: %s\n", stalled->c_str());
    return kExitFailed;
  }
  Table t;
  t.row("cluster", format("%d workers x %d ps, timing-only, %s network", workers, ps, network.c_str()));
  t.row("workload", format("%d embedding rows per step, %d KiB tower, steps of %.2f s", b.rows_per_step, b.tower_kib,
                           b.step_s));
  t.row("simulated time", format("%.3f s", to_seconds(r.end_time)));
  t.row("training steps", format("%llu (%.1f steps/s simulated)", static_cast<unsigned long long>(steps.steps),
                                 steps.steps_per_second));
  t.row("step time p50 / p99", format("%.3f s / %.3f s", steps.p50_s, steps.p99_s));
  t.row("events processed", std::to_string(r.events));
  t.row("setup wall time", format("%.3f s", setup_s));
  t.row("run wall time", format("%.3f s", wall_s));
  t.row("events per second", format("%.2f M", static_cast<double>(r.events) / wall_s / 1e6));
  t.row("simulated / wall time", format("%.1fx", to_seconds(r.end_time) / wall_s));
  t.row("trace hash", format("%016llx", static_cast<unsigned long long>(r.trace_hash)));
  t.print();
  return kExitOk;
}

}  // namespace twinps::cli
