// Scenario files: syntax and semantic errors name the file, the line:column
// and the field; nothing malformed crashes or is silently accepted.
#include "sim/scenario_loader.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace twinps::sim {
namespace {

constexpr char kValid[] = R"(
cluster { workers: 3 ps: 2 }
model { variable { name: "emb" shape: [100, 8] rows_per_step: 4 } }
program { schedule { count: 2 } label: "s" }
program { join {} label: "j" }
)";

std::string first_error(const std::string& text) {
  auto r = parse_scenario(text, "f.textproto");
  return r.errors.empty() ? "" : r.errors.front().to_string();
}

TEST(ScenarioLoaderTest, AcceptsAValidScenario) {
  auto r = parse_scenario(kValid, "f.textproto");
  EXPECT_TRUE(r.ok()) << r.errors.front().to_string();
  EXPECT_EQ(r.scenario.cluster().workers(), 3);
}

TEST(ScenarioLoaderTest, UnknownFieldIsASyntaxErrorWithItsPosition) {
  EXPECT_EQ(first_error("name: \"x\"\ncluster { wrokers: 3 }\n"),
            "f.textproto:2:18: Message type \"twinps.scenario.Cluster\" has no field named \"wrokers\".");
}

TEST(ScenarioLoaderTest, WorkerIndexOutOfRangeNamesFieldAndPosition) {
  const std::string e = first_error(std::string(kValid) + "fault { at_s: 1\n  kill_worker: 7 }\n");
  EXPECT_EQ(e, "f.textproto:7:3: fault[0].kill_worker: worker index 7 is out of range: the cluster has 3 workers (0 .. 2)");
}

TEST(ScenarioLoaderTest, NegativeTime) {
  const std::string e = first_error(std::string(kValid) + "fault { at_s: -2 kill_ps: 1 }\n");
  EXPECT_EQ(e, "f.textproto:6:9: fault[0].at_s: at_s must not be negative (got -2)");
}

TEST(ScenarioLoaderTest, MessageFaultProbabilitiesAndTimesAreChecked) {
  EXPECT_EQ(first_error(std::string(kValid) + "message_faults { duplicate: 1.5 }\n"),
            "f.textproto:6:18: message_faults.duplicate: duplicate must be a probability, from 0 to 1 (got 1.5)");
  EXPECT_EQ(first_error(std::string(kValid) + "message_faults { loss_detection_s: 0 }\n"),
            "f.textproto:6:18: message_faults.loss_detection_s: loss_detection_s must be positive (got 0)");
}

TEST(ScenarioLoaderTest, HostsNeedAPositiveTick) {
  EXPECT_EQ(first_error(std::string(kValid) + "hosts { cores: 2 scheduler: TICKED tick_us: 0 }\n"),
            "f.textproto:6:36: hosts.tick_us: must be positive (the kernel's tick, 1 / CONFIG_HZ)");
  EXPECT_EQ(first_error(std::string(kValid) + "hosts { cores: 2 scheduler: TICKED tick_us: 250 }\n"), "");
}

TEST(ScenarioLoaderTest, HostsDurationSpreadIsASigmaFromZeroToOne) {
  EXPECT_EQ(first_error(std::string(kValid) + "hosts { cores: 2 duration_spread: -0.1 }\n"),
            "f.textproto:6:18: hosts.duration_spread: must be within [0, 1] (a log-normal sigma; 0: every job takes "
            "exactly its price)");
  EXPECT_NE(first_error(std::string(kValid) + "hosts { cores: 2 duration_spread: 1.5 }\n"), "");
  EXPECT_EQ(first_error(std::string(kValid) + "hosts { cores: 2 duration_spread: 0.05 }\n"), "");
}

TEST(ScenarioLoaderTest, RowPricesMustNotBeNegative) {
  EXPECT_EQ(first_error(std::string(kValid) + "ps_service { per_row_kib_us: -1 }\n"),
            "f.textproto:6:14: ps_service.per_row_kib_us: per_row_kib_us must not be negative (got -1)");
  EXPECT_EQ(first_error(std::string(kValid) + "ps_service { apply { optimizer: ADAGRAD per_row_pushed_kib_us: -0.5 } }\n"),
            "f.textproto:6:41: ps_service.apply[0].per_row_pushed_kib_us: per_row_pushed_kib_us must not be negative "
            "(got -0.5)");
  EXPECT_EQ(first_error(std::string(kValid) + "ps_service { per_row_kib_us: 0.2 apply { per_row_pushed_kib_us: 0.3 } }\n"), "");
}

TEST(ScenarioLoaderTest, ItemByIdPricesMustNotBeNegative) {
  EXPECT_EQ(first_error(std::string(kValid) + "ps_service { per_item_by_id_us: -1 }\n"),
            "f.textproto:6:14: ps_service.per_item_by_id_us: per_item_by_id_us must not be negative (got -1)");
  EXPECT_EQ(first_error(std::string(kValid) + "ps_service { apply { optimizer: SGD per_item_pushed_by_id_us: -0.5 } }\n"),
            "f.textproto:6:37: ps_service.apply[0].per_item_pushed_by_id_us: per_item_pushed_by_id_us must not be "
            "negative (got -0.5)");
  EXPECT_EQ(first_error(std::string(kValid) + "messages { data_receive { per_item_by_id_us: -2 } }\n"),
            "f.textproto:6:27: messages.data_receive.per_item_by_id_us: per_item_by_id_us must not be negative (got -2)");
  EXPECT_EQ(first_error(std::string(kValid) + "ps_service { per_item_by_id_us: 0.2 apply { per_item_pushed_by_id_us: 0.1 } }\n"
                                              "messages { data_send { per_item_by_id_us: 0.3 } }\n"),
            "");
}

// An optimizer's apply curve is checked as the other curves are: sizes
// increasing, costs not negative, each error naming its point.
TEST(ScenarioLoaderTest, ApplyCurvesNeedIncreasingSizesAndNonNegativeCosts) {
  const std::string apply = "ps_service { apply { optimizer: RMSPROP ";
  EXPECT_EQ(first_error(std::string(kValid) + apply + "bytes_curve { bytes: 65536 us: 12 } bytes_curve { bytes: 4096 us: 30 } } }\n"),
            "f.textproto:6:91: ps_service.apply[0].bytes_curve[1].bytes: must be positive and above the previous point's "
            "(got 4096)");
  EXPECT_EQ(first_error(std::string(kValid) + apply + "bytes_curve { bytes: 65536 us: -3 } } }\n"),
            "f.textproto:6:68: ps_service.apply[0].bytes_curve[0].us: us must not be negative (got -3)");
  EXPECT_EQ(first_error(std::string(kValid) + apply + "bytes_curve { bytes: 65536 us: 12 } bytes_curve { bytes: 1048576 us: 300 } } }\n"),
            "");
}

// So are a stream's overlaps, named by their own fields.
TEST(ScenarioLoaderTest, OverlapCurvesAreCheckedAsTheOtherCurves) {
  EXPECT_EQ(first_error(std::string(kValid) +
                        "messages { data_reply_overlap { bytes: 65536 us: 12 } data_reply_overlap { bytes: 100 us: 30 } }\n"),
            "f.textproto:6:76: messages.data_reply_overlap[1].bytes: must be positive and above the previous point's "
            "(got 100)");
  EXPECT_EQ(first_error(std::string(kValid) + "messages { data_request_overlap { bytes: 4096 us: -1 } }\n"),
            "f.textproto:6:47: messages.data_request_overlap[0].us: us must not be negative (got -1)");
  EXPECT_EQ(first_error(std::string(kValid) + "messages { data_request_overlap { bytes: 4096 us: 1 } "
                                              "data_reply_overlap { bytes: 4096 us: 2 } }\n"),
            "");
}

// The control plane's curve over intervals: intervals increasing from 0,
// costs not negative, each error naming its point; the busy host's prices
// not negative either.
TEST(ScenarioLoaderTest, ControlIntervalCurveNeedsIncreasingIntervals) {
  const std::string head = std::string(kValid) + "messages { control_by_interval { interval_us: 500 us: 90 } ";
  EXPECT_EQ(first_error(head + "control_by_interval { interval_us: 400 us: 120 } }\n"),
            "f.textproto:6:82: messages.control_by_interval[1].interval_us: must be >= 0, finite and above the "
            "previous point's (got 400)");
  EXPECT_EQ(first_error(head + "control_by_interval { interval_us: 4000 us: -1 } }\n"),
            "f.textproto:6:100: messages.control_by_interval[1].us: us must not be negative (got -1)");
  EXPECT_EQ(first_error(std::string(kValid) + "messages { control_by_interval { interval_us: -1 us: 1 } }\n"),
            "f.textproto:6:34: messages.control_by_interval[0].interval_us: must be >= 0, finite and above the "
            "previous point's (got -1)");
  EXPECT_EQ(first_error(head + "control_by_interval { interval_us: 4000 us: 200 } }\n"), "");
  EXPECT_EQ(first_error(head + "control_on_busy_host_us: -3 }\n"),
            "f.textproto:6:60: messages.control_on_busy_host_us: control_on_busy_host_us must not be negative (got -3)");
  EXPECT_EQ(first_error(std::string(kValid) + "messages { data_send { per_message_on_busy_host_us: -2 } }\n"),
            "f.textproto:6:24: messages.data_send.per_message_on_busy_host_us: per_message_on_busy_host_us must not be "
            "negative (got -2)");
  EXPECT_EQ(first_error(std::string(kValid) + "ps_service { per_request_on_busy_host_us: -1 }\n"),
            "f.textproto:6:14: ps_service.per_request_on_busy_host_us: per_request_on_busy_host_us must not be negative "
            "(got -1)");
  EXPECT_EQ(first_error(std::string(kValid) + "ps_service { per_request_when_awake_us: -4 }\n"),
            "f.textproto:6:14: ps_service.per_request_when_awake_us: per_request_when_awake_us must not be negative "
            "(got -4)");
  const std::string by_idle = std::string(kValid) + "ps_service { per_request_by_idle { interval_us: 100 us: 20 } ";
  EXPECT_EQ(first_error(by_idle + "per_request_by_idle { interval_us: 50 us: 30 } }\n"),
            "f.textproto:6:84: ps_service.per_request_by_idle[1].interval_us: must be >= 0, finite and above the "
            "previous point's (got 50)");
  EXPECT_EQ(first_error(by_idle + "per_request_by_idle { interval_us: 1000 us: -2 } }\n"),
            "f.textproto:6:102: ps_service.per_request_by_idle[1].us: us must not be negative (got -2)");
  EXPECT_EQ(first_error(by_idle + "per_request_by_idle { interval_us: 1000 us: 80 } }\n"), "");
  EXPECT_EQ(first_error(head + "control_on_busy_host_us: 40 }\n"), "");
}

// The crowding curve over tasks per core: increasing from above 0, costs not
// negative, each error naming its point.
TEST(ScenarioLoaderTest, CrowdingCurveNeedsIncreasingTasksPerCore) {
  const std::string head = std::string(kValid) + "hosts { crowded_message { tasks_per_core: 2 us: 10 } ";
  EXPECT_EQ(first_error(head + "crowded_message { tasks_per_core: 1.5 us: 20 } }\n"),
            "f.textproto:6:72: hosts.crowded_message[1].tasks_per_core: must be positive, finite and above the "
            "previous point's (got 1.5)");
  EXPECT_EQ(first_error(head + "crowded_message { tasks_per_core: 3 us: -1 } }\n"),
            "f.textproto:6:90: hosts.crowded_message[1].us: us must not be negative (got -1)");
  EXPECT_EQ(first_error(std::string(kValid) + "hosts { crowded_message { tasks_per_core: 0 us: 1 } }\n"),
            "f.textproto:6:27: hosts.crowded_message[0].tasks_per_core: must be positive, finite and above the "
            "previous point's (got 0)");
  EXPECT_EQ(first_error(head + "crowded_message { tasks_per_core: 3 us: 20 } }\n"), "");
}

TEST(ScenarioLoaderTest, ForSecondsNeedsAPaceBeforeItAndNoCount) {
  const std::string head = "cluster { workers: 1 ps: 1 } model { variable { name: \"w\" shape: [1] } }\n";
  EXPECT_EQ(first_error(head + "program { schedule { for_s: 2 } }\n"),
            "f.textproto:2:22: program[0].schedule.for_s: needs a schedule action and a join before it, to measure "
            "the pace");
  EXPECT_EQ(first_error(head + "program { schedule { count: 2 } }\nprogram { schedule { for_s: 2 } }\n"),
            "f.textproto:3:22: program[1].schedule.for_s: needs a schedule action and a join before it, to measure "
            "the pace");
  EXPECT_EQ(first_error(head + "program { schedule { count: 2 } }\nprogram { join {} }\n" +
                        "program { schedule { count: 3 for_s: 2 } }\n"),
            "f.textproto:4:31: program[2].schedule.for_s: give either count or for_s, not both");
  EXPECT_EQ(first_error(head + "program { schedule { count: 2 } }\nprogram { join {} }\n" +
                        "program { schedule { for_s: -1 } }\n"),
            "f.textproto:4:22: program[2].schedule.for_s: for_s must not be negative (got -1)");
  EXPECT_EQ(first_error(head + "program { schedule { count: 2 } }\nprogram { join {} }\n" +
                        "program { schedule { for_s: 2 } }\n"),
            "");
}

TEST(ScenarioLoaderTest, UnknownVariable) {
  const std::string e = first_error(std::string(kValid) + "fault { at_s: 1 hotspot { variable: \"lr\" } }\n");
  EXPECT_EQ(e, "f.textproto:6:27: fault[0].hotspot.variable: unknown variable \"lr\" (the model declares emb)");
}

TEST(ScenarioLoaderTest, UnknownLabelAndTaskName) {
  auto r = parse_scenario(std::string(kValid) +
                              "expect { outcome { label: \"nope\" code: OK } }\n"
                              "fault { at_s: 1 partition { a: \"worker:9\" a: \"gpu:0\" } }\n",
                          "f.textproto");
  ASSERT_EQ(r.errors.size(), 3u);
  EXPECT_EQ(r.errors[0].to_string(),
            "f.textproto:7:29: fault[0].partition.a[0]: \"worker:9\": the cluster has 3 workers (worker:0 .. worker:2)");
  EXPECT_EQ(r.errors[1].field, "fault[0].partition.a[1]");
  EXPECT_EQ(r.errors[2].to_string(), "f.textproto:6:20: expect[0].outcome.label: no action is labelled \"nope\"");
}

TEST(ScenarioLoaderTest, MissingPartsAreNamed) {
  auto r = parse_scenario("", "f.textproto");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.errors.front().to_string(),
            "f.textproto: cluster: missing: say how many tasks, e.g. cluster { workers: 3 ps: 2 }");
  EXPECT_EQ(first_error("cluster { workers: 2 ps: 1 }"),
            "f.textproto: model: missing: give a workload, `tutorial {}`, `model { variable { ... } }` or "
            "`model_spec: \"FILE\"`");
}

TEST(ScenarioLoaderTest, ChecksBoundsOfExpectations) {
  const std::string e = first_error(std::string(kValid) + "expect { stat { counter: RETRIED } }\n");
  EXPECT_EQ(e, "f.textproto:6:10: expect[0].stat: needs a bound: equals, at_least or at_most");
  EXPECT_NE(first_error(std::string(kValid) + "expect { remote_value { label: \"s\" index: 2 code: OK } }\n")
                .find("index 2 is out of range"),
            std::string::npos);
  EXPECT_NE(first_error(std::string(kValid) + "expect { accuracy { at_least: 0.5 } }\n").find("tutorial"),
            std::string::npos);
}

TEST(ScenarioLoaderTest, FilesThatAreNotScenarios) {
  const auto dir = std::filesystem::path(::testing::TempDir()) / ("loader_test_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  EXPECT_EQ(load_scenario_file((dir / "missing.textproto").string()).errors.front().to_string(),
            (dir / "missing.textproto").string() + ": cannot read the scenario: No such file or directory");
  EXPECT_EQ(load_scenario_file(dir.string()).errors.front().to_string(),
            dir.string() + ": is a directory, not a scenario file");
  {
    std::ofstream f(dir / "garbage.bin", std::ios::binary);
    const char bytes[] = "cluster { wo\x01\x02\x00\xff\xfe";
    f.write(bytes, sizeof bytes - 1);
  }
  EXPECT_EQ(load_scenario_file((dir / "garbage.bin").string()).errors.front().to_string(),
            (dir / "garbage.bin").string() + ":1:15: binary data (a NUL byte): not a text-format scenario");
  {
    std::ofstream f(dir / "utf.bin", std::ios::binary);
    f << "\xff\xfe\x01\x02garbage";
  }
  auto r = load_scenario_file((dir / "utf.bin").string());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.errors.front().line, 1);
  for (const auto& e : r.errors)
    for (unsigned char c : e.message) EXPECT_TRUE(c >= 0x20 && c < 0x7f) << "raw bytes in: " << e.message;
  EXPECT_EQ(load_scenario_file("/dev/null").errors.front().message, "is not a regular file");
  std::filesystem::remove_all(dir);
}

// Exactly-once visitation's fields: the examples to cut into splits, NUMERIC
// only; the visits expectation needs them and a label.
TEST(ScenarioLoaderTest, VisitationFieldsAreChecked) {
  constexpr char kModel[] = "cluster { workers: 2 ps: 1 }\nmodel { variable { name: \"w\" shape: [2, 2] } ";
  constexpr char kProgram[] = "}\nprogram { schedule { count: 2 } label: \"s\" }\n";
  EXPECT_NE(first_error(std::string(kModel) + "visitation: EXACTLY_ONCE " + kProgram)
                .find("model.visitation: EXACTLY_ONCE needs examples_per_epoch"),
            std::string::npos);
  EXPECT_NE(first_error(std::string(kModel) + "examples_per_epoch: -1 " + kProgram)
                .find("model.examples_per_epoch: must not be negative"),
            std::string::npos);
  EXPECT_NE(first_error("fidelity: TIMING_ONLY\n" + std::string(kModel) + "examples_per_epoch: 8 " + kProgram)
                .find("model.examples_per_epoch: example ids need NUMERIC fidelity"),
            std::string::npos);
  EXPECT_NE(first_error(std::string(kModel) + kProgram + "expect { visits_per_example { after: \"s\" equals: 1 } }\n")
                .find("expect[0].visits_per_example: visits are counted for a synthetic `model` with examples_per_epoch"),
            std::string::npos);
  EXPECT_NE(first_error(std::string(kModel) + "examples_per_epoch: 8 " + kProgram +
                        "expect { visits_per_example { after: \"x\" equals: 1 } }\n")
                .find("expect[0].visits_per_example.after: no action is labelled \"x\""),
            std::string::npos);
  EXPECT_EQ(first_error(std::string(kModel) + "examples_per_epoch: 8 visitation: EXACTLY_ONCE " + kProgram +
                        "expect { visits_per_example { after: \"s\" equals: 1 } }\n"),
            "");
}

// Exactly once holds only where nothing takes applied steps back or drops a
// completed closure's gradients: refused with a restore/rollback ps policy
// or sync's backup workers, for the synthetic model and the tutorial alike.
TEST(ScenarioLoaderTest, ExactlyOnceIsRefusedWithRecoveriesAndBackupWorkers) {
  constexpr char kModel[] =
      "cluster { workers: 3 ps: 1 }\nmodel { variable { name: \"w\" shape: [2, 2] } examples_per_epoch: 8 "
      "visitation: EXACTLY_ONCE }\nprogram { schedule { count: 2 } }\n";
  constexpr char kTutorial[] = "cluster { workers: 3 ps: 1 }\ntutorial { visitation: EXACTLY_ONCE }\nprogram { train {} }\n";
  for (const std::string workload : {kModel, kTutorial}) {
    const std::string field = workload == kModel ? "model.visitation" : "tutorial.visitation";
    EXPECT_THAT(first_error(workload + "coordinator { ps_failure: RESTORE }\n"),
                ::testing::HasSubstr(field + ": EXACTLY_ONCE needs coordinator.ps_failure RAISE"));
    EXPECT_THAT(first_error(workload + "coordinator { mode: SYNC backup_workers: 1 }\n"),
                ::testing::HasSubstr(field + ": EXACTLY_ONCE cannot have coordinator.backup_workers"));
    EXPECT_EQ(first_error(workload + "coordinator { mode: SYNC }\n"), "");
  }
}

TEST(ScenarioLoaderTest, TimingOnlyNeedsASyntheticModel) {
  EXPECT_NE(first_error("fidelity: TIMING_ONLY cluster { workers: 1 ps: 1 } tutorial {}").find("TIMING_ONLY"),
            std::string::npos);
}

}  // namespace
}  // namespace twinps::sim
