// Who may talk to a task: with a cluster token configured, a peer without it
// is refused on every port (gRPC and the data plane) with UNAUTHENTICATED
// while the cluster's own training goes on; with TLS the tutorial trains to
// accuracy 1.0 and a plaintext peer is not served. Certificates are made at
// test time (net/throwaway_pki.h); no private key is checked in. Real
// `twinps serve` / `twinps train` processes on 127.0.0.1; waits are bounded.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <optional>

#include <nlohmann/json.hpp>

#include "net/grpc_transport.h"
#include "net/throwaway_pki.h"
#include "tests/tools/local_cluster.h"
#include "tests/tools/process.h"
#include "tests/tools/raw_peer.h"
#include "tests/tools/tutorial_report.h"

namespace twinps {
namespace {

using namespace std::chrono_literals;
using testing::data_port_of;
using testing::Process;
namespace df = net::dataframe;

const std::string kToken = "3f9c2a7d81e44b0c9a5d6e7f80a1b2c3";

std::string write_file(const std::string& dir, const std::string& name, const std::string& text) {
  const std::string path = dir + "/" + name;
  std::ofstream(path) << text;
  std::filesystem::permissions(path, std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
  return path;
}

nlohmann::json read_json(const std::string& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in);
}

// Separate processes on 127.0.0.1 (tests/tools/local_cluster.h), every one
// started with the same extra flags.
class SecureCluster {
 public:
  SecureCluster(int workers, int ps, std::vector<std::string> flags)
      : flags_(std::move(flags)), dir_(testing::temp_dir("secure")), cluster_(workers, ps, dir_) {}
  std::string tf_config(const TaskId& task) const { return cluster_.tf_config(task); }
  const std::string& address(const TaskId& t) const { return cluster_.address(t); }
  const std::string& dir() const { return dir_; }

  ::testing::AssertionResult start(const TaskId& t, std::vector<std::string> extra = {}) {
    extra.insert(extra.begin(), flags_.begin(), flags_.end());
    return cluster_.start(t, extra);
  }
  Process& server(const TaskId& t) { return cluster_.server(t); }
  Process train(std::vector<std::string> extra) const {
    extra.insert(extra.begin(), flags_.begin(), flags_.end());
    return cluster_.train(extra);
  }

 private:
  std::vector<std::string> flags_;
  std::string dir_;
  testing::LocalCluster cluster_;
};

// A task of this test process calling the cluster, with the security it is given.
class Caller {
 public:
  Caller(const SecureCluster& cluster, net::SecurityOptions security) {
    net::GrpcTransportOptions o;
    o.resolve = [&cluster](const TaskId& t) { return cluster.address(t); };
    o.security = std::move(security);
    auto t = net::GrpcTransport::create(TaskId::worker(99), ex_, std::move(o));
    EXPECT_TRUE(t.ok()) << t.status();
    if (t.ok()) transport_ = std::move(*t);
  }
  ~Caller() { transport_.reset(); }

  StatusOr<Response> call(const TaskId& to, Request request) {
    std::optional<StatusOr<Response>> got;
    CallOptions o;
    o.deadline = ex_.now() + 20 * kSecond;
    transport_->call(to, std::move(request), o, [&](StatusOr<Response> r) { got = std::move(r); });
    ex_.run_until([&] { return got.has_value(); }, ex_.now() + 30 * kSecond);
    if (!got) return absl::InternalError("test: no reply within the bound");
    return std::move(*got);
  }

 private:
  net::AsioExecutor ex_;
  std::unique_ptr<net::GrpcTransport> transport_;
};

ShardState small_shard() {
  ShardState s;
  s.spec = ShardSpec{1, "embedding/part_0", VariableKind::kTrainable, 2, 2};
  s.value = Matrix::Constant(2, 2, 42.0f);
  return s;
}

TEST(SecurityTest, APeerWithoutTheTokenIsRefusedEverywhereWhileTrainingGoesOn) {
  const std::string dir = testing::temp_dir("token");
  const std::string token_file = write_file(dir, "token", kToken + "\n");
  SecureCluster cluster(3, 2, {"--token-file", token_file});
  for (const auto& t : {TaskId::ps(0), TaskId::ps(1), TaskId::worker(0), TaskId::worker(1), TaskId::worker(2)})
    ASSERT_TRUE(cluster.start(t, t.job == Job::kWorker ? std::vector<std::string>{"--inject-step-delay", "0.01"}
                                                       : std::vector<std::string>{}));
  Process train = cluster.train({"--epochs", "30", "--steps-per-epoch", "20", "--report", dir + "/report.json"});
  ASSERT_TRUE(train.wait_for_output("Finished epoch 0", 60s)) << train.err();
  ASSERT_TRUE(train.running()) << "the attempts must start while the cluster trains";

  net::SecurityOptions none;
  net::SecurityOptions wrong;
  wrong.token = "not-the-cluster-token-at-all";
  for (const auto* security : {&none, &wrong}) {
    SCOPED_TRACE(security->token.empty() ? "no token" : "a wrong token");
    Caller intruder(cluster, *security);
    std::vector<std::pair<TaskId, Request>> attempts;
    attempts.push_back({TaskId::ps(0), ExportShardsRequest{}});  // read every variable
    attempts.push_back({TaskId::ps(0), CreateShardsRequest{Fence{}, OptimizerConfig{}, {small_shard()}, true}});
    attempts.push_back({TaskId::ps(1), FenceRequest{Fence{999, 999}}});  // would abort the training
    attempts.push_back({TaskId::ps(0), PullRequest{{PullItem{1, true, {}}}}});
    attempts.push_back({TaskId::ps(0), PushRequest{Fence{}, {Update{1, Update::Op::kAssign, false, {},
                                                                   Matrix::Constant(2, 2, 7.0f), 0}},
                                                   {}}});
    attempts.push_back({TaskId::worker(0), RunClosureRequest{1, "train_step", {}, Fence{}, 0}});
    attempts.push_back({TaskId::worker(1), HealthRequest{}});
    for (auto& [to, request] : attempts) {
      const std::string name = request_name(request);
      auto r = intruder.call(to, std::move(request));
      EXPECT_EQ(r.status().code(), StatusCode::kUnauthenticated) << name << " to " << to.short_name() << ": "
                                                                  << r.status();
    }
  }
  // The data plane itself, past gRPC: a handshake without the token is refused.
  const int port = data_port_of(cluster.server(TaskId::ps(0)));
  ASSERT_GT(port, 0);
  {
    testing::RawPeer peer(port);
    Status refused = peer.hello(TaskId::worker(0), TaskId::ps(0), "not-the-cluster-token-at-all");
    EXPECT_EQ(refused.code(), StatusCode::kUnauthenticated) << refused;
    // Anything sent after a refusal reaches no handler: the connection is closed.
    net::wire::RpcRequest pull;
    net::to_proto(TaskId::worker(0), pull.mutable_from());
    pull.mutable_request()->mutable_pull()->add_items()->set_shard(1);
    peer.send_bytes(testing::RawPeer::frame_with(df::Kind::kRequest, 1, pull));
    EXPECT_TRUE(peer.closed_by_peer());
  }
  {
    testing::RawPeer peer(port);  // the positive control: the token opens it
    EXPECT_TRUE(peer.hello(TaskId::worker(0), TaskId::ps(0), kToken).ok());
  }
  net::SecurityOptions right;
  right.token = kToken;
  EXPECT_TRUE(Caller(cluster, right).call(TaskId::worker(1), HealthRequest{}).ok());
  std::printf("the training was %s when the last attempt was refused\n",
              train.running() ? "still running" : "already finished");

  ASSERT_TRUE(train.wait(180s)) << "training did not finish";
  ASSERT_EQ(train.exit_code(), 0) << train.err();
  auto report = read_json(dir + "/report.json");
  testing::expect_tutorial_learned(report, train.out());
  EXPECT_EQ(report["stats"]["errors_raised"], 0);
  EXPECT_FALSE(report.contains("error"));
}

TEST(SecurityTest, AMissingOrShortTokenOrPartialTlsIsABadInput) {
  const std::string dir = testing::temp_dir("badsec");
  SecureCluster cluster(1, 1, {});
  const std::string short_token = write_file(dir, "short", "abc\n");
  for (const std::vector<std::string>& bad :
       {std::vector<std::string>{"--token-file", dir + "/missing"}, std::vector<std::string>{"--token-file", short_token},
        std::vector<std::string>{"--tls-cert", short_token}, std::vector<std::string>{"--data-plane-tls", "maybe"}}) {
    std::vector<std::string> args{testing::twinps_binary(), "serve"};
    args.insert(args.end(), bad.begin(), bad.end());
    Process p = Process::start(args, {"TF_CONFIG=" + cluster.tf_config(TaskId::ps(0))});
    ASSERT_TRUE(p.wait(30s));
    EXPECT_EQ(p.exit_code(), 2) << bad[0] << ": " << p.err();
    EXPECT_NE(p.err().find(bad[0]), std::string::npos) << p.err();
  }
}

struct Pki {
  std::string dir, ca, cert, key;
};

Pki make_pki() {
  Pki p;
  p.dir = testing::temp_dir("pki");
  auto ca = net::make_throwaway_ca("twinps test CA");
  EXPECT_TRUE(ca.ok()) << ca.status();
  auto leaf = net::issue_certificate(*ca, {"127.0.0.1", "localhost"});
  EXPECT_TRUE(leaf.ok()) << leaf.status();
  p.ca = write_file(p.dir, "ca.pem", ca->cert_pem);
  p.cert = write_file(p.dir, "tls.crt", leaf->cert_pem);
  p.key = write_file(p.dir, "tls.key", leaf->key_pem);
  return p;
}

net::SecurityOptions tls_options(const Pki& pki, bool with_client_cert) {
  net::SecurityOptions o;
  o.tls = true;
  std::ifstream ca(pki.ca), cert(pki.cert), key(pki.key);
  std::stringstream a, c, k;
  a << ca.rdbuf();
  c << cert.rdbuf();
  k << key.rdbuf();
  o.ca_pem = a.str();
  o.cert_pem = c.str();
  o.key_pem = k.str();
  o.mutual_tls = with_client_cert;
  return o;
}

void train_to_accuracy_one(const std::vector<std::string>& flags, const Pki& pki, bool mutual,
                           const std::string& token = "") {
  SecureCluster cluster(2, 2, flags);
  for (const auto& t : {TaskId::ps(0), TaskId::ps(1), TaskId::worker(0), TaskId::worker(1)})
    ASSERT_TRUE(cluster.start(t));
  Process train = cluster.train({"--report", cluster.dir() + "/report.json"});
  ASSERT_TRUE(train.wait(120s)) << "training did not finish";
  ASSERT_EQ(train.exit_code(), 0) << train.err();
  auto report = read_json(cluster.dir() + "/report.json");
  testing::expect_tutorial_learned(report, train.out());

  // The ports speak TLS: a plaintext caller is not served...
  net::SecurityOptions plain;
  plain.token = token;
  auto r = Caller(cluster, plain).call(TaskId::ps(0), HealthRequest{});
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable) << r.status();
  // ... nor, with mutual TLS, a TLS caller without a client certificate.
  net::SecurityOptions tls = tls_options(pki, mutual);
  tls.token = token;
  if (mutual) {
    net::SecurityOptions no_cert = tls_options(pki, false);
    no_cert.token = token;
    auto refused = Caller(cluster, no_cert).call(TaskId::ps(0), HealthRequest{});
    EXPECT_EQ(refused.status().code(), StatusCode::kUnavailable) << refused.status();
  }
  auto served = Caller(cluster, tls).call(TaskId::ps(0), HealthRequest{});
  EXPECT_TRUE(served.ok()) << served.status();
}

TEST(SecurityTest, TheTutorialTrainsToAccuracyOneOverTls) {
  const Pki pki = make_pki();
  const std::vector<std::string> tls{"--tls-cert", pki.cert, "--tls-key", pki.key, "--tls-ca", pki.ca};
  {
    SCOPED_TRACE("TLS on both planes");
    train_to_accuracy_one(tls, pki, false);
  }
  {
    SCOPED_TRACE("mutual TLS on both planes");
    auto flags = tls;
    flags.push_back("--tls-mutual");
    train_to_accuracy_one(flags, pki, true);
  }
  {
    SCOPED_TRACE("mutual TLS, and the data plane in clear but authenticated");
    auto flags = tls;
    const std::string token_file = write_file(pki.dir, "token", kToken);
    flags.insert(flags.end(), {"--tls-mutual", "--data-plane-tls", "off", "--token-file", token_file});
    train_to_accuracy_one(flags, pki, true, kToken);
  }
}

TEST(SecurityTest, TheDataPlaneSpeaksTlsWhenGrpcDoes) {
  const Pki pki = make_pki();
  SecureCluster cluster(1, 1, {"--tls-cert", pki.cert, "--tls-key", pki.key, "--tls-ca", pki.ca});
  ASSERT_TRUE(cluster.start(TaskId::ps(0)));
  const int port = data_port_of(cluster.server(TaskId::ps(0)));
  ASSERT_GT(port, 0);
  // A plaintext peer's first bytes are not a TLS ClientHello: the server
  // closes the connection without a word (in clear it would have sent its
  // challenge first).
  testing::RawPeer peer(port);
  ASSERT_TRUE(peer.send_bytes(testing::RawPeer::frame(df::Kind::kHello, 0, 0, 0)));
  EXPECT_FALSE(peer.read_frame().has_value());
  EXPECT_TRUE(peer.closed_by_peer());
}

}  // namespace
}  // namespace twinps
