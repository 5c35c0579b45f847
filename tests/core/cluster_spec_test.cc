#include "core/cluster/cluster_spec.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace twinps {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

// The tutorial's TF_CONFIG for worker 1 of 3 workers, 2 ps and a chief.
constexpr char kTutorialWorker[] = R"({
  "cluster": {
    "worker": ["host1:2222", "host2:2222", "host3:2222"],
    "ps": ["host4:2222", "host5:2222"],
    "chief": ["host6:2222"]
  },
  "task": {"type": "worker", "index": 1}
})";

TEST(TfConfigTest, ParsesTheTutorialWorkerConfig) {
  auto config = parse_tf_config(kTutorialWorker);
  ASSERT_TRUE(config.ok()) << config.status();
  const ClusterSpec& c = config->cluster;
  EXPECT_EQ(c.num_workers(), 3);
  EXPECT_EQ(c.num_ps(), 2);
  EXPECT_TRUE(c.has_chief());
  EXPECT_EQ(c.num_tasks(Job::kEvaluator), 0);
  EXPECT_EQ(config->task, TaskId::worker(1));
  EXPECT_EQ(*c.address(TaskId::worker(1)), "host2:2222");
  EXPECT_EQ(*c.address(TaskId::ps(1)), "host5:2222");
  EXPECT_EQ(*c.address(TaskId::chief()), "host6:2222");
  EXPECT_EQ(c.tasks(Job::kPs), (std::vector<TaskId>{TaskId::ps(0), TaskId::ps(1)}));
  EXPECT_TRUE(c.tasks(Job::kEvaluator).empty());
  EXPECT_TRUE(validate_for_training(c).ok());
}

TEST(TfConfigTest, ParsesPsAndChiefTasks) {
  const std::string cluster = R"("cluster": {"worker": ["w:1"], "ps": ["p:1", "p:2"], "chief": ["c:1"]})";
  auto ps = parse_tf_config("{" + cluster + R"(, "task": {"type": "ps", "index": 1}})");
  ASSERT_TRUE(ps.ok()) << ps.status();
  EXPECT_EQ(ps->task, TaskId::ps(1));
  auto chief = parse_tf_config("{" + cluster + R"(, "task": {"type": "chief", "index": 0}})");
  ASSERT_TRUE(chief.ok()) << chief.status();
  EXPECT_EQ(chief->task, TaskId::chief());
}

TEST(TfConfigTest, EvaluatorListedInItsOwnCluster) {
  auto config = parse_tf_config(R"({"cluster": {"evaluator": ["host7:2222"]},
                                    "task": {"type": "evaluator", "index": 0}})");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->task, TaskId::evaluator(0));
  EXPECT_EQ(*config->cluster.address(TaskId::evaluator(0)), "host7:2222");
}

TEST(TfConfigTest, EvaluatorMayLeaveOutTheCluster) {
  auto config = parse_tf_config(R"({"task": {"type": "evaluator", "index": 0}})");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->task, TaskId::evaluator(0));
  EXPECT_TRUE(config->cluster.empty());
}

TEST(TfConfigTest, EvaluatorNeedNotBeInTheTrainingCluster) {
  auto config = parse_tf_config(R"({"cluster": {"worker": ["w:1"], "ps": ["p:1"]},
                                    "task": {"type": "evaluator", "index": 0}})");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->task, TaskId::evaluator(0));
}

TEST(TfConfigTest, ClusterWithoutTask) {
  auto config = parse_tf_config(R"({"cluster": {"worker": ["w:1"], "ps": ["p:1"]}})");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_FALSE(config->task.has_value());
}

TEST(TfConfigTest, AcceptsRpcLayerGrpcEnvironmentAndIpv6) {
  auto config = parse_tf_config(R"({"cluster": {"worker": ["[::1]:2222"], "ps": ["10.0.0.5:2222"]},
                                    "task": {"type": "worker", "index": 0},
                                    "rpc_layer": "grpc", "environment": "cloud"})");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(*config->cluster.address(TaskId::worker(0)), "[::1]:2222");
}

TEST(TfConfigTest, ToJsonRoundTrips) {
  auto config = parse_tf_config(kTutorialWorker);
  ASSERT_TRUE(config.ok());
  EXPECT_EQ(config->cluster.to_json(),
            R"({"chief":["host6:2222"],"worker":["host1:2222","host2:2222","host3:2222"],)"
            R"("ps":["host4:2222","host5:2222"]})");
  auto again = parse_tf_config(config->to_json());
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(*again, *config);

  TfConfig evaluator{ClusterSpec{}, TaskId::evaluator(0)};
  EXPECT_EQ(evaluator.to_json(), R"({"task":{"type":"evaluator","index":0}})");
  EXPECT_EQ(*parse_tf_config(evaluator.to_json()), evaluator);
}

TEST(TfConfigTest, SourceNamesTheOrigin) {
  auto config = parse_tf_config("[]", "/etc/twinps/tf_config.json");
  EXPECT_EQ(config.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(config.status().message()), StartsWith("/etc/twinps/tf_config.json: "));
}

// --- Malformed input: every case is INVALID_ARGUMENT naming the field. -------

struct BadConfig {
  const char* name;
  std::string json;
  std::string expected;  // a substring of the message
};

class MalformedTfConfigTest : public ::testing::TestWithParam<BadConfig> {};

TEST_P(MalformedTfConfigTest, IsInvalidArgumentNamingTheField) {
  auto config = parse_tf_config(GetParam().json);
  ASSERT_FALSE(config.ok()) << "accepted: " << GetParam().json;
  EXPECT_EQ(config.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(config.status().message()), StartsWith("TF_CONFIG: "));
  EXPECT_THAT(std::string(config.status().message()), HasSubstr(GetParam().expected));
}

std::string with_cluster(const std::string& cluster, const std::string& task = R"({"type": "worker", "index": 0})") {
  return R"({"cluster": )" + cluster + R"(, "task": )" + task + "}";
}
const std::string kGoodCluster = R"({"worker": ["w0:1", "w1:1", "w2:1"], "ps": ["p0:1"]})";

const BadConfig kBadConfigs[] = {
    {"Empty", "", "is empty"},
    {"Whitespace", "  \n ", "is empty"},
    {"NotJson", R"({"cluster": {x}})", "not valid JSON (byte 14): "},
    {"TrailingGarbage", with_cluster(kGoodCluster) + " }", "not valid JSON (byte"},
    {"TopLevelArray", "[1, 2]", "must be a JSON object with \"cluster\" and \"task\", got array"},
    {"UnknownTopLevelKey", R"({"cluster": {"worker": ["w:1"]}, "tsk": {}})", "unknown key \"tsk\" at the top level"},
    {"DuplicateTopLevelKey", R"({"task": {"type": "ps", "index": 0}, "task": {"type": "ps", "index": 0}})",
     "key \"task\" appears more than once in the top-level object"},
    {"DuplicateJobKey", R"({"cluster": {"worker": ["a:1"], "worker": ["b:1"]}})",
     "key \"worker\" appears more than once in \"cluster\""},
    {"TooDeep", with_cluster(R"({"worker": )" + std::string(100, '[') + std::string(100, ']') + "}"),
     "nested deeper than 16 levels at \"cluster.worker"},
    {"VeryDeep", std::string(200000, '['), "nested deeper than 16 levels"},
    {"ClusterNotObject", with_cluster(R"(["w:1"])"), "\"cluster\" must be an object"},
    {"UnknownJob", with_cluster(R"({"master": ["m:1"], "worker": ["w:1"]})"),
     "cluster has unknown job \"master\" (known jobs: chief, worker, ps, evaluator)"},
    {"JobNotList", with_cluster(R"({"worker": "w:1"})"), "cluster.worker must be a list of \"host:port\" strings, got string"},
    {"JobAsSparseDict", with_cluster(R"({"worker": {"0": "w:1"}})"), "cluster.worker must be a list"},
    {"EmptyJobList", with_cluster(R"({"worker": ["w:1"], "ps": []})"), "cluster.ps is an empty list"},
    {"AddressNotString", with_cluster(R"({"worker": ["w:1", 2222]})"),
     "cluster.worker[1] must be a \"host:port\" string, got number 2222"},
    {"EmptyAddress", with_cluster(R"({"worker": [""]})"), "cluster.worker[0] is empty; expected \"host:port\""},
    {"MissingPort", with_cluster(R"({"worker": ["host1"]})"), "cluster.worker[0] \"host1\" has no port"},
    {"EmptyPort", with_cluster(R"({"worker": ["host1:"]})"), "cluster.worker[0] \"host1:\" has no port"},
    {"MissingHost", with_cluster(R"({"worker": [":2222"]})"), "cluster.worker[0] \":2222\" has no host"},
    {"NonNumericPort", with_cluster(R"({"worker": ["w:1"], "ps": ["h:port"]})"),
     "cluster.ps[0] \"h:port\" has a port that is not a number"},
    {"NegativePort", with_cluster(R"({"worker": ["w:-1"]})"), "cluster.worker[0] \"w:-1\" has a port that is not a number"},
    {"PortTooLarge", with_cluster(R"({"worker": ["w:65536"]})"), "cluster.worker[0] \"w:65536\" has port 65536, outside 1..65535"},
    {"PortZero", with_cluster(R"({"worker": ["w:0"]})"), "has port 0, outside 1..65535"},
    {"HugePort", with_cluster(R"({"worker": ["w:99999999999999999999999"]})"), "outside 1..65535"},
    {"SpaceInAddress", with_cluster(R"({"worker": ["w :1"]})"), "cluster.worker[0] \"w :1\" contains whitespace"},
    {"SchemeInAddress", with_cluster(R"({"worker": ["grpc://w:1"]})"), "cluster.worker[0] \"grpc://w:1\" has a scheme"},
    {"UnbracketedIpv6", with_cluster(R"({"worker": ["::1:2222"]})"), "cluster.worker[0] \"::1:2222\" has more than one ':'"},
    {"BadIpv6Host", with_cluster(R"({"worker": ["[::g]:1"]})"), "cluster.worker[0] \"[::g]:1\" has an invalid IPv6 host"},
    {"Ipv6WithoutPort", with_cluster(R"({"worker": ["[::1]"]})"), "cluster.worker[0] \"[::1]\" has no port"},
    {"NonAsciiHost", with_cluster(R"({"worker": ["\u00e9:1"]})"), "has a non-ASCII host"},
    {"BadHostCharacter", with_cluster(R"({"worker": ["w/x:1"]})"), "cluster.worker[0] \"w/x:1\" has an invalid character"},
    {"DuplicateAddressAcrossJobs", with_cluster(R"({"worker": ["h:2", "h:3"], "ps": ["h:1", "h:2"]})"),
     "cluster.ps[1] \"h:2\" duplicates cluster.worker[0]"},
    {"DuplicateAddressWithinJob", with_cluster(R"({"worker": ["h:1", "h:1"]})"),
     "cluster.worker[1] \"h:1\" duplicates cluster.worker[0]"},
    {"TwoChiefs", with_cluster(R"({"worker": ["w:1"], "chief": ["c:1", "c:2"]})"),
     "cluster.chief has 2 tasks; at most one is allowed"},
    {"TwoEvaluators", with_cluster(R"({"worker": ["w:1"], "evaluator": ["e:1", "e:2"]})"),
     "cluster.evaluator has 2 tasks; at most one is allowed"},
    {"TaskNotObject", with_cluster(kGoodCluster, R"("worker")"), "\"task\" must be an object"},
    {"TaskUnknownKey", with_cluster(kGoodCluster, R"({"type": "worker", "index": 0, "id": 0})"),
     "\"task\" has unknown key \"id\""},
    {"MissingTaskType", with_cluster(kGoodCluster, R"({"index": 0})"), "\"task.type\" is missing"},
    {"TaskTypeNotString", with_cluster(kGoodCluster, R"({"type": 1, "index": 0})"),
     "\"task.type\" must be a string, got number 1"},
    {"UnknownTaskType", with_cluster(kGoodCluster, R"({"type": "master", "index": 0})"),
     "\"task.type\" is \"master\", not one of chief, worker, ps, evaluator"},
    {"MissingTaskIndex", with_cluster(kGoodCluster, R"({"type": "worker"})"), "\"task.index\" is missing"},
    {"TaskIndexString", with_cluster(kGoodCluster, R"({"type": "worker", "index": "1"})"),
     "\"task.index\" must be a non-negative integer, got string \"1\""},
    {"TaskIndexFloat", with_cluster(kGoodCluster, R"({"type": "worker", "index": 1.5})"),
     "\"task.index\" must be a non-negative integer, got number 1.5"},
    {"TaskIndexNull", with_cluster(kGoodCluster, R"({"type": "worker", "index": null})"),
     "\"task.index\" must be a non-negative integer, got null"},
    {"NegativeTaskIndex", with_cluster(kGoodCluster, R"({"type": "worker", "index": -1})"),
     "\"task.index\" is -1; it must not be negative"},
    {"TaskIndexOutOfRange", with_cluster(kGoodCluster, R"({"type": "worker", "index": 3})"),
     "TF_CONFIG: \"task.index\" is 3 but job \"worker\" has 3 tasks (0..2)"},
    {"TaskIndexOutOfRangeSingle", with_cluster(kGoodCluster, R"({"type": "ps", "index": 1})"),
     "\"task.index\" is 1 but job \"ps\" has 1 task (0)"},
    {"HugeTaskIndex", with_cluster(kGoodCluster, R"({"type": "worker", "index": 99999999999999})"),
     "\"task.index\" is 99999999999999"},
    {"TaskTypeNotInCluster", with_cluster(kGoodCluster, R"({"type": "chief", "index": 0})"),
     "\"task.type\" is \"chief\" but the cluster has no \"chief\" job"},
    {"EvaluatorIndexOutOfRange", with_cluster(R"({"evaluator": ["e:1"]})", R"({"type": "evaluator", "index": 1})"),
     "\"task.index\" is 1 but job \"evaluator\" has 1 task (0)"},
    {"WorkerWithoutCluster", R"({"task": {"type": "worker", "index": 0}})",
     "\"cluster\" is missing; only an evaluator task may leave it out"},
    {"NeitherClusterNorTask", "{}", "has neither \"cluster\" nor \"task\""},
    {"RpcLayerNotGrpc", R"({"cluster": {"worker": ["w:1"]}, "rpc_layer": "grpc+verbs"})",
     "\"rpc_layer\" is string \"grpc+verbs\"; twinps only speaks \"grpc\""},
    {"EnvironmentNotString", R"({"cluster": {"worker": ["w:1"]}, "environment": 1})",
     "\"environment\" must be a string, got number 1"},
};

INSTANTIATE_TEST_SUITE_P(Cases, MalformedTfConfigTest, ::testing::ValuesIn(kBadConfigs),
                         [](const auto& info) { return std::string(info.param.name); });

// --- Training clusters -------------------------------------------------------

TEST(ValidateForTrainingTest, ClusterWithoutPsIsRejected) {
  auto config = parse_tf_config(R"({"cluster": {"worker": ["w:1"], "chief": ["c:1"]},
                                    "task": {"type": "chief", "index": 0}})");
  ASSERT_TRUE(config.ok()) << config.status();
  Status s = validate_for_training(config->cluster);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "TF_CONFIG: cluster has no \"ps\" job: parameter server training needs at least one");
}

TEST(ValidateForTrainingTest, ClusterWithoutWorkersIsRejected) {
  ClusterSpec c = make_cluster(0, 2, true, [](TaskId t) { return t.short_name() + ":1"; });
  Status s = validate_for_training(c, "--cluster");
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "--cluster: cluster has no \"worker\" job: parameter server training needs at least one");
}

TEST(ValidateForTrainingTest, TwoChiefsAreRejected) {
  ClusterSpec c = make_cluster(1, 1, false, [](TaskId) { return "h:1"; });
  c.set_job(Job::kChief, {"c:1", "c:2"});
  Status s = validate_for_training(c);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("cluster.chief has 2 tasks"));
}

TEST(MakeClusterTest, BuildsAnInProcessCluster) {
  ClusterSpec c = make_cluster(3, 2, true, [](TaskId t) { return "localhost:" + std::to_string(
      1000 + 10 * static_cast<int>(t.job) + t.index); });
  EXPECT_EQ(c.num_workers(), 3);
  EXPECT_EQ(c.num_ps(), 2);
  EXPECT_TRUE(c.has_chief());
  EXPECT_EQ(*c.address(TaskId::worker(2)), "localhost:1012");
  EXPECT_EQ(*c.address(TaskId::ps(0)), "localhost:1020");
  EXPECT_TRUE(validate_for_training(c).ok());
  auto parsed = parse_tf_config(TfConfig{c, TaskId::worker(2)}.to_json());
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->cluster, c);
}

TEST(MakeClusterTest, AddressOfAMissingTaskIsAnError) {
  ClusterSpec c = make_cluster(2, 1, false, [](TaskId t) { return t.short_name(); });
  EXPECT_FALSE(c.has_chief());
  EXPECT_EQ(c.address(TaskId::chief()).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(c.address(TaskId::ps(1)).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(c.address(TaskId::worker(-1)).status().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(c.has_task(TaskId::worker(1)));
}

TEST(CheckHostPortTest, AcceptsCommonAddresses) {
  for (const char* a : {"localhost:2222", "10.0.0.1:1", "worker-0.svc.cluster.local:65535", "[::1]:80",
                        "[fe80::1%eth0]:8080"}) {
    Status s = check_host_port(a, "addr", "test");
    EXPECT_TRUE(s.ok()) << a << ": " << s;
  }
}

}  // namespace
}  // namespace twinps
