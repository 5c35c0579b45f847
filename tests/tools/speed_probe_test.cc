// The machine-speed probes and the re-pricing of a cost profile for the speed
// they find (tools/tune/speed_probe.h), checked against hand-computed prices.
#include "tools/tune/speed_probe.h"

#include <gtest/gtest.h>
#include <google/protobuf/text_format.h>
#include <google/protobuf/util/message_differencer.h>

namespace twinps::cli {
namespace {

scenario::CostProfile parse(const char* text) {
  scenario::CostProfile p;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &p)) << text;
  return p;
}

// Measured at: the reference kernel 1000 us, no slowdown on every core, a
// round trip 20 us.
constexpr char kProfile[] = R"(
compute { per_gflop_s: 0.02 kernel { kind: "gradient" per_call_us: 1 per_gflop_s: 0.02 per_gib_s: 0.2 per_ginput_s: 2 per_gflop_per_doubling_s: 0.004 cache_bytes: 1048576 } }
ps_service { per_request_us: 30 per_item_us: 0.5 bytes_curve { bytes: 4096 us: 4 } apply { optimizer: SGD per_kib_us: 0.1 per_row_pushed_us: 0.2 } }
messages { data_send { per_message_us: 20 bytes_curve { bytes: 4096 us: 2 } } control_receive { per_message_us: 100 } }
hosts { placement: ONE_HOST cores: 2 }
speed { compute_us: 1000 together_slowdown: 1 round_trip_us: 20 }
)";

scenario::MachineSpeed speed(double compute_us, double slowdown, double round_trip_us) {
  scenario::MachineSpeed s;
  s.set_compute_us(compute_us);
  s.set_together_slowdown(slowdown);
  s.set_round_trip_us(round_trip_us);
  return s;
}

TEST(SpeedProbeTest, ComputePricesFollowTheComputeProbeAndMessagePricesStay) {
  // Now: the kernel 1.5x slower, a round trip 1.25x, every core at once 1.25x.
  const auto p = at_speed(parse(kProfile), speed(1500, 1.25, 25), 2);
  const SpeedRatios r = speed_ratios(parse(kProfile).speed(), speed(1500, 1.25, 25));
  EXPECT_DOUBLE_EQ(r.compute, 1.5);
  EXPECT_DOUBLE_EQ(r.messages, 1.25) << "reported";
  const auto& k = p.compute().kernel(0);
  EXPECT_DOUBLE_EQ(k.per_call_us(), 1.5);
  EXPECT_DOUBLE_EQ(k.per_gflop_s(), 0.03);
  EXPECT_DOUBLE_EQ(k.per_gib_s(), 0.3);
  EXPECT_DOUBLE_EQ(k.per_ginput_s(), 3);
  EXPECT_DOUBLE_EQ(k.per_gflop_per_doubling_s(), 0.006);
  EXPECT_DOUBLE_EQ(k.cache_bytes(), 1048576) << "a size, not a price";
  EXPECT_DOUBLE_EQ(p.compute().per_gflop_s(), 0.03);
  // Message handling and service are not re-priced by the round trip.
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(p.ps_service(), parse(kProfile).ps_service()));
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(p.messages(), parse(kProfile).messages()));
  EXPECT_DOUBLE_EQ(p.hosts().cores(), 1.6) << "2 cores over a 1.25x slowdown";
  EXPECT_EQ(p.hosts().placement(), scenario::Hosts::ONE_HOST);
}

TEST(SpeedProbeTest, TheRowPricesOfAPsFollowTheRowProbe) {
  scenario::CostProfile profile = parse(kProfile);
  profile.mutable_speed()->set_row_us(0.2);
  auto* ps = profile.mutable_ps_service();
  ps->set_per_row_us(0.04);
  ps->set_per_row_kib_us(0.3);
  ps->mutable_apply(0)->set_per_row_pushed_kib_us(0.1);
  // Now: rows 1.5x dearer, compute and round trip as measured.
  scenario::MachineSpeed now = speed(1000, 1, 20);
  now.set_row_us(0.3);
  EXPECT_DOUBLE_EQ(speed_ratios(profile.speed(), now).rows, 1.5);
  const auto p = at_speed(profile, now, 2);
  EXPECT_DOUBLE_EQ(p.ps_service().per_row_us(), 0.06);
  EXPECT_DOUBLE_EQ(p.ps_service().per_row_kib_us(), 0.45);
  EXPECT_DOUBLE_EQ(p.ps_service().apply(0).per_row_pushed_us(), 0.3);
  EXPECT_DOUBLE_EQ(p.ps_service().apply(0).per_row_pushed_kib_us(), 0.15);
  // What is not a row's price stays.
  EXPECT_DOUBLE_EQ(p.ps_service().per_request_us(), 30);
  EXPECT_DOUBLE_EQ(p.ps_service().per_item_us(), 0.5);
  EXPECT_DOUBLE_EQ(p.ps_service().apply(0).per_kib_us(), 0.1);
  EXPECT_DOUBLE_EQ(p.ps_service().bytes_curve(0).us(), 4);
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(p.messages(), profile.messages()));
  EXPECT_DOUBLE_EQ(p.compute().kernel(0).per_gflop_s(), 0.02);
  // A profile or a probe without rows: nothing re-priced.
  EXPECT_DOUBLE_EQ(speed_ratios(profile.speed(), speed(1000, 1, 20)).rows, 1);
  EXPECT_DOUBLE_EQ(speed_ratios(parse(kProfile).speed(), now).rows, 1);
}

TEST(SpeedProbeTest, PricesLeftAtTheirDefaultsStayUnset) {
  // An unset price means the schema's default; re-pricing must not write it.
  scenario::CostProfile profile = parse(kProfile);
  profile.mutable_compute()->clear_per_gflop_s();
  const auto p = at_speed(profile, speed(2000, 1, 40), 2);
  EXPECT_FALSE(p.compute().has_per_gflop_s());
  EXPECT_FALSE(p.compute().has_per_example_s());
  EXPECT_DOUBLE_EQ(p.compute().kernel(0).per_gflop_s(), 0.04);
}

TEST(SpeedProbeTest, WithoutAProbeOnEitherSideNothingChanges) {
  scenario::CostProfile old = parse(kProfile);
  old.clear_speed();  // a profile written before the probes existed
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(at_speed(old, speed(1500, 1.25, 25), 2), old));
  const SpeedRatios none = speed_ratios(parse(kProfile).speed(), scenario::MachineSpeed{});
  EXPECT_DOUBLE_EQ(none.compute, 1);
  EXPECT_DOUBLE_EQ(none.messages, 1);
}

scenario::MachineSpeed probe(double compute_us, double slowdown, double round_trip_us, double hand_off_us) {
  scenario::MachineSpeed s = speed(compute_us, slowdown, round_trip_us);
  s.set_hand_off_us(hand_off_us);
  return s;
}

TEST(SpeedProbeTest, ACalibrationsSpeedIsTheMedianComputeProbeAndTheMeanRoundTrip) {
  // The probe before the measurements came after the VM idled: twice as slow,
  // and all cores at once 1.22x. The other two agree; the median takes them.
  const scenario::MachineSpeed before = probe(12000, 1.22, 27, 3.6);
  scenario::MachineSpeed between;
  between.set_compute_us(5600);
  between.set_together_slowdown(1.01);
  const scenario::MachineSpeed after = probe(5700, 1.03, 19, 2.4);
  const scenario::MachineSpeed s = calibration_speed(before, between, after);
  EXPECT_DOUBLE_EQ(s.compute_us(), 5700);
  EXPECT_DOUBLE_EQ(s.together_slowdown(), 1.03);
  EXPECT_DOUBLE_EQ(s.round_trip_us(), 23) << "(27 + 19) / 2: the round trip is not probed between";
  EXPECT_DOUBLE_EQ(s.hand_off_us(), 3);
  // Whichever probe is the slow one.
  EXPECT_DOUBLE_EQ(calibration_speed(after, before, between).compute_us(), 5700);
  EXPECT_DOUBLE_EQ(calibration_speed(between, after, before).together_slowdown(), 1.03);
}

TEST(SpeedProbeTest, TheSameSpeedChangesNoPrice) {
  const auto p = parse(kProfile);
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(at_speed(p, p.speed(), 2), p));
}

TEST(SpeedProbeTest, TheProbesMeasureThisMachine) {
  const scenario::MachineSpeed s = probe_machine_speed(0.15);
  EXPECT_GT(s.compute_us(), 0);
  EXPECT_GT(s.round_trip_us(), 0);
  EXPECT_TRUE(s.has_hand_off_us());  // the wall time of the round trips beyond their CPU, per way
  EXPECT_GT(s.row_us(), 0);
  EXPECT_GE(s.together_slowdown(), 1);
  EXPECT_GT(usable_cores(2, s), 0);
  EXPECT_LE(usable_cores(2, s), 2);
}

}  // namespace
}  // namespace twinps::cli
