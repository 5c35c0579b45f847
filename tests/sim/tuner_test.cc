// The tuner's predictions and sweep: deterministic, sensitive to what they
// claim to measure (ps count, bandwidth, skew), and explaining their choice
// from the numbers.
#include "sim/tuner.h"

#include <gtest/gtest.h>

#include <cmath>
#include <numeric>

#include "core/variables/partitioner.h"
#include "sim/scenario_loader.h"
#include "sim/simulation.h"

namespace twinps::sim {
namespace {

scenario::SyntheticModel model(const std::string& text) {
  auto m = parse_model(text, "model.textproto");
  EXPECT_TRUE(m.ok()) << m.errors.front().to_string();
  return m.model;
}

// 1 MiB of dense weights read and updated whole by every step.
constexpr char kDense[] = R"(
batch_size: 32
variable { name: "dense" shape: [1024, 256] }
)";

// A skewed embedding: Zipf 1.2 puts most lookups in its first rows, which the
// first shard (on ps 0) holds.
constexpr char kZipf[] = R"(
batch_size: 64
variable { name: "emb" shape: [100000, 32] rows_per_step: 256 zipf_exponent: 1.2 }
variable { name: "tower" shape: [32, 32] }
)";

scenario::CostProfile slow_network() {
  scenario::CostProfile p;
  p.mutable_network()->set_host_bandwidth_gbps(1);
  p.mutable_compute()->mutable_step_time()->set_constant_s(0.002);
  return p;
}

PredictRequest dense_request(int ps) {
  PredictRequest r;
  r.model = model(kDense);
  r.model.mutable_partitioner()->set_fixed_shards(4);
  r.workers = 8;
  r.ps = ps;
  r.profile = slow_network();
  r.warmup = 16;
  r.measured = 64;
  return r;
}

TEST(PredictTest, SameSeedSameResult) {
  PredictRequest r = dense_request(2);
  // Compute-bound, with log-normal step times: the seed shows.
  r.profile.mutable_network()->set_host_bandwidth_gbps(100);
  r.profile.mutable_compute()->mutable_step_time()->mutable_lognormal()->set_median_s(0.01);
  auto a = predict(r), b = predict(r);
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(a->steps_per_second, b->steps_per_second);
  EXPECT_EQ(a->step_p50_s, b->step_p50_s);
  EXPECT_EQ(a->step_p99_s, b->step_p99_s);
  EXPECT_EQ(a->ps_utilisation, b->ps_utilisation);
  EXPECT_EQ(a->ps_bytes_per_step, b->ps_bytes_per_step);
  EXPECT_EQ(a->events, b->events);

  r.seed = 2;  // log-normal step times: another seed draws others
  auto c = predict(r);
  ASSERT_TRUE(c.ok());
  EXPECT_NE(a->step_p50_s, c->step_p50_s);
}

// Every task on one busy 2-core host, each job's time drawn around its price.
PredictRequest drawn_request(double spread) {
  PredictRequest r = dense_request(2);
  r.profile.mutable_network()->set_host_bandwidth_gbps(100);
  auto* hosts = r.profile.mutable_hosts();
  hosts->set_placement(scenario::Hosts::ONE_HOST);
  hosts->set_cores(2);
  hosts->set_scheduler(scenario::Hosts::TICKED);
  hosts->set_duration_spread(spread);
  r.profile.mutable_compute()->mutable_step_time()->set_constant_s(0.001);
  r.seed = 5;
  return r;
}

// One simulated run of the prediction's program, at `seed`.
Prediction one_run(PredictRequest r, std::uint64_t seed) {
  r.seed = seed;
  Simulation simulation(throughput_scenario(r, CostsOf::kProfile));
  auto p = read_throughput(simulation.run(), r);
  EXPECT_TRUE(p.ok()) << p.status();
  return p.ok() ? *p : Prediction{};
}

TEST(PredictTest, DrawnJobTimesArePooledOverThreeSeeds) {
  const PredictRequest exact = drawn_request(0);
  EXPECT_EQ(draws_per_prediction(exact.profile), 1);
  auto single = predict(exact);
  ASSERT_TRUE(single.ok()) << single.status();
  EXPECT_EQ(single->steps_per_second, one_run(exact, 5).steps_per_second) << "exact prices: one run";

  const PredictRequest drawn = drawn_request(0.1);
  ASSERT_EQ(draws_per_prediction(drawn.profile), 3);
  const Prediction a = one_run(drawn, 5), b = one_run(drawn, 6), c = one_run(drawn, 7);
  ASSERT_NE(a.measured_seconds, b.measured_seconds) << "the seeds draw other times";
  auto pooled = predict(drawn);
  ASSERT_TRUE(pooled.ok()) << pooled.status();
  // As one run three times as long: the steps over the mean time.
  const double mean_s = (a.measured_seconds + b.measured_seconds + c.measured_seconds) / 3;
  EXPECT_DOUBLE_EQ(pooled->measured_seconds, mean_s);
  EXPECT_DOUBLE_EQ(pooled->steps_per_second, drawn.measured / mean_s);
  EXPECT_DOUBLE_EQ(pooled->worker_cpu_per_step_s,
                   (a.worker_cpu_per_step_s + b.worker_cpu_per_step_s + c.worker_cpu_per_step_s) / 3);
  ASSERT_EQ(pooled->ps_utilisation.size(), 2u);
  EXPECT_DOUBLE_EQ(pooled->ps_utilisation[1],
                   (a.ps_utilisation[1] + b.ps_utilisation[1] + c.ps_utilisation[1]) / 3);
  EXPECT_EQ(pooled->events, a.events + b.events + c.events) << "what the prediction cost";
  auto again = predict(drawn);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->steps_per_second, pooled->steps_per_second) << "the same seed, the same prediction";
}

TEST(PredictTest, MeasuresTheSecondPhase) {
  auto p = predict(dense_request(1));
  ASSERT_TRUE(p.ok()) << p.status();
  // Every step pulls and pushes the whole 1 MiB variable, with some framing.
  const double bytes = 1024.0 * 256 * 4;
  ASSERT_EQ(p->ps_bytes_per_step.size(), 1u);
  EXPECT_GT(p->ps_bytes_per_step[0], 2 * bytes);
  EXPECT_LT(p->ps_bytes_per_step[0], 2.05 * bytes);
  // 8 workers share ps 0's 1 Gb/s link each way: at most 1e9 / 8 / 1 MiB steps
  // per second, and the link is what limits it.
  EXPECT_LE(p->steps_per_second, 1e9 / 8 / bytes);
  EXPECT_GT(p->steps_per_second, 0.8 * 1e9 / 8 / bytes);
  EXPECT_GT(p->ps_utilisation[0], 0.9);
  EXPECT_GT(p->step_p99_s, p->step_p50_s * 0.999);
  EXPECT_GT(p->simulated_seconds, 64 / p->steps_per_second);
}

TEST(PredictTest, MorePsHelpABandwidthBoundModel) {
  auto one = predict(dense_request(1));
  auto four = predict(dense_request(4));
  ASSERT_TRUE(one.ok()) << one.status();
  ASSERT_TRUE(four.ok()) << four.status();
  EXPECT_GT(four->steps_per_second, 2.5 * one->steps_per_second);
  // Four shards on four ps: the bytes spread evenly.
  const double total = std::accumulate(four->ps_bytes_per_step.begin(), four->ps_bytes_per_step.end(), 0.0);
  for (double b : four->ps_bytes_per_step) EXPECT_NEAR(b / total, 0.25, 0.01);
}

// A model spec's steps_per_execution: each closure runs that many steps.
// The figures stay per step (the same pushes per step, so the same bytes),
// and a step gets cheaper when the chief's dispatch of each closure was a
// cost of its own.
TEST(PredictTest, StepsPerClosureAreCountedAsStepsAndSaveTheDispatch) {
  PredictRequest one = dense_request(2);
  one.profile.mutable_network()->set_host_bandwidth_gbps(100);
  one.profile.mutable_network()->set_host_latency_us(2000);  // a closure's dispatch round trip costs 4 ms
  PredictRequest ten = one;
  ten.model.set_steps_per_closure(10);
  auto a = predict(one), b = predict(ten);
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok()) << b.status();
  for (std::size_t i = 0; i < a->ps_bytes_per_step.size(); ++i)
    EXPECT_NEAR(b->ps_bytes_per_step[i] / a->ps_bytes_per_step[i], 1.0, 0.01);
  EXPECT_GT(b->steps_per_second, 1.1 * a->steps_per_second);
  EXPECT_GT(b->simulated_seconds * b->steps_per_second, 64 * 10 * 0.999) << "64 closures of 10 steps were measured";
}

// One program in both modes: the scenario a real measurement runs is the
// prediction's, less the simulator's costs; with `for_s` its measured phase
// lasts about that long at the warm-up's pace, in simulated time too.
TEST(ThroughputScenarioTest, TheRealRunsProgramIsThePredictionsWithoutTheCosts) {
  PredictRequest r = dense_request(2);
  r.measured = 0;
  const scenario::Scenario simulated = throughput_scenario(r, CostsOf::kProfile, 3);
  const scenario::Scenario real = throughput_scenario(r, CostsOf::kThisMachine, 3);
  ASSERT_EQ(simulated.program_size(), real.program_size());
  for (int i = 0; i < real.program_size(); ++i)
    EXPECT_EQ(simulated.program(i).SerializeAsString(), real.program(i).SerializeAsString()) << "action " << i;
  EXPECT_EQ(simulated.model().SerializeAsString(), real.model().SerializeAsString());
  EXPECT_EQ(real.program(2).schedule().for_s(), 3);
  EXPECT_FALSE(real.has_network() && real.network().has_host_bandwidth_gbps()) << "no simulated costs on real runs";
  EXPECT_TRUE(simulated.network().has_host_bandwidth_gbps());

  Simulation simulation(simulated);
  const SimResult result = simulation.run();
  auto p = read_throughput(result, r);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->warmup, 16);
  // The warm-up's pace (its closures over the time from its schedule to the
  // end of its join) times 3 s.
  const double warmup_s = to_seconds(result.actions[1].ended - result.actions[0].started);
  EXPECT_EQ(p->measured, static_cast<int>(std::round(16 / warmup_s * 3)));
  EXPECT_GE(p->measured, 8 * 8) << "at least 8 closures per worker";
}

TEST(PredictTest, RefusesWhatCannotRun) {
  PredictRequest r = dense_request(1);
  r.workers = 0;
  EXPECT_EQ(predict(r).status().code(), StatusCode::kInvalidArgument);
  r = dense_request(1);
  r.measured = -1;
  EXPECT_EQ(predict(r).status().code(), StatusCode::kInvalidArgument);
  r = dense_request(1);
  r.profile.mutable_network()->set_host_bandwidth_gbps(-1);
  auto bad = predict(r);
  ASSERT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("network.host_bandwidth_gbps"), std::string::npos) << bad.status();
}

TEST(PartitionerForTest, EveryKindGivesTheLargestVariableTheShardsAskedFor) {
  const auto m = model(kZipf);
  for (auto kind : {PartitionerKind::kFixed, PartitionerKind::kMinSize, PartitionerKind::kMaxSize}) {
    for (int shards : {1, 3, 7, 16}) {
      auto p = partitioner_for(m, kind, shards);
      ASSERT_TRUE(p.ok()) << p.status();
      scenario::SyntheticModel with = m;
      *with.mutable_partitioner() = *p;
      auto spec = parse_model(with.DebugString(), "m");
      ASSERT_TRUE(spec.ok()) << spec.errors.front().to_string();
      PartitionerPtr made;
      switch (p->kind_case()) {
        case scenario::Partitioner::kFixedShards: made = *FixedShardsPartitioner::create(p->fixed_shards()); break;
        case scenario::Partitioner::kMinSize:
          made = *MinSizePartitioner::create(p->min_size().min_shard_bytes(), p->min_size().max_shards());
          break;
        case scenario::Partitioner::kMaxSize:
          made = *MaxSizePartitioner::create(p->max_size().max_shard_bytes(), p->max_size().max_shards());
          break;
        case scenario::Partitioner::KIND_NOT_SET: FAIL();
      }
      EXPECT_EQ(made->partition({100000, 32}, 4)[0], shards) << partitioner_name(kind) << " " << shards;
      // Size-based kinds leave the small tower whole; fixed splits it too.
      EXPECT_EQ(made->partition({32, 32}, 4)[0], kind == PartitionerKind::kFixed ? std::min(shards, 32) : 1)
          << partitioner_name(kind) << " " << shards;
    }
  }
  EXPECT_EQ(partitioner_for(model("variable { name: \"w\" shape: [4, 4] }"), PartitionerKind::kFixed, 8).status().code(),
            StatusCode::kInvalidArgument);
  // 10 rows in shards of at most ceil(10 / 6) = 2 rows are 5 shards, not 6.
  auto uneven = partitioner_for(model("variable { name: \"w\" shape: [10, 4] }"), PartitionerKind::kMaxSize, 6);
  EXPECT_EQ(uneven.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(uneven.status().message().find("it gives 5"), std::string::npos) << uneven.status();
  EXPECT_TRUE(partitioner_for(model("variable { name: \"w\" shape: [10, 4] }"), PartitionerKind::kFixed, 6).ok());
}

TEST(ClosuresForTest, BoundedByTheBudgetBetweenFourAndTwentyPerWorker) {
  EXPECT_EQ(closures_for(4, 2, 0, 300000).measured, 200);       // small clusters: at least 200
  EXPECT_EQ(closures_for(100, 2, 0, 10000000).measured, 2000);  // plenty of budget: 20 per worker
  EXPECT_EQ(closures_for(1000, 8, 0, 400000).measured, 4896);   // 400000 / (10 + 6 x 8) - 2000
  EXPECT_EQ(closures_for(1000, 2, 500, 400000).measured, 7523);  // 400000 / (10 + 12 + 500 / 25) - 2000
  EXPECT_EQ(closures_for(1000, 64, 0, 400000).measured, 4000);  // never fewer than 4 per worker
  EXPECT_EQ(closures_for(1000, 8, 0, 400000).warmup, 2000);
}

SweepRequest zipf_sweep() {
  SweepRequest s;
  s.model = model(kZipf);
  s.workers = 16;
  s.ps = {1, 2, 4};
  s.partitioners = {PartitionerKind::kFixed, PartitionerKind::kMaxSize};
  s.shards = {1, 4, 16};
  s.profile = slow_network();
  s.profile.mutable_network()->set_host_bandwidth_gbps(0.2);
  return s;
}

TEST(SweepTest, RanksEveryCandidateAndNamesTheZipfHotspot) {
  int calls = 0;
  auto r = sweep(zipf_sweep(), [&](int done, int total) {
    ++calls;
    EXPECT_EQ(done, calls);
    EXPECT_EQ(total, 18);
  });
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(calls, 18);
  ASSERT_EQ(r->rows.size(), 18u);  // 3 ps x 2 kinds x 3 shard counts
  for (std::size_t i = 0; i < r->rows.size(); ++i) {
    EXPECT_EQ(r->rows[i].rank, static_cast<int>(i) + 1);
    if (i > 0) {
      EXPECT_LE(r->rows[i].prediction.steps_per_second, r->rows[i - 1].prediction.steps_per_second);
    }
    EXPECT_GT(r->rows[i].max_ps_bytes_share, 0);
    EXPECT_LE(r->rows[i].max_ps_bytes_share, 1);
  }
  ASSERT_GE(r->recommended, 0);
  EXPECT_TRUE(r->rows[static_cast<std::size_t>(r->recommended)].recommended);
  // Zipf lookups land on the embedding's first shard, on ps 0.
  EXPECT_NE(r->reason.find("ps 0 is a hotspot"), std::string::npos) << r->reason;
  std::printf("reason: %s\n", r->reason.c_str());
  // One shard of each variable on 4 ps: the embedding on ps 0, the tower on
  // ps 1, `iterations` on ps 2 and nothing a step uses on ps 3.
  for (const auto& row : r->rows) {
    if (row.ps != 4 || row.shards != 1) continue;
    const auto& bytes = row.prediction.ps_bytes_per_step;
    EXPECT_DOUBLE_EQ(row.max_ps_bytes_share,
                     bytes[0] / std::accumulate(bytes.begin(), bytes.end(), 0.0));
    EXPECT_EQ(bytes[3], 0);
  }
}

TEST(SweepTest, PrefersFewerPsWithinTheTolerance) {
  SweepRequest s = zipf_sweep();
  s.tolerance = 0.99;  // anything goes: the cheapest is chosen
  auto r = sweep(s);
  ASSERT_TRUE(r.ok()) << r.status();
  const SweepRow& chosen = r->rows[static_cast<std::size_t>(r->recommended)];
  EXPECT_EQ(chosen.ps, 1);
  for (int i = 0; i < r->recommended; ++i) EXPECT_NE(r->rows[static_cast<std::size_t>(i)].ps, 1);  // its fastest
  if (r->recommended != 0) {
    EXPECT_NE(r->reason.find("of the fastest"), std::string::npos) << r->reason;
  }

  s.tolerance = 0;  // only the fastest
  r = sweep(s);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->recommended, 0);
  EXPECT_EQ(r->reason.rfind("the fastest", 0), 0u) << r->reason;
}

TEST(SweepTest, SameSeedSameRanking) {
  auto a = sweep(zipf_sweep()), b = sweep(zipf_sweep());
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_EQ(a->rows.size(), b->rows.size());
  for (std::size_t i = 0; i < a->rows.size(); ++i) {
    EXPECT_EQ(a->rows[i].ps, b->rows[i].ps);
    EXPECT_EQ(a->rows[i].shards, b->rows[i].shards);
    EXPECT_EQ(a->rows[i].prediction.steps_per_second, b->rows[i].prediction.steps_per_second);
  }
  EXPECT_EQ(a->reason, b->reason);
}

TEST(SweepTest, ImpossibleCandidatesAreSkippedAndBadRequestsRefused) {
  SweepRequest s = zipf_sweep();
  s.model = model("variable { name: \"w\" shape: [4, 64] }");
  s.ps = {1};
  s.shards = {2, 8};
  auto r = sweep(s);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->rows.size(), 2u);  // fixed and max_size, 2 shards
  EXPECT_EQ(r->skipped.size(), 2u);
  s.shards = {8};
  EXPECT_EQ(sweep(s).status().code(), StatusCode::kInvalidArgument);
  s = zipf_sweep();
  s.ps = {0};
  EXPECT_EQ(sweep(s).status().code(), StatusCode::kInvalidArgument);
  s = zipf_sweep();
  s.partitioners.clear();
  EXPECT_EQ(sweep(s).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace twinps::sim
