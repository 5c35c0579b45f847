// Real mode end to end: separate `twinps serve` processes and a `twinps train`
// coordinator on 127.0.0.1, with tasks killed by SIGKILL and restarted. Every
// test bounds its waits and kills only the processes it started.
#include <gtest/gtest.h>
#include <signal.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "core/cluster/cluster_spec.h"
#include "core/runtime/block_on.h"
#include "net/grpc_transport.h"
#include "tests/tools/local_cluster.h"
#include "tests/tools/process.h"
#include "tests/tools/tutorial_report.h"

namespace twinps {
namespace {

using namespace std::chrono_literals;
using testing::LocalCluster;
using testing::Process;

int count_of(const std::string& text, const std::string& what) {
  int n = 0;
  for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + what.size())) ++n;
  return n;
}

// The accuracy printed in "Finished epoch E, accuracy is X." (-1 if absent).
double last_epoch_accuracy(const std::string& out, int epoch) {
  const std::string prefix = "Finished epoch " + std::to_string(epoch) + ", accuracy is ";
  const auto at = out.rfind(prefix);
  return at == std::string::npos ? -1.0 : std::stod(out.substr(at + prefix.size()));
}

nlohmann::json read_json(const std::string& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in);
}

TEST(RealClusterTest, TutorialTrainsToAccuracyOneAsSeparateProcesses) {
  LocalCluster cluster(3, 2);
  ASSERT_TRUE(cluster.start_all());
  const std::string dir = testing::temp_dir("separate");
  Process train = cluster.train({"--report", dir + "/report.json"});
  ASSERT_TRUE(train.wait(120s)) << "training did not finish";
  ASSERT_EQ(train.exit_code(), 0) << train.err();
  auto report = read_json(dir + "/report.json");
  ASSERT_EQ(report["epochs"].size(), 4u);
  testing::expect_tutorial_learned(report, train.out());
  EXPECT_NE(train.out().find("Finished epoch 3, accuracy is "), std::string::npos) << train.out();
}

TEST(RealClusterTest, TutorialTrainsToAccuracyOneInProcess) {
  const std::string dir = testing::temp_dir("inprocess");
  Process train = Process::start({testing::twinps_binary(), "train", "--in-process", "--report", dir + "/r.json"});
  ASSERT_TRUE(train.wait(120s));
  ASSERT_EQ(train.exit_code(), 0) << train.err();
  testing::expect_tutorial_learned(read_json(dir + "/r.json"), train.out());
}

TEST(RealClusterTest, TutorialTrainsOnEveryDataPlaneSetting) {
  for (const char* plane : {"grpc", "tcp-all"}) {
    SCOPED_TRACE(plane);
    const std::string dir = testing::temp_dir(std::string("plane-") + plane);
    Process train = Process::start({testing::twinps_binary(), "train", "--in-process", "--data-plane", plane,
                                    "--report", dir + "/r.json"});
    ASSERT_TRUE(train.wait(120s));
    ASSERT_EQ(train.exit_code(), 0) << train.err();
    testing::expect_tutorial_learned(read_json(dir + "/r.json"), train.out());
  }
  Process bad = Process::start({testing::twinps_binary(), "train", "--in-process", "--data-plane", "udp"});
  ASSERT_TRUE(bad.wait(30s));
  EXPECT_EQ(bad.exit_code(), 2);
  EXPECT_NE(bad.err().find("--data-plane must be"), std::string::npos) << bad.err();
}

TEST(RealClusterTest, TasksWithoutADataPlaneServeACoordinatorThatHasOne) {
  // Parameter servers and workers on gRPC alone; the coordinator (and the
  // workers' calls to the ps) find no data plane and fall back to gRPC.
  LocalCluster cluster(2, 2);
  for (const auto& t : {TaskId::ps(0), TaskId::ps(1), TaskId::worker(0), TaskId::worker(1)})
    ASSERT_TRUE(cluster.start(t, {"--data-plane", "grpc"}));
  const std::string dir = testing::temp_dir("mixed");
  Process train = cluster.train({"--report", dir + "/report.json"});
  ASSERT_TRUE(train.wait(120s)) << "training did not finish";
  ASSERT_EQ(train.exit_code(), 0) << train.err();
  testing::expect_tutorial_learned(read_json(dir + "/report.json"), train.out());
}

TEST(RealClusterTest, KilledWorkerIsRetriedElsewhereAndRejoinsWithItsDatasetRebuilt) {
  LocalCluster cluster(3, 2);
  cluster.reserve_port(TaskId::worker(1));  // restarted at the same address below
  // Slow steps (0.4 s each) keep a closure running on worker 1 when the kill
  // lands; at debug level a worker numbers the steps it begins.
  ASSERT_TRUE(cluster.start_all({"--inject-step-delay", "0.4"}, {"TWINPS_LOG_LEVEL=debug"}));
  const std::string dir = testing::temp_dir("workerkill");
  Process train = cluster.train({"--epochs", "8", "--steps-per-epoch", "6", "--report", dir + "/report.json",
                                 "--heartbeat", "0.2"});
  ASSERT_TRUE(train.wait_for_output("Finished epoch 0", 60s)) << train.err();
  Process& worker1 = cluster.server(TaskId::worker(1));
  const std::string next_step = "delayed step " + std::to_string(count_of(worker1.err(), "delayed step ") + 1) + " begins";
  ASSERT_TRUE(worker1.wait_for_output(next_step, 60s)) << "worker 1 runs a step after epoch 0: " << worker1.err();
  worker1.kill(SIGKILL);
  ASSERT_TRUE(train.wait_for_output("Finished epoch 1", 60s)) << "training goes on without worker 1";
  ASSERT_TRUE(cluster.start(TaskId::worker(1), {"--inject-step-delay", "0.4"}));  // same address: it rejoins
  ASSERT_TRUE(train.wait(120s));
  ASSERT_EQ(train.exit_code(), 0) << train.err();

  auto report = read_json(dir + "/report.json");
  const auto& stats = report["stats"];
  EXPECT_GE(stats["worker_failures"].get<int>(), 1);
  EXPECT_GE(stats["retried"].get<int>(), 1) << "the closure running on worker 1 ran again elsewhere";
  EXPECT_EQ(stats["completed"], stats["scheduled"]) << "every RemoteValue resolved";
  EXPECT_EQ(stats["failed"], 0);
  EXPECT_GE(stats["worker_recoveries"].get<int>(), 1);
  testing::expect_tutorial_learned(report, train.out());
  // The chief said both on stderr as they happened.
  EXPECT_NE(train.err().find("worker:1 failed ("), std::string::npos) << train.err();
  EXPECT_NE(train.err().find("worker:1 rejoined (restarted)"), std::string::npos) << train.err();

  // Worker 1's history: its dataset and iterator (the first two resources it
  // built) are built again after it recovered, before any closure runs on it,
  // and then it runs closures again.
  std::vector<std::pair<std::string, std::uint64_t>> history;
  for (const auto& d : report["dispatch_log"])
    if (d["worker"] == 1) history.emplace_back(d["kind"], d["id"]);
  std::vector<std::uint64_t> original;
  for (const auto& [kind, id] : history)
    if (kind == "resource" && original.size() < 2) original.push_back(id);
  ASSERT_EQ(original.size(), 2u);
  auto recovered = std::find_if(history.begin(), history.end(), [](const auto& h) { return h.first == "worker_recovered"; });
  ASSERT_NE(recovered, history.end());
  ASSERT_GE(history.end() - recovered, 3);
  EXPECT_EQ(*(recovered + 1), std::make_pair(std::string("resource"), original[0]));
  EXPECT_EQ(*(recovered + 2), std::make_pair(std::string("resource"), original[1]));
  auto next_closure = std::find_if(recovered, history.end(), [](const auto& h) { return h.first == "closure"; });
  EXPECT_NE(next_closure, history.end()) << "worker 1 receives closures again";
  EXPECT_GT(next_closure - recovered, 2) << "no closure before the rebuild";
}

TEST(RealClusterTest, KilledParameterServerFailsTheRunAndARestartResumesFromTheCheckpoint) {
  LocalCluster cluster(3, 2);
  cluster.reserve_port(TaskId::ps(0));  // restarted at the same address below
  ASSERT_TRUE(cluster.start_all({"--inject-step-delay", "0.2"}));
  const std::string dir = testing::temp_dir("pskill");
  const std::string ckpt = dir + "/ckpt";
  Process first = cluster.train({"--checkpoint-dir", ckpt, "--rpc-timeout", "5"});
  ASSERT_TRUE(first.wait_for_output("Saved checkpoint ckpt-10", 60s)) << first.err();
  cluster.server(TaskId::ps(0)).kill(SIGKILL);
  // A hang guard, not a timing assertion: the coordinator raises once the
  // 5-second rpc timeout passes, and the machine may be loaded.
  ASSERT_TRUE(first.wait(60s)) << "the coordinator must not hang on a dead ps";
  EXPECT_NE(first.exit_code(), 0);
  EXPECT_NE(first.err().find("UNAVAILABLE"), std::string::npos) << first.err();
  EXPECT_NE(first.err().find("ps:0"), std::string::npos) << first.err();

  ASSERT_TRUE(cluster.start(TaskId::ps(0)));
  Process second = cluster.train({"--checkpoint-dir", ckpt, "--rpc-timeout", "5"});
  ASSERT_TRUE(second.wait(120s));
  ASSERT_EQ(second.exit_code(), 0) << second.err();
  EXPECT_NE(second.out().find("Restored checkpoint ckpt-10 (iterations 10): resuming at epoch 2"), std::string::npos)
      << second.out();
  EXPECT_EQ(second.out().find("Finished epoch 1,"), std::string::npos) << "epochs before the checkpoint do not re-run";
  // Asynchronous updates make the last epoch's training accuracy vary
  // between runs: the floor of expect_tutorial_learned (tutorial_report.h).
  EXPECT_GE(last_epoch_accuracy(second.out(), 3), 0.8) << second.out();
}

TEST(RealClusterTest, CorruptNewestCheckpointIsRefusedAndThePreviousOneUsed) {
  LocalCluster cluster(2, 2);
  ASSERT_TRUE(cluster.start_all());
  const std::string ckpt = testing::temp_dir("corrupt") + "/ckpt";
  Process first = cluster.train({"--checkpoint-dir", ckpt, "--epochs", "3"});
  ASSERT_TRUE(first.wait(60s));
  ASSERT_EQ(first.exit_code(), 0) << first.err();
  {
    std::fstream f(ckpt + "/ckpt-15", std::ios::in | std::ios::out | std::ios::binary);
    ASSERT_TRUE(f.good());
    f.seekp(100);
    f.put('\x5a');
  }
  Process second = cluster.train({"--checkpoint-dir", ckpt, "--epochs", "4"});
  ASSERT_TRUE(second.wait(60s));
  ASSERT_EQ(second.exit_code(), 0) << second.err();
  EXPECT_NE(second.err().find("refused checkpoint ckpt-15"), std::string::npos) << second.err();
  EXPECT_NE(second.err().find("DATA_LOSS"), std::string::npos) << second.err();
  EXPECT_NE(second.out().find("Restored checkpoint ckpt-10"), std::string::npos) << second.out();
}

TEST(RealClusterTest, CheckpointsWithinEpochsEveryNStepsAndARestartResumesAtTheirEpoch) {
  const std::string ckpt = testing::temp_dir("every-steps") + "/ckpt";
  Process first = Process::start({testing::twinps_binary(), "train", "--in-process", "--checkpoint-dir", ckpt,
                                  "--epochs", "2", "--checkpoint-every", "100", "--checkpoint-every-steps", "3"});
  ASSERT_TRUE(first.wait(60s));
  ASSERT_EQ(first.exit_code(), 0) << first.err();
  // Joined before each save, so the saved iterations are the steps scheduled.
  for (const char* name : {"ckpt-3", "ckpt-6", "ckpt-9", "ckpt-10"})
    EXPECT_NE(first.out().find(std::string("Saved checkpoint ") + name + "\n"), std::string::npos) << first.out();
  std::filesystem::remove(ckpt + "/ckpt-10");
  Process second = Process::start({testing::twinps_binary(), "train", "--in-process", "--checkpoint-dir", ckpt,
                                   "--epochs", "2", "--checkpoint-every", "100"});
  ASSERT_TRUE(second.wait(60s));
  ASSERT_EQ(second.exit_code(), 0) << second.err();
  EXPECT_NE(second.out().find("Restored checkpoint ckpt-9 (iterations 9): resuming at epoch 1"), std::string::npos)
      << second.out();
}

TEST(RealClusterTest, MissingTaskAtStartFailsFastNamingIt) {
  LocalCluster cluster(2, 1);
  cluster.reserve_port(TaskId::worker(1));  // worker 1 never starts: nothing listens at its address
  ASSERT_TRUE(cluster.start(TaskId::ps(0)));
  ASSERT_TRUE(cluster.start(TaskId::worker(0)));
  Process train = cluster.train({"--connect-timeout", "2"});
  ASSERT_TRUE(train.wait(60s)) << "must not stall past its 2-second connect timeout";
  EXPECT_NE(train.exit_code(), 0);
  EXPECT_NE(train.err().find("worker:1"), std::string::npos) << train.err();
  EXPECT_EQ(train.err().find("worker:0 ("), std::string::npos) << "only the missing task is named: " << train.err();
}

TEST(RealClusterTest, SideCarEvaluatorFollowsCheckpoints) {
  const std::string ckpt = testing::temp_dir("sidecar") + "/ckpt";
  Process eval = Process::start({testing::twinps_binary(), "eval", "--checkpoint-dir", ckpt, "--timeout", "60"});
  Process train = Process::start({testing::twinps_binary(), "train", "--in-process", "--checkpoint-dir", ckpt});
  ASSERT_TRUE(train.wait(60s));
  ASSERT_EQ(train.exit_code(), 0) << train.err();
  ASSERT_TRUE(eval.wait(60s));
  EXPECT_EQ(eval.exit_code(), 0) << eval.err();
  EXPECT_NE(eval.out().find("(epoch 3, iterations 20): accuracy 1.000000"), std::string::npos) << eval.out();
}

// ---- issue 9

// A copied checkpoint whose name claims more than its content (ckpt-10 copied
// to ckpt-9223372036854775807) is refused naming both, the real newest one is
// restored, and keep-N leaves the real ones alone (point 2).
TEST(RealClusterTest, ACheckpointNamedForAnotherStepIsRefusedAndNeverCountedForKeepN) {
  const std::string ckpt = testing::temp_dir("misnamed") + "/ckpt";
  Process first = Process::start({testing::twinps_binary(), "train", "--in-memory", "--checkpoint-dir", ckpt});
  ASSERT_TRUE(first.wait(60s));
  ASSERT_EQ(first.exit_code(), 0) << first.err();
  std::filesystem::copy_file(ckpt + "/ckpt-10", ckpt + "/ckpt-9223372036854775807");
  std::filesystem::copy_file(ckpt + "/ckpt-15", ckpt + "/ckpt-25");
  Process second = Process::start(
      {testing::twinps_binary(), "train", "--in-memory", "--checkpoint-dir", ckpt, "--epochs", "6"});
  ASSERT_TRUE(second.wait(60s));
  ASSERT_EQ(second.exit_code(), 0) << second.err();
  EXPECT_NE(second.err().find("refused checkpoint ckpt-9223372036854775807"), std::string::npos) << second.err();
  EXPECT_NE(second.err().find("named for step 9223372036854775807 but records step 10"), std::string::npos)
      << second.err();
  EXPECT_NE(second.err().find("named for step 25 but records step 15"), std::string::npos) << second.err();
  EXPECT_NE(second.out().find("Restored checkpoint ckpt-20 (iterations 20): resuming at epoch 4"), std::string::npos)
      << second.out();
  // keep 3 of the verified ones (20, 25 — saved for real, replacing the copy — 30); the misnamed copy stays.
  EXPECT_FALSE(std::filesystem::exists(ckpt + "/ckpt-15"));
  for (const char* kept : {"ckpt-20", "ckpt-25", "ckpt-30", "ckpt-9223372036854775807"})
    EXPECT_TRUE(std::filesystem::exists(ckpt + "/" + kept)) << kept;
}

// A parameter server that hangs (SIGSTOP) is found by the chief's heartbeats
// and raised as UNAVAILABLE naming it, long before the 600 s deadlines its
// calls were given (point 9).
TEST(RealClusterTest, AHungParameterServerIsFoundByHeartbeatsAndRaisedNamingIt) {
  LocalCluster cluster(2, 2);
  for (int i = 0; i < 2; ++i) ASSERT_TRUE(cluster.start(TaskId::ps(i)));
  for (int i = 0; i < 2; ++i)
    ASSERT_TRUE(cluster.start(TaskId::worker(i), {"--inject-step-delay", "0.05", "--ps-call-timeout", "600"}));
  Process train = cluster.train({"--epochs", "1000", "--rpc-timeout", "600", "--heartbeat", "1"});
  ASSERT_TRUE(train.wait_for_output("Finished epoch 1,", 60s)) << train.err();
  cluster.server(TaskId::ps(0)).kill(SIGSTOP);
  const bool ended = train.wait(180s);
  cluster.server(TaskId::ps(0)).kill(SIGCONT);
  ASSERT_TRUE(ended) << "the chief waited on the hung ps";
  EXPECT_EQ(train.exit_code(), 1);
  EXPECT_NE(train.err().find("UNAVAILABLE"), std::string::npos) << train.err();
  EXPECT_NE(train.err().find("ps:0 did not answer 3 health checks in a row"), std::string::npos) << train.err();
}

// Every task of a multi-process run writes its own trace (the chief its own
// spans too), and `twinps trace merge` puts them on one timeline with one
// process per task; the clocks line up: every worker step lies between the
// chief forming the cluster and its last join returning (point 4, and point 5:
// every file parses as JSON).
TEST(RealClusterTest, EveryTaskWritesATraceAndMergedTheyShareOneTimeline) {
  LocalCluster cluster(2, 1);
  const std::string dir = testing::temp_dir("traces");
  const std::vector<TaskId> servers{TaskId::ps(0), TaskId::worker(0), TaskId::worker(1)};
  std::vector<std::string> files{dir + "/chief.json"};
  for (const auto& t : servers) {
    files.push_back(dir + "/" + t.short_name() + ".json");
    ASSERT_TRUE(cluster.start(t, {"--trace", files.back()}));
  }
  Process train = cluster.train({"--trace", files.front(), "--epochs", "2"});
  ASSERT_TRUE(train.wait(120s));
  ASSERT_EQ(train.exit_code(), 0) << train.err();
  for (const auto& t : servers) cluster.server(t).stop();  // SIGTERM: each closes its trace

  for (const auto& f : files) {
    nlohmann::json doc;
    ASSERT_NO_THROW(doc = read_json(f)) << f;
    int own = 0;
    for (const auto& e : doc["traceEvents"]) own += e["ph"] != "M";
    EXPECT_GT(own, 0) << f << " has no event";
    EXPECT_TRUE(doc["otherData"].contains("unix_origin_us")) << f;
  }
  Process merge = Process::start({testing::twinps_binary(), "trace", "merge", dir + "/merged.json", files[0], files[1],
                                  files[2], files[3]});
  ASSERT_TRUE(merge.wait(60s));
  ASSERT_EQ(merge.exit_code(), 0) << merge.err();
  EXPECT_NE(merge.out().find("clocks aligned on one machine's steady clock"), std::string::npos) << merge.out();
  auto merged = read_json(dir + "/merged.json");
  std::map<int, std::string> process;
  for (const auto& e : merged["traceEvents"])
    if (e["ph"] == "M" && e["name"] == "process_name") process[e["pid"].get<int>()] = e["args"]["name"];
  std::set<std::string> tasks;
  for (const auto& [pid, name] : process) tasks.insert(name);
  EXPECT_EQ(tasks, (std::set<std::string>{"chief:0", "ps:0", "worker:0", "worker:1"}));

  double formed = -1, last_join_end = -1;
  std::vector<std::pair<double, double>> steps;
  for (const auto& e : merged["traceEvents"]) {
    if (e["ph"] != "X") continue;
    const double ts = e["ts"].get<double>(), end = ts + e["dur"].get<double>();
    const std::string& task = process[e["pid"].get<int>()];
    if (task == "chief:0" && e["name"] == "form cluster") formed = end;
    if (task == "chief:0" && e["name"] == "join") last_join_end = std::max(last_join_end, end);
    if (task.rfind("worker:", 0) == 0 && e["cat"] == "worker" && e["name"] == "training/train_step")
      steps.emplace_back(ts, end);
  }
  ASSERT_GT(formed, 0);
  ASSERT_GT(last_join_end, formed);
  ASSERT_GE(steps.size(), 10u);
  for (const auto& [start, end] : steps) {
    EXPECT_GE(start, formed - 1) << "a worker step before the cluster formed: clocks not aligned";
    EXPECT_LE(end, last_join_end + 1) << "a worker step after the last join: clocks not aligned";
  }
}

// The in-memory and in-process runtimes write valid JSON traces too, with
// every task's events on the one shared clock (point 5).
TEST(RealClusterTest, TrainTracesParseInEveryRuntime) {
  const std::string dir = testing::temp_dir("train-traces");
  for (const char* mode : {"--in-memory", "--in-process"}) {
    SCOPED_TRACE(mode);
    const std::string path = dir + "/" + (mode + 2) + ".json";
    Process train = Process::start({testing::twinps_binary(), "train", mode, "--epochs", "2", "--trace", path});
    ASSERT_TRUE(train.wait(120s));
    ASSERT_EQ(train.exit_code(), 0) << train.err();
    nlohmann::json doc;
    ASSERT_NO_THROW(doc = read_json(path));
    std::set<std::string> tracks;
    for (const auto& e : doc["traceEvents"])
      if (e["ph"] == "M" && e["name"] == "thread_name") tracks.insert(e["args"]["name"]);
    EXPECT_EQ(tracks, (std::set<std::string>{"chief:0", "ps:0", "ps:1", "worker:0", "worker:1", "worker:2"}));
  }
}

// ---- a parameter server answering malformed requests

struct Client {
  explicit Client(const std::string& ps_address)
      : transport(*net::GrpcTransport::create(TaskId::chief(), executor, [&] {
          net::GrpcTransportOptions o;
          o.resolve = [ps_address](const TaskId&) { return ps_address; };
          o.max_message_bytes = 64 << 20;
          return o;
        }())) {}
  StatusOr<Response> call(Request r) {
    auto f = call_async(executor, *transport, TaskId::ps(0), std::move(r),
                        CallOptions{executor.now() + 10 * kSecond, {}, ++id});
    auto out = block_on(executor, [](Future<StatusOr<Response>> f) -> Task<StatusOr<Response>> {
      co_return co_await f;
    }(std::move(f)));
    return out ? *out : StatusOr<Response>(absl::DeadlineExceededError("no answer"));
  }
  net::AsioExecutor executor;
  std::unique_ptr<net::GrpcTransport> transport;
  RequestId id = 0;
};

TEST(RealClusterTest, MalformedRequestsAreRefusedAndTheServerKeepsServing) {
  LocalCluster cluster(1, 1);
  ASSERT_TRUE(cluster.start(TaskId::ps(0), {"--max-message-mb", "1"}));
  Client client(cluster.address(TaskId::ps(0)));

  CreateShardsRequest create;
  ShardState shard;
  shard.spec = ShardSpec{7, "embedding", VariableKind::kTrainable, 4, 2};
  shard.value = Matrix::Zero(4, 2);
  create.shards.push_back(shard);
  ASSERT_TRUE(client.call(create).ok());

  auto expect_invalid = [&](Request r, const char* what) {
    auto reply = client.call(std::move(r));
    EXPECT_EQ(reply.status().code(), StatusCode::kInvalidArgument) << what << ": " << describe(reply.status());
  };
  expect_invalid(PullRequest{{PullItem{99, true, {}}}}, "unknown variable");
  {
    PushRequest push;
    Update u;
    u.shard = 7;
    u.values = Matrix::Ones(3, 2);
    push.updates.push_back(u);
    expect_invalid(push, "wrong shape");
  }
  expect_invalid(PullRequest{{PullItem{7, false, {-1}}}}, "negative row id");
  expect_invalid(PullRequest{{PullItem{7, false, {4}}}}, "row id out of range");
  {
    PushRequest big;
    Update u;
    u.shard = 7;
    u.sparse = true;
    u.rows.assign(200000, 0);
    u.values = Matrix::Ones(200000, 2);  // 1.6 MB of values: over the server's 1 MiB limit
    big.updates.push_back(u);
    auto reply = client.call(big);
    EXPECT_TRUE(reply.status().code() == StatusCode::kInvalidArgument ||
                reply.status().code() == StatusCode::kResourceExhausted)
        << describe(reply.status());
  }
  auto health = client.call(HealthRequest{});
  EXPECT_TRUE(health.ok()) << "the server still serves: " << describe(health.status());
  EXPECT_TRUE(cluster.server(TaskId::ps(0)).running());
}

}  // namespace
}  // namespace twinps
