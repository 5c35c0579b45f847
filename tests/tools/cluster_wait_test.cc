// A chief waiting for its cluster says so: every few seconds it names the
// tasks that have not answered and where it looked for them; and when two
// tasks' TF_CONFIGs disagree, the error names the address that was tried,
// with the failed task once.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include "core/cluster/task_id.h"
#include "tests/tools/local_cluster.h"
#include "tests/tools/process.h"

namespace twinps {
namespace {

using namespace std::chrono_literals;
using testing::LocalCluster;
using testing::Process;

std::size_t count(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

TEST(ClusterWaitTest, AChiefWithoutItsClusterNamesTheMissingTasksWhileItWaits) {
  // Nothing serves: the tasks' ports are held by this test, never listening.
  LocalCluster cluster(1, 1);
  cluster.reserve_port(TaskId::ps(0));
  cluster.reserve_port(TaskId::worker(0));
  const std::map<TaskId, std::string> addresses = {{TaskId::ps(0), cluster.address(TaskId::ps(0))},
                                                   {TaskId::worker(0), cluster.address(TaskId::worker(0))}};
  // The chief waits for --connect-timeout, saying so.
  Process train = cluster.train({"--connect-timeout", "3", "--progress-every", "0.5"});
  ASSERT_TRUE(train.wait(60s)) << "must give up after --connect-timeout";
  EXPECT_EQ(train.exit_code(), 1);
  const std::string line = "twinps train: waiting for the cluster: no answer yet from ps:0 (" +
                           addresses.at(TaskId::ps(0)) + "), worker:0 (" + addresses.at(TaskId::worker(0)) + ")";
  EXPECT_NE(train.err().find(line), std::string::npos) << train.err();
  EXPECT_NE(train.err().find("of 3 s (--connect-timeout)"), std::string::npos) << train.err();
  // The final error names each missing task once, with the address tried, and one failed-task suffix.
  EXPECT_NE(train.err().find("did not form within 3 s; no answer from ps:0 (Health to ps:0 at " +
                             addresses.at(TaskId::ps(0))),
            std::string::npos)
      << train.err();
  EXPECT_NE(train.err().find(", worker:0 (Health to worker:0 at " + addresses.at(TaskId::worker(0))), std::string::npos)
      << train.err();
  EXPECT_EQ(count(train.err(), "[failed task "), 1u) << train.err();
}

TEST(ClusterWaitTest, MismatchedTfConfigsNameTheAddressTriedAndTheFailedTaskOnce) {
  // The worker's TF_CONFIG (--tf-config, ahead of the variable) puts ps:0
  // at a port this test holds, where nothing listens.
  LocalCluster cluster(1, 1);
  ASSERT_TRUE(cluster.start(TaskId::ps(0)));
  const testing::ReservedPort nowhere;
  auto worker_view = nlohmann::json::parse(cluster.tf_config(TaskId::worker(0)));
  worker_view["cluster"]["ps"][0] = nowhere.address();
  ASSERT_TRUE(cluster.start(TaskId::worker(0), {"--tf-config", worker_view.dump()}));
  Process train = cluster.train({"--connect-timeout", "4", "--rpc-timeout", "2"});
  ASSERT_TRUE(train.wait(60s));
  EXPECT_NE(train.exit_code(), 0);
  const std::string err = train.err();
  EXPECT_NE(err.find("worker:0 cannot reach ps:0: Health to ps:0 at " + nowhere.address()), std::string::npos)
      << err;
  EXPECT_EQ(count(err, "[failed task ps:0]"), count(err, "cannot reach ps:0")) << "one suffix per message: " << err;
}

}  // namespace
}  // namespace twinps
