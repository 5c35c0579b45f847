#include "sim/generated_scenarios.h"

#include "core/runtime/random.h"
#include "sim/expectations.h"
#include "sim/scenario_loader.h"
#include "sim/simulation.h"

namespace twinps::sim {

scenario::Scenario swarm_scenario(std::uint64_t seed) {
  RandomStream r = RandomStream(seed).fork("swarm");
  scenario::Scenario s;
  s.set_name("swarm seed " + std::to_string(seed));
  s.set_seed(seed);
  s.set_fidelity(r.bernoulli(0.5) ? scenario::NUMERIC : scenario::TIMING_ONLY);
  const int workers = static_cast<int>(r.uniform_int(2, 4));
  const int ps = static_cast<int>(r.uniform_int(1, 2));
  s.mutable_cluster()->set_workers(workers);
  s.mutable_cluster()->set_ps(ps);

  auto* m = s.mutable_model();
  auto* emb = m->add_variable();
  emb->set_name("embedding");
  emb->add_shape(r.uniform_int(20, 200));
  emb->add_shape(8);
  emb->set_rows_per_step(r.uniform_int(1, 16));
  if (r.bernoulli(0.3)) emb->set_zipf_exponent(r.uniform(0.5, 1.5));
  auto* dense = m->add_variable();
  dense->set_name("dense");
  dense->add_shape(8);
  dense->add_shape(4);
  auto* lr = m->add_variable();
  lr->set_name("learning_rate");
  lr->set_read_only(true);
  lr->set_per_step(false);
  m->mutable_partitioner()->set_fixed_shards(r.uniform_int(1, 3));
  m->mutable_optimizer()->set_kind(r.bernoulli(0.5) ? scenario::Optimizer::SGD : scenario::Optimizer::ADAM);

  s.mutable_compute()->mutable_step_time()->mutable_lognormal()->set_median_s(r.uniform(0.02, 0.1));
  auto* co = s.mutable_coordinator();
  co->set_transient_ps_failures(static_cast<int>(r.uniform_int(1, 3)));
  co->set_rpc_timeout_s(5);
  co->set_ps_call_timeout_s(5);
  if (r.bernoulli(0.3)) co->set_closure_timeout_s(r.uniform(2, 6));
  s.mutable_network()->set_connection_timeout_s(2);

  // Rounds of scheduling, an occasional application error, then a join.
  const int rounds = static_cast<int>(r.uniform_int(2, 5));
  for (int round = 0; round < rounds; ++round) {
    const int n = static_cast<int>(r.uniform_int(2, 12));
    for (int k = 0; k < n; ++k) {
      auto* a = s.add_program();
      a->set_label("r" + std::to_string(round) + "s" + std::to_string(k));
      a->mutable_schedule()->set_function(r.bernoulli(0.03) ? "fail" : "train");
      if (r.bernoulli(0.3)) a->mutable_schedule()->set_extra_s(r.uniform(0.2, 2));
    }
    if (r.bernoulli(0.3)) s.add_program()->mutable_done();
    s.add_program()->mutable_join();
    if (r.bernoulli(0.5)) s.add_program()->set_sleep_s(r.uniform(0, 2));
  }

  // Faults end (every kill restarts, partitions heal): TensorFlow's join
  // waits for a dead worker forever, so a schedule that never heals would
  // only prove that. A ps may also die for good, which must raise.
  auto* rf = s.mutable_random_faults();
  rf->set_count(static_cast<int>(r.uniform_int(1, 4)));
  for (auto k : {scenario::RandomFaults::WORKER_CRASH, scenario::RandomFaults::PS_CRASH,
                 scenario::RandomFaults::PARTITION, scenario::RandomFaults::STRAGGLER,
                 scenario::RandomFaults::SLOW_LINK, scenario::RandomFaults::COORDINATOR_CRASH})
    rf->add_kind(k);
  rf->add_kind(scenario::RandomFaults::WORKER_CRASH);  // the most common failure
  rf->set_start_s(0);
  rf->set_end_s(4);
  rf->set_min_duration_s(0.2);
  rf->set_max_duration_s(4);
  if (r.bernoulli(0.1)) {
    auto* f = s.add_fault();
    f->set_at_s(r.uniform(0, 4));
    f->set_kill_ps(static_cast<int>(r.below(static_cast<std::uint64_t>(ps))));
  }
  if (r.bernoulli(0.2)) {
    auto* f = s.add_fault();
    f->set_at_s(r.uniform(0, 4));
    f->set_duration_s(r.uniform(0.5, 3));
    f->mutable_hotspot()->set_variable("learning_rate");
  }
  // Drawn last, so the schedules above stay what they were for every seed.
  // Pushes duplicated and reordered on the way (never lost: a lost pull or
  // push is a ps failure, which the fault schedules above already cover).
  if (r.bernoulli(0.3)) {
    auto* m = s.mutable_message_faults();
    m->set_duplicate(r.uniform(0.05, 0.4));
    m->set_delay(r.uniform(0, 0.5));
    m->set_max_delay_s(r.uniform(0.001, 0.1));
  }
  s.set_time_limit_s(3600);
  s.add_expect()->set_invariants(true);
  return s;
}

SwarmOutcome run_swarm_seed(std::uint64_t seed) {
  SwarmOutcome out;
  const scenario::Scenario s = swarm_scenario(seed);
  auto errors = validate_scenario(s, s.name());
  if (!errors.empty()) {
    out.violations.push_back("the generated scenario is invalid: " + errors.front().to_string());
    return out;
  }
  SimOptions o;
  o.record_invariants = true;
  Simulation sim(s, o);
  SimResult r = sim.run();
  if (!r.setup_error.ok()) {
    out.violations.push_back("setup failed: " + describe(r.setup_error));
    return out;
  }
  out.violations = check_invariants(r);
  out.errors_raised = r.stats.errors_raised;
  out.retried = r.stats.retried;
  out.worker_failures = r.stats.worker_failures;
  out.cancelled = r.stats.cancelled;
  out.coordinator_restarts = r.starts.empty() ? 0 : r.starts.size() - 1;
  out.end_time = r.end_time;
  return out;
}

scenario::Scenario bench_scenario(const BenchOptions& o) {
  scenario::Scenario s;
  s.set_name("bench: " + std::to_string(o.workers) + " workers x " + std::to_string(o.ps) + " ps, timing-only");
  s.set_fidelity(scenario::TIMING_ONLY);
  s.mutable_cluster()->set_workers(o.workers);
  s.mutable_cluster()->set_ps(o.ps);
  auto* m = s.mutable_model();
  auto* emb = m->add_variable();
  emb->set_name("embedding");
  emb->add_shape(100'000'000);
  emb->add_shape(64);
  emb->set_rows_per_step(o.rows_per_step);
  if (o.tower_kib > 0) {
    auto* tower = m->add_variable();
    tower->set_name("tower");
    tower->add_shape(o.tower_kib);
    tower->add_shape(256);  // 1 KiB rows
  }
  // Shards of at least 16 MiB, at most one per ps: the embedding gets one per
  // ps and the tower stays whole.
  m->mutable_partitioner()->mutable_min_size()->set_min_shard_bytes(16 << 20);
  m->mutable_partitioner()->mutable_min_size()->set_max_shards(o.ps);
  m->set_batch_size(1024);
  auto* step = s.mutable_compute()->mutable_step_time()->mutable_lognormal();
  step->set_median_s(o.step_s);
  step->set_sigma(0.2);
  s.mutable_network()->set_hosts_per_rack(40);
  s.mutable_network()->set_host_bandwidth_gbps(25);
  // Enough closures for the whole run, scheduled up front, then one join.
  const auto closures = static_cast<int>(o.workers * (o.sim_seconds / o.step_s) * 1.1) + o.workers;
  auto* a = s.add_program();
  a->mutable_schedule()->set_count(closures);
  s.add_program()->mutable_join();
  s.set_time_limit_s(o.sim_seconds);
  return s;
}

}  // namespace twinps::sim
