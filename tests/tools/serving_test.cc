// How a task is exposed: where it listens (every interface at its TF_CONFIG
// port, or --bind), and what a peer can make it allocate (lengths read from
// the wire are bounded before memory is reserved). Real `twinps serve`
// processes on 127.0.0.1; every wait is bounded.
#include <gtest/gtest.h>

#include <map>
#include <regex>

#include <nlohmann/json.hpp>

#include "tests/tools/local_cluster.h"
#include "tests/tools/process.h"
#include "tests/tools/raw_peer.h"
#include "tests/tools/tutorial_report.h"

namespace twinps {
namespace {

using namespace std::chrono_literals;
using testing::data_port_of;
using testing::LocalCluster;
using testing::Process;
using testing::ReservedPort;
namespace df = net::dataframe;

nlohmann::json read_json(const std::string& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in);
}

TEST(ServingTest, ATaskListensOnEveryInterfaceAtItsConfiguredPort) {
  // As in a pod: the ps's own TF_CONFIG names it by an address it does not
  // own (a Service's); the others reach it at an address it has. Both
  // planes (gRPC and the data plane) must accept them.
  // The configured port is one this test holds (a port picked by the OS,
  // not probed), which the ps then listens on.
  LocalCluster cluster(2, 1);
  cluster.reserve_port(TaskId::ps(0));
  const std::string ps_port = std::to_string(testing::port_of(cluster.address(TaskId::ps(0))));
  auto ps_view = nlohmann::json::parse(cluster.tf_config(TaskId::ps(0)));  // --tf-config: ahead of TF_CONFIG
  ps_view["cluster"]["ps"][0] = "192.0.2.10:" + ps_port;                    // TEST-NET-1: never a local address
  ASSERT_TRUE(cluster.start(TaskId::ps(0), {"--tf-config", ps_view.dump()}));
  const Process& ps = cluster.server(TaskId::ps(0));
  EXPECT_NE(ps.err().find("listening on 0.0.0.0:" + ps_port), std::string::npos) << ps.err();
  for (int i = 0; i < 2; ++i) ASSERT_TRUE(cluster.start(TaskId::worker(i)));
  const std::string dir = testing::temp_dir("bind");
  Process train = cluster.train({"--report", dir + "/r.json"});
  ASSERT_TRUE(train.wait(120s));
  ASSERT_EQ(train.exit_code(), 0) << train.err();
  testing::expect_tutorial_learned(read_json(dir + "/r.json"), train.out());
}

TEST(ServingTest, BindNamesOneAddressAndBadValuesNameTheFlag) {
  // Both ports are ones this test holds, which the ps then listens on.
  LocalCluster cluster(1, 1);
  cluster.reserve_port(TaskId::ps(0));
  const ReservedPort data;
  const int data_port = data.port();
  ASSERT_TRUE(cluster.start(TaskId::ps(0), {"--bind", "127.0.0.1", "--data-port", std::to_string(data_port)}));
  const Process& ps = cluster.server(TaskId::ps(0));
  EXPECT_NE(ps.err().find("listening on " + cluster.address(TaskId::ps(0))), std::string::npos) << ps.err();
  EXPECT_EQ(data_port_of(ps), data_port) << ps.err();
  testing::RawPeer peer(data_port);
  EXPECT_TRUE(peer.ok()) << "the fixed data-plane port is not listening";

  for (const std::vector<std::string>& bad : {std::vector<std::string>{"--bind", "10.0.0.1/8"},
                                              std::vector<std::string>{"--data-port", "70000"},
                                              std::vector<std::string>{"--port", "70000"}}) {
    std::vector<std::string> args{testing::twinps_binary(), "serve"};
    args.insert(args.end(), bad.begin(), bad.end());
    Process p = Process::start(args, {"TF_CONFIG=" + cluster.tf_config(TaskId::worker(0))});
    ASSERT_TRUE(p.wait(30s));
    EXPECT_EQ(p.exit_code(), 2) << p.err();
    EXPECT_NE(p.err().find(bad[0]), std::string::npos) << p.err();
  }
}

// --port 0: the OS picks the port and the readiness line says which, so a
// launcher (tools/process_cluster.h) never guesses a free one.
TEST(ServingTest, PortZeroIsPickedByTheOsAndReportedOnTheReadinessLine) {
  // Its TF_CONFIG port is one this test holds: the OS cannot pick it too.
  LocalCluster cluster(1, 1);
  cluster.reserve_port(TaskId::ps(0));
  Process ps = Process::start({testing::twinps_binary(), "serve", "--bind", "127.0.0.1", "--port", "0"},
                              {"TF_CONFIG=" + cluster.tf_config(TaskId::ps(0))});
  ASSERT_TRUE(ps.wait_for_output("serving on", 20s)) << ps.err();
  std::smatch m;
  const std::string log = ps.err();
  ASSERT_TRUE(std::regex_search(log, m, std::regex(R"(serving on 127\.0\.0\.1:([0-9]+) \(listening on 127\.0\.0\.1:([0-9]+))")))
      << log;
  const int port = std::stoi(m[1]);
  EXPECT_GT(port, 0);
  EXPECT_EQ(m[1], m[2]);
  EXPECT_NE(port, testing::port_of(cluster.address(TaskId::ps(0))));
  testing::RawPeer peer(port);
  EXPECT_TRUE(peer.ok()) << "nothing listens on the reported port " << port;
}

// A push of one tensor of `bytes` out of band, as a worker would send it.
std::string oversized_push_envelope(std::uint64_t bytes) {
  net::wire::RpcRequest r;
  net::to_proto(TaskId::worker(0), r.mutable_from());
  auto* u = r.mutable_request()->mutable_push()->add_updates();
  u->set_shard(1);
  u->mutable_values()->set_rows(static_cast<std::int64_t>(bytes / 4096));
  u->mutable_values()->set_cols(1024);
  u->mutable_values()->set_attachment_offset(0);
  return r.SerializeAsString();
}

TEST(ServingTest, HeadersClaimingHugeBodiesLeaveMemoryWithinItsCap) {
  // The attack from the field: a 32-byte header claiming a 250 MiB body made
  // the task allocate and zero that much before any byte arrived (14 such
  // connections: 17 MiB -> 2 GiB). Now the read buffer grows only as bytes
  // arrive, tensors are reserved unzeroed against the bytes the frame
  // declares, and requests being received share one cap (--max-inbound-mb).
  LocalCluster cluster(1, 1);
  ASSERT_TRUE(cluster.start(TaskId::ps(0)));
  Process& ps = cluster.server(TaskId::ps(0));
  const int port = data_port_of(ps);
  ASSERT_GT(port, 0) << ps.err();
  const long long before = testing::resident_bytes(ps.pid());
  ASSERT_GT(before, 0);

  constexpr std::uint64_t kClaimed = std::uint64_t{250} << 20;
  constexpr int kConnections = 14;
  std::vector<std::unique_ptr<testing::RawPeer>> attackers;
  std::set<int> ports;
  for (int i = 0; i < 2 * kConnections; ++i) {
    auto peer = std::make_unique<testing::RawPeer>(port);
    ASSERT_TRUE(peer->ok());
    ASSERT_TRUE(peer->hello(TaskId::worker(0), TaskId::ps(0)).ok());
    if (i < kConnections) {
      // An envelope claimed at 250 MiB, never sent.
      ASSERT_TRUE(peer->send_bytes(testing::RawPeer::frame(df::Kind::kRequest, 1, kClaimed, 0)));
    } else {
      // A real envelope whose tensor is 250 MiB of attachments, never sent.
      const std::string envelope = oversized_push_envelope(kClaimed);
      ASSERT_TRUE(peer->send_bytes(testing::RawPeer::frame(df::Kind::kRequest, 1,
                                                           static_cast<std::uint32_t>(envelope.size()), kClaimed,
                                                           envelope)));
    }
    ports.insert(peer->local_port());
    attackers.push_back(std::move(peer));
  }
  // Readiness: the task has read every byte sent (its receive queues are empty)...
  bool drained = false;
  for (int i = 0; i < 2000 && !drained; ++i) {
    drained = testing::unread_bytes(ps.pid(), port, ports) == 0;
    if (!drained) ps.wait(5ms);  // a bounded pause that also notices an exit
  }
  ASSERT_TRUE(drained) << "the task did not read what the peers sent";
  // ... and still answers a well-formed request on a fresh connection.
  testing::RawPeer probe(port);
  ASSERT_TRUE(probe.hello(TaskId::worker(0), TaskId::ps(0)).ok());
  net::wire::RpcRequest pull;
  net::to_proto(TaskId::worker(0), pull.mutable_from());
  pull.mutable_request()->mutable_pull()->add_items()->set_shard(424242);
  ASSERT_TRUE(probe.send_bytes(testing::RawPeer::frame_with(df::Kind::kRequest, 7, pull)));
  auto reply = probe.read_frame();
  ASSERT_TRUE(reply) << "the task stopped answering";
  EXPECT_EQ(reply->header.call_id, 7u);

  const long long after = testing::resident_bytes(ps.pid());
  std::printf("serve RSS %.1f MiB before, %.1f MiB after %d headers claiming %llu MiB each\n", before / 1048576.0,
              after / 1048576.0, 2 * kConnections, static_cast<unsigned long long>(kClaimed >> 20));
  // 28 x 250 MiB claimed; what the task may hold is its read buffers (64 KiB
  // a connection) and bookkeeping: far below one claimed body.
  EXPECT_LT(after - before, 64ll << 20) << "RSS grew from " << before << " to " << after;
  EXPECT_TRUE(ps.running());
}

}  // namespace
}  // namespace twinps
