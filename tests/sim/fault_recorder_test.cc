// The recorder of `--record-faults` (sim/fault_recorder.h) on its own: the
// coordinator's events in, a scenario out. Each kind of observation must
// become the fault that makes a simulated coordinator observe the same
// (died -> kill_worker, hung -> pause, unreachable -> partition, a ps that
// failed a call -> kill_ps, one that missed its checks -> pause), timed from
// the cluster's start; the outcome must become expectations with the bounds
// the header promises. The end-to-end record and replay of a real run is
// tests/tools/record_replay_test.cc.
#include "sim/fault_recorder.h"

#include <gtest/gtest.h>

#include <google/protobuf/text_format.h>

#include "sim/scenario_program.h"

namespace twinps::sim {
namespace {

using Kind = CoordinatorEvent::Kind;

Time at(double s) { return from_seconds(s); }

// Events as the coordinator reports them, started at 10 s on its clock (a
// real run's clock is not 0 when the cluster has formed).
class Events {
 public:
  explicit Events(FaultRecorder& r) : observe_(r.observer()) { started(10); }

  void started(double t) { observe_(event(Kind::kStarted, TaskId::chief(), t)); }
  // A worker given up: by a failed call (`heartbeats` false) or by health
  // checks that ended with `cause`; it last answered at `last_heard`.
  void worker_failed(int w, double t, bool heartbeats, Status cause, double last_heard, Incarnation inc = 1) {
    CoordinatorEvent e = event(Kind::kWorkerFailed, TaskId::worker(w), t);
    e.heartbeats_missed = heartbeats;
    e.cause = std::move(cause);
    e.last_heard = at(last_heard);
    e.incarnation = inc;
    observe_(e);
  }
  void worker_recovered(int w, double t, Incarnation previous, Incarnation now) {
    CoordinatorEvent e = event(Kind::kWorkerRecovered, TaskId::worker(w), t);
    e.previous_incarnation = previous;
    e.incarnation = now;
    observe_(e);
  }
  void ps_failed(int p, double t, bool heartbeats) {
    CoordinatorEvent e = event(Kind::kPsFailed, TaskId::ps(p), t);
    e.heartbeats_missed = heartbeats;
    e.cause = absl::UnavailableError("ps:" + std::to_string(p) + " gone");
    observe_(e);
  }
  void closure_finished(std::uint64_t id, double dispatched, double finished, int w = 0) {
    CoordinatorEvent e = event(Kind::kClosureFinished, TaskId::worker(w), finished);
    e.closure = id;
    e.dispatched_at = at(dispatched);
    observe_(e);
  }

 private:
  static CoordinatorEvent event(Kind kind, TaskId task, double t) {
    CoordinatorEvent e;
    e.kind = kind;
    e.task = task;
    e.at = at(t);
    return e;
  }
  std::function<void(const CoordinatorEvent&)> observe_;
};

scenario::Scenario base() {
  scenario::Scenario s;
  s.set_name("base");
  s.mutable_cluster()->set_workers(3);
  s.mutable_cluster()->set_ps(2);
  s.mutable_compute()->mutable_step_time()->set_constant_s(0.5);
  auto* f = s.add_fault();  // the run's own faults are replaced by what was observed
  f->set_at_s(1);
  f->set_kill_worker(2);
  s.add_expect()->set_all_closures_resolved(true);
  return s;
}

const scenario::StatCheck* stat(const scenario::Scenario& s, scenario::StatCheck::Counter c) {
  for (const auto& e : s.expect())
    if (e.has_stat() && e.stat().counter() == c) return &e.stat();
  return nullptr;
}

const scenario::IterationsCheck* iterations(const scenario::Scenario& s) {
  for (const auto& e : s.expect())
    if (e.has_iterations()) return &e.iterations();
  return nullptr;
}

TEST(FaultRecorderTest, AWorkerBackAsANewIncarnationDiedAndIsKilledFromWhenItWasGivenUp) {
  FaultRecorder r;
  Events ev(r);
  ev.worker_failed(0, 12.5, /*heartbeats=*/false, absl::UnavailableError("connection refused"), 12.4, 1);
  ev.worker_recovered(0, 15.0, 1, 2);
  const scenario::Scenario s = r.scenario(base(), {});
  ASSERT_EQ(s.fault_size(), 1);
  EXPECT_TRUE(s.fault(0).has_kill_worker());
  EXPECT_EQ(s.fault(0).kill_worker(), 0);
  EXPECT_NEAR(s.fault(0).at_s(), 2.5, 1e-9) << "from the cluster's start, when it was given up";
  EXPECT_NEAR(s.fault(0).duration_s(), 2.5, 1e-9) << "until it came back";
  ASSERT_EQ(r.observations().size(), 1u);
  EXPECT_NE(r.observations()[0].find("died and restarted"), std::string::npos) << r.observations()[0];
}

TEST(FaultRecorderTest, AWorkerThatMissedItsChecksAndCameBackAsItselfWasHungFromWhenItLastAnswered) {
  FaultRecorder r;
  Events ev(r);
  ev.worker_failed(1, 16.0, /*heartbeats=*/true, absl::DeadlineExceededError("health check"), 13.0, 1);
  ev.worker_recovered(1, 20.5, 1, 1);
  const scenario::Scenario s = r.scenario(base(), {});
  ASSERT_EQ(s.fault_size(), 1);
  ASSERT_TRUE(s.fault(0).has_pause());
  EXPECT_EQ(s.fault(0).pause(), "worker:1");
  EXPECT_NEAR(s.fault(0).at_s(), 3.0, 1e-9);
  EXPECT_NEAR(s.fault(0).duration_s(), 7.5, 1e-9);
  EXPECT_NE(r.observations()[0].find("hung meanwhile"), std::string::npos) << r.observations()[0];
}

TEST(FaultRecorderTest, RefusedChecksOfAWorkerThatCameBackAsItselfMeanItWasUnreachable) {
  FaultRecorder r;
  Events ev(r);
  ev.worker_failed(2, 14.0, /*heartbeats=*/true, absl::UnavailableError("cut"), 12.0, 3);
  ev.worker_recovered(2, 18.0, 3, 3);
  const scenario::Scenario s = r.scenario(base(), {});
  ASSERT_EQ(s.fault_size(), 1);
  ASSERT_TRUE(s.fault(0).has_partition());
  ASSERT_EQ(s.fault(0).partition().a_size(), 1);
  EXPECT_EQ(s.fault(0).partition().a(0), "worker:2");
  EXPECT_NEAR(s.fault(0).at_s(), 2.0, 1e-9);
  EXPECT_NEAR(s.fault(0).duration_s(), 6.0, 1e-9);
}

TEST(FaultRecorderTest, WorkersNeverBackHaveFaultsWithoutAnEnd) {
  FaultRecorder r;
  Events ev(r);
  ev.worker_failed(0, 11.0, /*heartbeats=*/false, absl::UnavailableError("refused"), 11.0);
  ev.worker_failed(1, 13.0, /*heartbeats=*/true, absl::DeadlineExceededError("check"), 12.0);
  const scenario::Scenario s = r.scenario(base(), {});
  ASSERT_EQ(s.fault_size(), 2);
  EXPECT_EQ(s.fault(0).kill_worker(), 0);
  EXPECT_FALSE(s.fault(0).has_duration_s());
  EXPECT_EQ(s.fault(1).pause(), "worker:1");
  EXPECT_FALSE(s.fault(1).has_duration_s());
  EXPECT_NE(r.observations()[0].find("never back: died"), std::string::npos);
  EXPECT_NE(r.observations()[1].find("hung for the rest of the run"), std::string::npos);
}

TEST(FaultRecorderTest, AParameterServerIsRecordedOnceKilledOrHungByHowItWasFound) {
  FaultRecorder r;
  Events ev(r);
  ev.ps_failed(1, 12.0, /*heartbeats=*/false);
  ev.ps_failed(1, 12.1, /*heartbeats=*/false);  // another closure's view of the same failure
  ev.ps_failed(0, 13.0, /*heartbeats=*/true);
  const scenario::Scenario s = r.scenario(base(), {});
  ASSERT_EQ(s.fault_size(), 2);
  EXPECT_EQ(s.fault(0).kill_ps(), 1);
  EXPECT_NEAR(s.fault(0).at_s(), 2.0, 1e-9);
  EXPECT_EQ(s.fault(1).pause(), "ps:0");
  EXPECT_NEAR(s.fault(1).at_s(), 3.0, 1e-9);
}

TEST(FaultRecorderTest, FaultsAreInTimeOrderAndNoneBeforeTheStart) {
  FaultRecorder r;
  Events ev(r);
  // worker:1 hung from 11 s, found at 15 s; worker:0 died at 12 s. Sorted by
  // when each fault begins, not by when it was found.
  ev.worker_failed(0, 12.0, false, absl::UnavailableError("refused"), 12.0);
  ev.worker_failed(1, 15.0, true, absl::DeadlineExceededError("check"), 11.0);
  ev.worker_failed(2, 16.0, true, absl::DeadlineExceededError("check"), 9.0);  // last heard while forming
  const scenario::Scenario s = r.scenario(base(), {});
  ASSERT_EQ(s.fault_size(), 3);
  EXPECT_EQ(s.fault(0).pause(), "worker:2");
  EXPECT_EQ(s.fault(0).at_s(), 0.0);
  EXPECT_EQ(s.fault(1).pause(), "worker:1");
  EXPECT_EQ(s.fault(2).kill_worker(), 0);
}

TEST(FaultRecorderTest, TheStepTimeIsTheMedianClosureRunLeavingOutLongOnes) {
  FaultRecorder r;
  Events ev(r);
  ev.closure_finished(1, 10.0, 10.2);
  ev.closure_finished(2, 10.0, 10.3);
  ev.closure_finished(3, 10.0, 10.25);
  ev.closure_finished(4, 10.0, 19.0);  // a looping step: not one step's time
  r.exclude_from_step_time(4);
  const scenario::Scenario s = r.scenario(base(), {});
  EXPECT_NEAR(s.compute().step_time().constant_s(), 0.25, 1e-9);
  // Without any finished closure the run's own step time is kept.
  FaultRecorder none;
  Events ev2(none);
  EXPECT_EQ(none.scenario(base(), {}).compute().step_time().constant_s(), 0.5);
}

TEST(FaultRecorderTest, TheOutcomeBecomesExpectationsWithinTheRunsOwnBounds) {
  FaultRecorder r;
  Events ev(r);
  ev.worker_failed(0, 12.0, false, absl::UnavailableError("refused"), 12.0, 1);
  ev.worker_recovered(0, 14.0, 1, 2);
  ev.worker_failed(1, 15.0, true, absl::DeadlineExceededError("check"), 13.0, 1);
  ev.worker_recovered(1, 18.0, 1, 1);
  RecordedOutcome o;
  o.stats.worker_failures = 2;
  o.stats.worker_recoveries = 2;
  o.stats.retried = 3;
  o.stats.completed = 300;
  o.labelled = {{"steps", absl::OkStatus()}, {"join", absl::OkStatus()}};
  o.iterations_after = "join";
  o.iterations = 301;
  o.all_closures_resolved = true;
  o.steps_per_closure = 2;
  const scenario::Scenario s = r.scenario(base(), o);

  EXPECT_EQ(s.name(), "recorded: base");
  EXPECT_EQ(stat(s, scenario::StatCheck::WORKER_FAILURES)->equals(), 2);
  EXPECT_EQ(stat(s, scenario::StatCheck::WORKER_RECOVERIES)->equals(), 2);
  // Each of the 2 failures may put back one closure more or less, but a
  // worker is given up while it runs one (its heartbeats run only then):
  // at least one retry per failure.
  const auto* retried = stat(s, scenario::StatCheck::RETRIED);
  ASSERT_NE(retried, nullptr);
  EXPECT_EQ(retried->at_least(), 2);
  EXPECT_EQ(retried->at_most(), 5);
  EXPECT_EQ(stat(s, scenario::StatCheck::ERRORS_RAISED)->equals(), 0);
  EXPECT_EQ(stat(s, scenario::StatCheck::PS_FAILURES_RETRIED), nullptr) << "none retried: no check";
  // Iterations: less the retried closures' steps (they may have applied
  // twice in the run) up to more by the most retries the replay may have.
  const auto* it = iterations(s);
  ASSERT_NE(it, nullptr);
  EXPECT_EQ(it->after(), "join");
  EXPECT_EQ(it->at_least(), 301 - 2 * 3);
  EXPECT_EQ(it->at_most(), 301 + 2 * 5);
  int outcomes = 0, rebuilt = 0, resolved = 0, raised = 0;
  for (const auto& e : s.expect()) {
    if (e.has_outcome()) {
      ++outcomes;
      ASSERT_EQ(e.outcome().code_size(), 1);
      EXPECT_EQ(e.outcome().code(0), scenario::OK);
    }
    rebuilt += e.has_dataset_rebuilt();
    resolved += e.has_all_closures_resolved();
    raised += e.has_raised();
  }
  EXPECT_EQ(outcomes, 2);
  EXPECT_EQ(rebuilt, 2) << "both workers recovered";
  EXPECT_EQ(resolved, 1);
  EXPECT_EQ(raised, 0);
}

TEST(FaultRecorderTest, ARunThatRaisedExpectsItsErrorAndNoIterationCount) {
  FaultRecorder r;
  Events ev(r);
  ev.ps_failed(0, 12.0, true);
  RecordedOutcome o;
  o.stats.errors_raised = 1;
  o.labelled = {{"join", absl::UnavailableError("ps:0 did not answer")}};
  o.iterations = 40;
  const scenario::Scenario s = r.scenario(base(), o);
  EXPECT_EQ(stat(s, scenario::StatCheck::ERRORS_RAISED)->equals(), 1);
  EXPECT_EQ(iterations(s), nullptr) << "cancelled closures make the count the run's timing";
  int raised = 0;
  for (const auto& e : s.expect()) {
    if (e.has_outcome()) {
      EXPECT_EQ(e.outcome().code(0), scenario::UNAVAILABLE);
    }
    if (e.has_raised()) {
      ++raised;
      ASSERT_EQ(e.raised().code_size(), 1);
      EXPECT_EQ(e.raised().code(0), scenario::UNAVAILABLE);
    }
  }
  EXPECT_EQ(raised, 1);
}

TEST(FaultRecorderTest, LoopingStepsGetOnlyALowerBound) {
  FaultRecorder r;
  Events ev(r);
  RecordedOutcome o;
  o.stats.completed = 7;
  o.iterations = 5000;
  o.infinite_steps = true;
  const scenario::Scenario s = r.scenario(base(), o);  // named: `it` points into it
  const auto* it = iterations(s);
  ASSERT_NE(it, nullptr);
  EXPECT_EQ(it->at_least(), 7);
  EXPECT_FALSE(it->has_at_most());
}

TEST(FaultRecorderTest, TheTextIsAScenarioFileWithAHeaderOfWhatWasObserved) {
  FaultRecorder r;
  Events ev(r);
  ev.worker_failed(0, 12.0, false, absl::UnavailableError("refused"), 12.0, 1);
  ev.worker_recovered(0, 14.0, 1, 2);
  const scenario::Scenario s = r.scenario(base(), {});
  const std::string text = r.text(s, "a test");
  EXPECT_EQ(text.rfind("# Recorded by a test.\n", 0), 0u) << text;
  EXPECT_NE(text.find("#   worker:0 given up at 2.000 s"), std::string::npos) << text;
  scenario::Scenario parsed;
  ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &parsed)) << text;
  EXPECT_EQ(parsed.SerializeAsString(), s.SerializeAsString());
}

// The coordinator block a recording carries: every mode and ps failure
// policy comes back as it was, so a replay runs with the recorded run's rules.
scenario::Coordinator coordinator_block(scenario::TrainingMode mode, scenario::PsFailure policy) {
  scenario::Coordinator c;
  c.set_transient_ps_failures(2);
  c.set_transient_timeouts(4);
  c.set_heartbeat_interval_s(0.5);
  c.set_heartbeat_timeout_s(1);
  c.set_heartbeat_misses(2);
  c.set_closure_timeout_s(9);
  c.set_rpc_timeout_s(11);
  c.set_ps_call_timeout_s(7);
  c.set_queue_capacity(64);
  c.set_mode(mode);
  if (mode == scenario::SSP) c.set_staleness_bound(3);
  if (mode == scenario::SYNC) c.set_backup_workers(1);
  if (policy != scenario::RAISE) {
    c.set_ps_failure(policy);
    c.set_ps_recovery_wait_s(12);
  }
  return c;
}

TEST(FaultRecorderTest, TheCoordinatorsOptionsGoBackToTheScenarioTheyCameFrom) {
  for (auto mode : {scenario::ASYNC, scenario::SSP, scenario::SYNC}) {
    for (auto policy : {scenario::RAISE, scenario::RESTORE, scenario::ROLLBACK}) {
      SCOPED_TRACE(scenario::TrainingMode_Name(mode) + " " + scenario::PsFailure_Name(policy));
      const scenario::Coordinator c = coordinator_block(mode, policy);
      const scenario::Coordinator back = scenario_coordinator(coordinator_options(c), 7);
      EXPECT_EQ(back.SerializeAsString(), c.SerializeAsString()) << back.DebugString() << "\nvs\n" << c.DebugString();
    }
  }
}

}  // namespace
}  // namespace twinps::sim
