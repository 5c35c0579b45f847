// The network model: delivery time = latency + size over bandwidth + waiting
// for busy links on the path; partitions lose messages; slow links are slower.
#include "sim/network.h"

#include <gtest/gtest.h>

namespace twinps::sim {
namespace {

// 1 Gbit/s = 1 bit per ns: 1000 bytes take 8000 ns on a link.
NetworkOptions one_gbps(Duration latency = 1000) {
  NetworkOptions o;
  o.host = LinkParams{1, latency};
  return o;
}

TEST(NetworkModelTest, ADeliveryAddsLatencyAndTransferOfEveryHop) {
  NetworkModel net(ClusterShape{2, 1}, one_gbps());
  // worker:0 -> switch -> ps:0: the head crosses two links (2 x 1 us), the
  // tail leaves the first link after 8 us and arrives 8 us + 2 us later.
  EXPECT_EQ(net.deliver(TaskId::worker(0), TaskId::ps(0), 1000, 0), 10000);
  EXPECT_EQ(net.uplink(TaskId::worker(0)).bytes, 1000u);
  EXPECT_EQ(net.downlink(TaskId::ps(0)).messages, 1u);
}

TEST(NetworkModelTest, MessagesToOneHostQueueOnItsLink) {
  NetworkModel net(ClusterShape{2, 1}, one_gbps());
  // Two workers send 1000 bytes to ps:0 at the same instant: their uplinks
  // are separate, but ps:0's downlink carries one message at a time.
  const Time a = *net.deliver(TaskId::worker(0), TaskId::ps(0), 1000, 0);
  const Time b = *net.deliver(TaskId::worker(1), TaskId::ps(0), 1000, 0);
  EXPECT_EQ(a, 10000);
  EXPECT_EQ(b, 18000) << "the second waits 8 us for the first to clear the ps's link";
  EXPECT_EQ(net.downlink(TaskId::ps(0)).max_wait, 8000);
  // The reverse direction is a separate link: replies do not queue behind requests.
  EXPECT_EQ(net.deliver(TaskId::ps(0), TaskId::worker(0), 1000, 0), 10000);
}

TEST(NetworkModelTest, RacksAddTheirUplinks) {
  NetworkOptions o = one_gbps();
  o.hosts_per_rack = 2;  // chief + worker:0 | worker:1 + ps:0
  o.rack_uplink = LinkParams{10, 500};
  NetworkModel net(ClusterShape{2, 1}, o);
  EXPECT_EQ(net.deliver(TaskId::worker(1), TaskId::ps(0), 1000, 0), 10000) << "same rack: two hops";
  // worker:0 -> rack:0 -> core -> rack:1 -> ps:0; the rack uplinks are fast.
  EXPECT_EQ(net.deliver(TaskId::worker(0), TaskId::ps(0), 1000, 100000), 100000 + 8000 + 1000 + 500 + 500 + 1000);
}

TEST(NetworkModelTest, PartitionsLoseMessagesBetweenTheSidesOnly) {
  NetworkModel net(ClusterShape{3, 1}, one_gbps());
  const int id = net.add_partition({TaskId::worker(0)}, {});
  EXPECT_FALSE(net.deliver(TaskId::worker(0), TaskId::ps(0), 10, 0));
  EXPECT_FALSE(net.deliver(TaskId::chief(), TaskId::worker(0), 10, 0));
  EXPECT_TRUE(net.deliver(TaskId::worker(1), TaskId::ps(0), 10, 0));
  const int two = net.add_partition({TaskId::worker(1)}, {TaskId::worker(2)});
  EXPECT_FALSE(net.deliver(TaskId::worker(2), TaskId::worker(1), 10, 0));
  EXPECT_TRUE(net.deliver(TaskId::worker(1), TaskId::ps(0), 10, 0)) << "b lists only worker:2";
  net.remove_partition(id);
  net.remove_partition(two);
  EXPECT_TRUE(net.deliver(TaskId::worker(0), TaskId::ps(0), 10, 0));
  EXPECT_EQ(net.messages_lost(), 3u);
  EXPECT_EQ(net.loss_detection_delay(), 10 * kSecond);
}

TEST(NetworkModelTest, SlowLinksAreSlowerUntilRestored) {
  NetworkModel net(ClusterShape{1, 1}, one_gbps());
  net.slow_host_link(TaskId::ps(0), 4);
  // ps:0's link: 0.25 Gbit/s (32 us for 1000 bytes) and 4 us latency.
  EXPECT_EQ(net.deliver(TaskId::worker(0), TaskId::ps(0), 1000, 0), 1000 + 4000 + 32000);
  net.unslow_host_link(TaskId::ps(0), 4);
  EXPECT_EQ(net.deliver(TaskId::worker(0), TaskId::ps(0), 1000, 1000000), 1000000 + 10000);
}

TEST(TopologyTest, RoutesFollowTheLowestLatencyPath) {
  Topology t;
  const int a = t.add_host("a"), b = t.add_host("b"), s1 = t.add_switch("s1"), s2 = t.add_switch("s2");
  t.add_link(a, s1, {10, 100});
  t.add_link(s1, b, {10, 100});
  const int slow = t.add_link(a, s2, {10, 1});
  t.add_link(s2, b, {10, 1});
  int path[8];
  ASSERT_EQ(t.route(a, b, path, 8), 2);
  EXPECT_EQ(path[0], 2 * slow) << "the low-latency path, from the link's first end";
  EXPECT_EQ(t.route(b, a, path, 8), 2);
  EXPECT_EQ(path[1], 2 * slow + 1) << "the same link backwards";
  EXPECT_EQ(t.route(a, a, path, 8), 0);
}

}  // namespace
}  // namespace twinps::sim
