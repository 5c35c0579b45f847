// The real `twinps calibrate` and `twinps tune --validate`: calibration writes
// a CostProfile that parses with every measured value positive and finite,
// and takes the median of profiles;
// a quick validation prints predicted and measured columns, and a saved one
// is predicted again without running; bad input exits 2.
// Processes are bounded by timeouts; no assertion depends on how fast this
// machine is.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "sim/scenario_loader.h"
#include "tests/core/rings_data.h"
#include "tests/tools/process.h"
#include "tests/tools/read_file.h"

namespace twinps {
namespace {

using namespace std::chrono_literals;
using testing::Process;

using testing::twinps;

std::string write(const std::string& path, const std::string& content) {
  std::ofstream(path, std::ios::binary) << content;
  return path;
}

// Small enough that a real step takes milliseconds.
constexpr char kModel[] = R"(
batch_size: 16
variable { name: "emb" shape: [4096, 16] rows_per_step: 64 }
variable { name: "dense" shape: [64, 32] }
)";

bool positive_finite(double v) { return std::isfinite(v) && v > 0; }

TEST(CalibrateTest, WritesAProfileThatParsesWithPositiveFiniteValues) {
  const std::string dir = testing::temp_dir("calibrate");
  const std::string out = dir + "/profile.textproto";
  Process p = twinps({"calibrate", "--out", out, "--repeats", "2", "--batch-seconds", "0.03", "--max-mib", "1"});
  ASSERT_TRUE(p.wait(testing::hang_bound(240s))) << "calibrate did not finish";
  ASSERT_EQ(p.exit_code(), 0) << p.err();
  EXPECT_NE(p.out().find("wrote " + out), std::string::npos) << p.out();

  auto loaded = sim::load_profile_file(out);
  ASSERT_TRUE(loaded.ok()) << (loaded.errors.empty() ? "" : loaded.errors[0].to_string());
  const auto& profile = loaded.profile;
  EXPECT_FALSE(profile.measured_on().empty());
  EXPECT_EQ(profile.data_plane(), "tcp") << "the plane its prices hold for (the default)";
  EXPECT_TRUE(positive_finite(profile.network().loopback_latency_us()));
  EXPECT_TRUE(positive_finite(profile.hosts().cores()));
  // Linux's tick-by-tick sharing, with this kernel's tick (a jiffy: 1 to 10 ms for HZ 1000 to 100).
  EXPECT_EQ(profile.hosts().scheduler(), scenario::Hosts::TICKED);
  EXPECT_GE(profile.hosts().tick_us(), 1000);
  EXPECT_LE(profile.hosts().tick_us(), 10000);
  // The same kernel call never takes exactly the same CPU time twice, and
  // never varies by a factor of e within a sigma.
  EXPECT_GT(profile.hosts().duration_spread(), 0);
  EXPECT_LT(profile.hosts().duration_spread(), 1);
  EXPECT_TRUE(positive_finite(profile.ps_service().per_request_us()));
  EXPECT_TRUE(std::isfinite(profile.ps_service().per_row_us()) && profile.ps_service().per_row_us() >= 0);
  EXPECT_TRUE(std::isfinite(profile.ps_service().per_item_us()) && profile.ps_service().per_item_us() >= 0);
  // Items by id, measured on a table as 64 shards and as one: set on the ps, each optimizer's
  // push (not Adam's: no sparse push of it is measured) and both caller sides.
  EXPECT_TRUE(profile.ps_service().has_per_item_by_id_us());
  EXPECT_GE(profile.ps_service().per_item_by_id_us(), 0);
  for (const auto& a : profile.ps_service().apply())
    EXPECT_EQ(a.has_per_item_pushed_by_id_us(), a.optimizer() != scenario::Optimizer::ADAM) << a.DebugString();
  EXPECT_TRUE(profile.messages().data_send().has_per_item_by_id_us());
  EXPECT_TRUE(profile.messages().data_receive().has_per_item_by_id_us());
  EXPECT_NE(p.out().find("pull 256 rows of 64 shards (sgd)"), std::string::npos) << p.out();
  EXPECT_NE(p.out().find("an item by id beyond a dense item: ps "), std::string::npos) << p.out();
  // Sizes from 4 KiB up to --max-mib, each point no cheaper than the last.
  ASSERT_GE(profile.ps_service().bytes_curve_size(), 3);
  EXPECT_GE(profile.ps_service().bytes_curve(profile.ps_service().bytes_curve_size() - 1).bytes(), 1 << 20);
  for (int i = 1; i < profile.ps_service().bytes_curve_size(); ++i)
    EXPECT_GE(profile.ps_service().bytes_curve(i).us(), profile.ps_service().bytes_curve(i - 1).us());
  ASSERT_EQ(profile.ps_service().apply_size(), 4) << "one apply cost per optimizer";
  // Each optimizer's apply measured over sizes from 64 KiB to --max-mib, each point no cheaper than the last.
  for (const auto& a : profile.ps_service().apply()) {
    ASSERT_EQ(a.bytes_curve_size(), 3) << a.DebugString();
    EXPECT_GE(a.bytes_curve(0).bytes(), 64 << 10);
    EXPECT_GE(a.bytes_curve(2).bytes(), 1 << 20);
    for (int i = 1; i < a.bytes_curve_size(); ++i) EXPECT_GE(a.bytes_curve(i).us(), a.bytes_curve(i - 1).us());
  }
  EXPECT_TRUE(positive_finite(profile.messages().data_send().per_message_us()));
  EXPECT_TRUE(positive_finite(profile.messages().data_receive().per_message_us()));
  EXPECT_GE(profile.messages().data_receive().bytes_curve_size(), 3);
  // A stream's two ends at once: a point per size, not negative, none below the last.
  for (const auto* overlap : {&profile.messages().data_request_overlap(), &profile.messages().data_reply_overlap()}) {
    ASSERT_EQ(overlap->size(), profile.ps_service().bytes_curve_size());
    for (int i = 0; i < overlap->size(); ++i) {
      EXPECT_GE((*overlap)[i].us(), i == 0 ? 0.0 : (*overlap)[i - 1].us());
      EXPECT_GE((*overlap)[i].bytes(), 4096);
    }
  }
  // A worker's copies of a variable of several shards: a point per size, the
  // largest (1 MiB) dearer than the smallest (4 KiB).
  const auto& assembly = profile.messages().data_assembly();
  ASSERT_EQ(assembly.size(), profile.ps_service().bytes_curve_size());
  EXPECT_EQ(assembly[0].bytes(), 4096);
  EXPECT_EQ(assembly[assembly.size() - 1].bytes(), 1 << 20);
  for (const auto& point : assembly) EXPECT_TRUE(positive_finite(point.us())) << point.DebugString();
  EXPECT_GT(assembly[assembly.size() - 1].us(), assembly[0].us());
  // The control plane: half the coordinator's CPU a step against the step's
  // interval, at six paces; a longer interval never cheaper. Its price is
  // the curve's alone.
  const auto& control = profile.messages().control_by_interval();
  ASSERT_GE(control.size(), 2) << "two of six paces at one interval at most";
  for (int i = 0; i < control.size(); ++i) {
    EXPECT_TRUE(positive_finite(control[i].interval_us())) << control[i].DebugString();
    EXPECT_TRUE(positive_finite(control[i].us())) << control[i].DebugString();
    if (i > 0) {
      EXPECT_GT(control[i].interval_us(), control[i - 1].interval_us());
      EXPECT_GE(control[i].us(), control[i - 1].us());
    }
  }
  EXPECT_EQ(profile.messages().control_send().per_message_us(), 0);
  EXPECT_EQ(profile.messages().control_receive().per_message_us(), 0);
  // The fastest pace again beside a spinner on every core: a side's price on a busy host.
  EXPECT_TRUE(positive_finite(profile.messages().control_on_busy_host_us()));
  // The one-float call again with no core idle: the fixed prices on a busy host.
  EXPECT_TRUE(positive_finite(profile.ps_service().per_request_on_busy_host_us()));
  // The awake price is set only when two callers at once left enough
  // requests to find the ps awake; the report says which.
  EXPECT_NE(p.out().find("two callers at once"), std::string::npos) << p.out();
  if (profile.ps_service().has_per_request_when_awake_us()) {
    EXPECT_TRUE(positive_finite(profile.ps_service().per_request_when_awake_us()));
  }
  // One caller pausing 0.1 to 10 ms between calls: a request's price by how
  // long the ps idled, from the back-to-back call's (per_request_us) up; a
  // longer idle never cheaper; the report lists the paces.
  const auto& by_idle = profile.ps_service().per_request_by_idle();
  ASSERT_GE(by_idle.size(), 2) << profile.ps_service().DebugString();
  // The back-to-back call idles least: its price, or less where a longer
  // idle measured cheaper and the two were pooled.
  EXPECT_LE(by_idle[0].us(), profile.ps_service().per_request_us() + 1e-6);
  EXPECT_TRUE(positive_finite(by_idle[0].us()));
  EXPECT_GE(by_idle[by_idle.size() - 1].interval_us(), 5000) << "the 10 ms pause idles the ps for more than 5 ms";
  for (int i = 1; i < by_idle.size(); ++i) {
    EXPECT_GT(by_idle[i].interval_us(), by_idle[i - 1].interval_us());
    EXPECT_GE(by_idle[i].us(), by_idle[i - 1].us());
  }
  EXPECT_NE(p.out().find("a request's price by the ps's idle time before it"), std::string::npos) << p.out();
  // The whole curve is listed, its last point included (a long line once got cut).
  char last_point[64];
  std::snprintf(last_point, sizeof last_point, "(%.0f, %.2f)\n", by_idle[by_idle.size() - 1].interval_us(),
                by_idle[by_idle.size() - 1].us());
  EXPECT_NE(p.out().find(last_point), std::string::npos) << last_point << " missing from\n" << p.out();
  EXPECT_TRUE(positive_finite(profile.messages().data_send().per_message_on_busy_host_us()));
  EXPECT_TRUE(positive_finite(profile.messages().data_receive().per_message_on_busy_host_us()));
  // A crowded host: a message job's price beyond its own at 1, 2, 3, 4 and 6
  // workers and one ps, by tasks per core; the 1-worker cluster is the zero.
  const auto& crowding = profile.hosts().crowded_message();
  ASSERT_EQ(crowding.size(), 5);
  EXPECT_NEAR(crowding[0].tasks_per_core(), 3 / profile.hosts().cores(), 1e-9);
  EXPECT_EQ(crowding[0].us(), 0);
  for (int i = 1; i < crowding.size(); ++i) {
    EXPECT_GT(crowding[i].tasks_per_core(), crowding[i - 1].tasks_per_core());
    EXPECT_TRUE(std::isfinite(crowding[i].us()) && crowding[i].us() >= 0) << crowding[i].DebugString();
  }
  // The synthetic gradient, the layer kinds a model spec's step is priced by,
  // then its input pipeline: reading each format, and the input layer.
  std::vector<std::string> kinds;
  for (const auto& kernel : profile.compute().kernel()) kinds.push_back(kernel.kind());
  EXPECT_EQ(kinds, (std::vector<std::string>{"gradient", "dense", "embedding", "read/csv", "read/csv.gz", "read/idx",
                                             "read/idx.gz", "read/memory", "read/tfrecord", "read/tfrecord.gz",
                                             "features/dense", "features/categorical"}));
  for (int k = 1; k < profile.compute().kernel_size(); ++k) {
    const auto& kernel = profile.compute().kernel(k);
    // A kernel costs something: some term of its price is positive, none negative.
    EXPECT_GT(kernel.per_call_us() + kernel.per_gflop_s() + kernel.per_gib_s() + kernel.per_ginput_s() +
                  kernel.per_record_us(),
              0)
        << kernel.DebugString();
    for (double v : {kernel.per_call_us(), kernel.per_gflop_s(), kernel.per_gib_s(), kernel.per_ginput_s(),
                     kernel.per_record_us()})
      EXPECT_TRUE(std::isfinite(v) && v >= 0) << kernel.DebugString();
  }
  EXPECT_TRUE(positive_finite(profile.compute().per_gflop_s()));
  // No per-model residue: a step's time is its causes'.
  EXPECT_EQ(profile.compute().step_time().constant_s(), 0);
  // The speed it was measured at, for later runs to compare with.
  EXPECT_TRUE(positive_finite(profile.speed().compute_us()));
  EXPECT_TRUE(positive_finite(profile.speed().round_trip_us()));
  EXPECT_TRUE(positive_finite(profile.speed().row_us()));
  EXPECT_GE(profile.speed().together_slowdown(), 1);
  // The comment header says how each value was measured.
  const std::string text = testing::read_file(out);
  EXPECT_EQ(text.rfind("# CostProfile", 0), 0u) << text;
  EXPECT_NE(text.find("apply per KiB pushed"), std::string::npos) << text;
  EXPECT_NE(text.find("loopback latency"), std::string::npos) << text;
  EXPECT_NE(text.find("both ends at once"), std::string::npos) << text;
  EXPECT_NE(text.find("concat_shards of a read"), std::string::npos) << text;
  EXPECT_NE(text.find("half the coordinator's"), std::string::npos) << text;
  EXPECT_NE(text.find("a message side on a busy host"), std::string::npos) << text;
}

TEST(CalibrateTest, BadInputExitsTwo) {
  const std::string dir = testing::temp_dir("calibrate-bad");
  const std::vector<std::vector<std::string>> bad = {
      {"calibrate", "--repeats", "0"},
      {"calibrate", "--batch-seconds", "-1"},
      {"calibrate", "--max-mib", "0"},
      {"calibrate", "--data-plane", "carrier-pigeon"},
      {"calibrate", "--model", dir + "/missing.textproto"},
      {"calibrate", "--model", write(dir + "/bad.textproto", "variable { nme: \"x\" }")},
      {"calibrate", "--out", dir + "/no/such/dir/profile.textproto"},
      {"calibrate", "--no-such-flag"},
      {"calibrate", "--times", "0"},
      {"calibrate", "--busy-neighbour", "0"},
  };
  for (const auto& args : bad) {
    Process p = twinps(args);
    ASSERT_TRUE(p.wait(30s)) << args.back();
    EXPECT_EQ(p.exit_code(), 2) << args.back() << ": " << p.err();
    EXPECT_FALSE(p.err().empty()) << args.back();
  }
}

// A calibration's prices, as a hand-made profile: `request_us` for the ps's
// per-request price, `curve_us` for the two points of the worker's copies.
std::string price_profile(double request_us, double curve_us_1, double curve_us_2, const std::string& plane = "tcp") {
  return "measured_on: \"a machine\"\n"
         "data_plane: \"" + plane + "\"\n"
         "hosts { cores: 2 tick_us: 4000 }\n"
         "ps_service { per_request_us: " + std::to_string(request_us) + " threads: 1 }\n"
         "messages { data_assembly { bytes: 4096 us: " + std::to_string(curve_us_1) +
         " } data_assembly { bytes: 1048576 us: " + std::to_string(curve_us_2) + " } }\n";
}

// Each price the median of the three profiles' (per_request_us 10 / 30 / 20,
// the curve's points 1 / 3 / 2 and 300 / 100 / 200), the settings kept.
TEST(CalibrateTest, MedianOfProfilesTakesEachPricesMedian) {
  const std::string dir = testing::temp_dir("calibrate-median");
  const std::string a = write(dir + "/a.textproto", price_profile(10, 1, 300));
  const std::string b = write(dir + "/b.textproto", price_profile(30, 3, 100));
  const std::string c = write(dir + "/c.textproto", price_profile(20, 2, 200));
  const std::string out = dir + "/median.textproto";
  Process p = twinps({"calibrate", "--median-of", a, b, c, "--out", out});
  ASSERT_TRUE(p.wait(30s));
  ASSERT_EQ(p.exit_code(), 0) << p.err();
  auto loaded = sim::load_profile_file(out);
  ASSERT_TRUE(loaded.ok()) << (loaded.errors.empty() ? "" : loaded.errors[0].to_string());
  const auto& m = loaded.profile;
  EXPECT_EQ(m.ps_service().per_request_us(), 20);
  EXPECT_EQ(m.ps_service().threads(), 1);
  ASSERT_EQ(m.messages().data_assembly_size(), 2);
  EXPECT_EQ(m.messages().data_assembly(0).bytes(), 4096);
  EXPECT_EQ(m.messages().data_assembly(0).us(), 2);
  EXPECT_EQ(m.messages().data_assembly(1).us(), 200);
  EXPECT_EQ(m.hosts().cores(), 2);
  EXPECT_EQ(m.data_plane(), "tcp");
  EXPECT_EQ(m.measured_on(), "the median of 3 calibrations: a machine");
  const std::string text = testing::read_file(out);
  EXPECT_NE(text.find("# the median, price by price, of 3 profiles:"), std::string::npos) << text;
  EXPECT_NE(text.find("# profile 2 of 3: " + b + " (a machine)"), std::string::npos) << text;
}

// A price one calibration left unset (its fit came out 0, so it wrote none)
// is its default, 0, among the others: per_record_us 3 / unset / 5 -> 3.
TEST(CalibrateTest, MedianOfProfilesTakesAnUnsetPriceAsItsDefault) {
  const std::string dir = testing::temp_dir("calibrate-median-unset");
  auto kernel = [](const std::string& per_record) {
    return price_profile(10, 1, 300) + "compute { kernel { kind: \"read/tfrecord\" per_call_us: 1" + per_record + " } }\n";
  };
  const std::string a = write(dir + "/a.textproto", kernel(" per_record_us: 3"));
  const std::string b = write(dir + "/b.textproto", kernel(""));
  const std::string c = write(dir + "/c.textproto", kernel(" per_record_us: 5"));
  const std::string out = dir + "/median.textproto";
  Process p = twinps({"calibrate", "--median-of", a, b, c, "--out", out});
  ASSERT_TRUE(p.wait(30s));
  ASSERT_EQ(p.exit_code(), 0) << p.err();
  auto loaded = sim::load_profile_file(out);
  ASSERT_TRUE(loaded.ok()) << (loaded.errors.empty() ? "" : loaded.errors[0].to_string());
  ASSERT_EQ(loaded.profile.compute().kernel_size(), 1);
  EXPECT_EQ(loaded.profile.compute().kernel(0).per_record_us(), 3);
  Process reversed = twinps({"calibrate", "--median-of", b, a, c, "--out", dir + "/reversed.textproto"});
  ASSERT_TRUE(reversed.wait(30s));
  ASSERT_EQ(reversed.exit_code(), 0) << reversed.err() << ": the first profile may be the one without it";
}

// Profiles that do not price the same things (a price without a default
// set in one only), or flags about measuring, are refused naming what
// differs; nothing is written.
TEST(CalibrateTest, MedianOfProfilesThatDifferExitsTwo) {
  const std::string dir = testing::temp_dir("calibrate-median-bad");
  const std::string a = write(dir + "/a.textproto", price_profile(10, 1, 300));
  const std::string b = write(dir + "/b.textproto", price_profile(30, 3, 100));
  const std::string other_plane = write(dir + "/plane.textproto", price_profile(30, 3, 100, "tcp-unix"));
  const std::string shorter = write(dir + "/short.textproto", "data_plane: \"tcp\"\nhosts { cores: 2 tick_us: 4000 }\n"
                                    "ps_service { per_request_us: 5 threads: 1 }\n"
                                    "messages { data_assembly { bytes: 4096 us: 1 } }\n");
  const std::string broken = write(dir + "/broken.textproto", "ps_service { per_request_us: -1 }\n");
  // A price with no default, unset where the other sets it: not priced there.
  std::string awake_text = price_profile(30, 3, 100);
  awake_text.replace(awake_text.find("threads: 1"), 10, "threads: 1 per_request_when_awake_us: 12");
  const std::string awake = write(dir + "/awake.textproto", awake_text);
  const std::string out = dir + "/median.textproto";
  const std::vector<std::pair<std::vector<std::string>, std::string>> bad = {
      {{"--median-of", a}, "at least two profiles"},
      {{"--median-of", a, other_plane}, "profile 2 of 2: data_plane: a different value"},
      {{"--median-of", a, b, shorter}, "profile 3 of 3: messages.data_assembly: 1 entries, where the first profile has 2"},
      {{"--median-of", a, awake}, "profile 2 of 2: ps_service.per_request_when_awake_us: set, where the first profile "
                                  "is not"},
      {{"--median-of", a, broken}, "broken.textproto:1:"},
      {{"--median-of", a, dir + "/missing.textproto"}, "missing.textproto"},
      {{"--median-of", a, b, "--repeats", "3"}, "--repeats: --median-of measures nothing"},
      {{"--median-of", a, b, "--times", "2"}, "--times: --median-of measures nothing"},
  };
  for (const auto& [flags, message] : bad) {
    std::vector<std::string> args = {"calibrate", "--out", out};
    args.insert(args.end(), flags.begin(), flags.end());
    Process p = twinps(args);
    ASSERT_TRUE(p.wait(30s)) << message;
    EXPECT_EQ(p.exit_code(), 2) << message << ": " << p.err();
    EXPECT_NE(p.err().find(message), std::string::npos) << p.err();
    EXPECT_FALSE(std::ifstream(out).good()) << message << ": nothing is written";
  }
}

// A hand-written profile: validation's real runs do not depend on its prices,
// and the test does not wait for a calibration. The runs use its plane.
constexpr char kProfile[] = R"(
measured_on: "test"
data_plane: "tcp-unix"
network { host_latency_us: 20 host_bandwidth_gbps: 20 }
compute { step_time { constant_s: 0.0002 } per_gflop_s: 0.05 }
ps_service { per_request_us: 10 per_kib_us: 0.2 per_row_us: 0.02 threads: 1 }
)";

// The rows of a `tune --validate --csv` table, each cut at its commas; the
// header first.
std::vector<std::vector<std::string>> read_csv(const std::string& path) {
  std::vector<std::vector<std::string>> rows;
  std::ifstream csv(path);
  for (std::string line; std::getline(csv, line);) {
    std::stringstream fields(line);
    auto& row = rows.emplace_back();
    for (std::string x; std::getline(fields, x, ',');) row.push_back(x);
  }
  return rows;
}

TEST(TuneValidateTest, QuickPrintsPredictedAndMeasuredColumns) {
  const std::string dir = testing::temp_dir("validate");
  const std::string model = write(dir + "/model.textproto", kModel);
  const std::string profile = write(dir + "/profile.textproto", kProfile);
  Process p = twinps({"tune", "--validate", "--quick", "--model", model, "--profile", profile, "--seconds", "0.5",
                      "--csv", dir + "/validate.csv"});
  ASSERT_TRUE(p.wait(testing::hang_bound(240s))) << "validation did not finish";
  ASSERT_EQ(p.exit_code(), 0) << p.err();
  const std::string out = p.out();
  EXPECT_NE(out.find("predicted st/s"), std::string::npos) << out;
  EXPECT_NE(out.find("measured st/s"), std::string::npos) << out;
  EXPECT_NE(out.find("median"), std::string::npos) << out;
  EXPECT_NE(out.find("simulation picks"), std::string::npos) << out;
  EXPECT_NE(out.find("CPU per step, ms: measured / predicted"), std::string::npos) << out;
  EXPECT_NE(out.find("real runs over data plane tcp-unix"), std::string::npos) << out;
  // Two configurations, each with both numbers positive.
  const auto table = read_csv(dir + "/validate.csv");
  ASSERT_FALSE(table.empty());
  EXPECT_EQ(table[0][8], "predicted_steps_per_s");
  EXPECT_EQ(table[0][9], "measured_steps_per_s");
  int rows = 0;
  for (std::size_t r = 1; r < table.size(); ++r) {
    const auto& f = table[r];
    const std::string line = f.empty() ? "" : f[0];
    ASSERT_EQ(f.size(), 23u) << line;
    EXPECT_GT(std::stod(f[8]), 0) << line;  // predicted
    EXPECT_GT(std::stod(f[9]), 0) << line;  // measured
    // CPU per step by role: every process did work, and the simulated hosts
    // charged the worker and the ps theirs.
    EXPECT_GT(std::stod(f[13]), 0) << line;  // measured, workers
    EXPECT_GT(std::stod(f[14]), 0) << line;  // measured, ps
    EXPECT_GT(std::stod(f[16]), 0) << line;  // predicted, workers
    EXPECT_GT(std::stod(f[17]), 0) << line;  // predicted, ps
    // The profile has no `speed`: no re-pricing, both predictions the same.
    EXPECT_EQ(std::stod(f[18]), 1) << line;  // speed ratio, compute
    EXPECT_EQ(std::stod(f[19]), 1) << line;  // speed ratio, messages
    EXPECT_EQ(std::stod(f[22]), 1) << line;  // speed ratio, rows
    EXPECT_EQ(f[20], f[8]) << line;          // predicted at the profile's own prices
    ++rows;
  }
  EXPECT_EQ(rows, 2);
}

// A model spec is measured as users train it, by its own trainer on its own
// data (the trainer's two epochs, the second measured), and predicted as
// `twinps tune --model SPEC` predicts it.
TEST(TuneValidateTest, AModelSpecIsMeasuredByItsOwnTrainer) {
  const std::string dir = testing::temp_dir("validate-spec");
  testing::write_rings_files(dir);
  const std::string spec = write(dir + "/rings.textproto", testing::rings_spec("constant: 0.01"));
  const std::string profile = write(dir + "/profile.textproto", kProfile);
  Process p = twinps({"tune", "--validate", "--quick", "--model", spec, "--train-data", dir + "/train-*.csv",
                      "--profile", profile, "--seconds", "0.5", "--csv", dir + "/validate.csv"});
  ASSERT_TRUE(p.wait(testing::hang_bound(240s))) << "validation did not finish";
  ASSERT_EQ(p.exit_code(), 0) << p.err();
  EXPECT_NE(p.out().find("rings (spec)"), std::string::npos) << p.out();
  const auto table = read_csv(dir + "/validate.csv");
  int rows = 0;
  for (std::size_t r = 1; r < table.size(); ++r) {
    const auto& f = table[r];
    const std::string line = f.empty() ? "" : f[0];
    ASSERT_EQ(f.size(), 23u) << line;
    EXPECT_EQ(f[0], "rings (spec)") << line;
    // Two epochs of equal closures: as many warmed up as measured.
    EXPECT_EQ(f[6], f[7]) << line;
    EXPECT_GT(std::stod(f[7]), 0) << line;
    EXPECT_GT(std::stod(f[8]), 0) << line;   // predicted
    EXPECT_GT(std::stod(f[9]), 0) << line;   // measured
    EXPECT_GT(std::stod(f[13]), 0) << line;  // measured CPU, workers: the trainer's steps ran there
    EXPECT_GT(std::stod(f[14]), 0) << line;  // measured CPU, ps
    ++rows;
  }
  EXPECT_EQ(rows, 2);
}

TEST(TuneValidateTest, BadInputExitsTwo) {
  const std::string dir = testing::temp_dir("validate-bad");
  const std::string model = write(dir + "/model.textproto", kModel);
  const std::vector<std::vector<std::string>> bad = {
      {"tune", "--validate", "--model", dir + "/missing.textproto"},
      {"tune", "--validate", "--model", model, "--profile", dir + "/missing.textproto"},
      {"tune", "--validate", "--model", model, "--profile", write(dir + "/p.textproto", "network { bogus: 1 }")},
      {"tune", "--validate", "--model", model, "--seconds", "0"},
      {"tune", "--validate", "--model", model, "--csv", dir + "/no/such/dir/out.csv"},
      {"tune", "--validate", "--model", model, "--data-plane", "carrier-pigeon"},
      // Data without a spec to train on it, and a spec without data.
      {"tune", "--validate", "--model", model, "--train-data", dir + "/train-*.csv"},
      {"tune", "--validate", "--model", write(dir + "/spec.textproto", testing::rings_spec("constant: 0.01"))},
      {"tune", "--validate", "--model", dir + "/spec.textproto", "--train-data", dir + "/none-*.csv"},
  };
  for (const auto& args : bad) {
    Process p = twinps(args);
    ASSERT_TRUE(p.wait(30s)) << args.back();
    EXPECT_EQ(p.exit_code(), 2) << args.back() << ": " << p.err();
  }
  // Refused after the output paths were checked: neither file is left behind.
  const std::string csv = dir + "/table.csv", runs = dir + "/runs.textproto";
  Process p = twinps({"tune", "--validate", "--csv", csv, "--save-runs", runs, "--model", dir + "/missing.textproto"});
  ASSERT_TRUE(p.wait(30s));
  EXPECT_EQ(p.exit_code(), 2) << p.err();
  EXPECT_FALSE(std::filesystem::exists(csv));
  EXPECT_FALSE(std::filesystem::exists(runs));
}

// The column of a CSV (header included), one cell per line.
std::vector<std::string> csv_column(const std::string& csv, std::size_t column) {
  std::vector<std::string> out;
  std::stringstream lines(csv);
  for (std::string line; std::getline(lines, line);) {
    std::stringstream fields(line);
    std::string cell;
    for (std::size_t i = 0; i <= column && std::getline(fields, cell, ','); ++i) {
    }
    out.push_back(cell);
  }
  return out;
}

// --save-runs keeps a measurement and --runs predicts it again without
// running anything: at the same prices exactly as it was predicted, at other
// prices differently, and the measured column is the saved one either way.
TEST(TuneValidateTest, SavedRunsArePredictedAgainWithoutRunning) {
  const std::string dir = testing::temp_dir("validate-saved");
  const std::string model = write(dir + "/model.textproto", kModel);
  const std::string profile = write(dir + "/profile.textproto", kProfile);
  const std::string runs = dir + "/runs.textproto";
  Process p = twinps({"tune", "--validate", "--quick", "--model", model, "--profile", profile, "--seconds", "0.3",
                      "--rounds", "2", "--csv", dir + "/live.csv", "--save-runs", runs});
  ASSERT_TRUE(p.wait(testing::hang_bound(240s))) << "validation did not finish";
  ASSERT_EQ(p.exit_code(), 0) << p.err();
  EXPECT_NE(p.err().find("runs saved to " + runs), std::string::npos) << p.err();

  Process again = twinps({"tune", "--validate", "--runs", runs, "--profile", profile, "--csv", dir + "/again.csv"});
  ASSERT_TRUE(again.wait(60s));
  ASSERT_EQ(again.exit_code(), 0) << again.err();
  EXPECT_EQ(again.err().find("real run"), std::string::npos) << again.err();  // nothing ran
  EXPECT_NE(again.out().find("runs of " + runs), std::string::npos) << again.out();
  const std::string live = testing::read_file(dir + "/live.csv");
  ASSERT_EQ(csv_column(live, 0).size(), 3u) << live;  // the header and two configurations
  EXPECT_EQ(testing::read_file(dir + "/again.csv"), live);
  // The same shard-pick line, from the same numbers.
  const auto pick_line = [](const std::string& out) { return out.substr(out.find("simulation picks")); };
  EXPECT_EQ(pick_line(again.out()), pick_line(p.out()));

  // Dearer ps requests: slower predictions, the same measurements.
  std::string dear = kProfile;
  dear.replace(dear.find("per_request_us: 10"), 18, "per_request_us: 400");
  Process priced = twinps({"tune", "--validate", "--runs", runs, "--profile", write(dir + "/dear.textproto", dear),
                           "--csv", dir + "/dear.csv"});
  ASSERT_TRUE(priced.wait(60s));
  ASSERT_EQ(priced.exit_code(), 0) << priced.err();
  const std::string dearer = testing::read_file(dir + "/dear.csv");
  EXPECT_EQ(csv_column(dearer, 9), csv_column(live, 9));  // measured steps/s
  const auto cheap_predicted = csv_column(live, 8), dear_predicted = csv_column(dearer, 8);
  ASSERT_EQ(dear_predicted.size(), 3u);
  for (std::size_t row = 1; row < 3; ++row)
    EXPECT_LT(std::stod(dear_predicted[row]), std::stod(cheap_predicted[row])) << "row " << row;
}

// A saved measurement with one round of one configuration, written by hand.
constexpr char kSavedRuns[] = R"(data_plane: "tcp-unix"
online_cores: 2
measured_on: "by hand"
config {
  model_name: "m"
  model { batch_size: 16 variable { name: "dense" shape: [64, 32] } partitioner { fixed_shards: 1 } }
  workers: 1 ps: 1 partitioner: "fixed" shards: 1
  round {
    warmup: 4 measured: 100 measured_steps: 100 seconds: 0.1 steps_per_second: 1000
    task { job: "worker" index: 0 cpu_s: 0.05 }
    task { job: "ps" index: 0 cpu_s: 0.02 }
    speed_before { compute_us: 5000 together_slowdown: 1 row_us: 0.1 }
    speed_after { compute_us: 5000 together_slowdown: 1 row_us: 0.1 }
  }
}
)";

TEST(TuneValidateTest, SavedRunsAreCheckedBeforeAnythingIsPredicted) {
  const std::string dir = testing::temp_dir("validate-saved-bad");
  const std::string model = write(dir + "/model.textproto", kModel);
  const std::string profile = write(dir + "/profile.textproto", kProfile);
  const std::string runs = write(dir + "/runs.textproto", kSavedRuns);
  // The hand-written file is a good one.
  Process good = twinps({"tune", "--validate", "--runs", runs, "--profile", profile});
  ASSERT_TRUE(good.wait(60s));
  EXPECT_EQ(good.exit_code(), 0) << good.err();
  EXPECT_NE(good.out().find("1000.00"), std::string::npos) << good.out();  // its measured steps/s

  std::string negative = kSavedRuns;
  negative.replace(negative.find("steps_per_second: 1000"), 22, "steps_per_second: -1");
  std::string plane = kSavedRuns;
  plane.replace(plane.find("tcp-unix"), 8, "grpc");
  std::string job = kSavedRuns;
  job.replace(job.find("job: \"ps\""), 9, "job: \"pz\"");
  struct Case {
    std::vector<std::string> args;
    std::string says;
  };
  const std::vector<Case> bad = {
      {{"--runs", dir + "/missing.textproto", "--profile", profile}, dir + "/missing.textproto"},
      {{"--runs", write(dir + "/neg.textproto", negative), "--profile", profile},
       dir + "/neg.textproto:9:"},
      {{"--runs", write(dir + "/neg2.textproto", negative), "--profile", profile},
       "config[0].round[0].steps_per_second: must be positive"},
      {{"--runs", write(dir + "/job.textproto", job), "--profile", profile},
       "config[0].round[0].task[1].job: must be chief, worker or ps, not \"pz\""},
      {{"--runs", write(dir + "/grpc.textproto", plane), "--profile", profile},
       "measured over grpc: the profile " + profile + " was measured over tcp-unix"},
      {{"--runs", runs}, "--runs needs --profile"},
      {{"--runs", runs, "--profile", profile, "--quick"}, "--quick: --runs predicts runs already made"},
      {{"--runs", runs, "--profile", profile, "--model", model}, "--model: --runs predicts runs already made"},
      {{"--model", model, "--save-runs", dir + "/no/such/dir/runs.textproto"},
       "--save-runs: cannot write " + dir + "/no/such/dir/runs.textproto"},
  };
  for (const Case& c : bad) {
    std::vector<std::string> args = {"tune", "--validate"};
    args.insert(args.end(), c.args.begin(), c.args.end());
    Process p = twinps(args);
    ASSERT_TRUE(p.wait(30s)) << c.says;
    EXPECT_EQ(p.exit_code(), 2) << c.says << ": " << p.err();
    EXPECT_NE(p.err().find(c.says), std::string::npos) << p.err();
  }
}

// A profile's prices hold for the plane they were measured over: real runs
// over another would be compared with the wrong prices.
TEST(TuneValidateTest, RefusesAPlaneOtherThanTheProfiles) {
  const std::string dir = testing::temp_dir("validate-plane");
  const std::string model = write(dir + "/model.textproto", kModel);
  const std::string profile = write(dir + "/profile.textproto", kProfile);
  Process p = twinps({"tune", "--validate", "--quick", "--model", model, "--profile", profile, "--data-plane", "grpc"});
  ASSERT_TRUE(p.wait(30s));
  EXPECT_EQ(p.exit_code(), 2) << p.err();
  EXPECT_NE(p.err().find("--data-plane grpc: the profile " + profile + " was measured over tcp-unix"),
            std::string::npos)
      << p.err();
  EXPECT_NE(p.err().find("twinps calibrate --data-plane grpc"), std::string::npos) << p.err();

  const std::string unknown = write(dir + "/unknown.textproto", "measured_on: \"test\"\ndata_plane: \"pigeon\"\n");
  Process q = twinps({"tune", "--validate", "--quick", "--model", model, "--profile", unknown});
  ASSERT_TRUE(q.wait(30s));
  EXPECT_EQ(q.exit_code(), 2) << q.err();
  EXPECT_NE(q.err().find(unknown + ":2:"), std::string::npos) << q.err();
  EXPECT_NE(q.err().find("data_plane: must be tcp, tcp-unix, tcp-only, grpc or tcp-all, not \"pigeon\""),
            std::string::npos)
      << q.err();
}

}  // namespace
}  // namespace twinps
