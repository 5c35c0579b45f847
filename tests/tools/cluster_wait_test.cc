// A chief waiting for its cluster says so: every few seconds it names the
// tasks that have not answered and where it looked for them; and when two
// tasks' TF_CONFIGs disagree, the error names the address that was tried,
// with the failed task once.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include "core/cluster/task_id.h"
#include "tests/tools/process.h"

namespace twinps {
namespace {

using namespace std::chrono_literals;
using testing::Process;

std::string address() { return "127.0.0.1:" + std::to_string(testing::free_port()); }

std::string tf_config(const std::map<TaskId, std::string>& addresses, const TaskId& task) {
  nlohmann::json cluster;
  for (const auto& [t, a] : addresses) cluster[std::string(job_name(t.job))].push_back(a);
  return nlohmann::json{{"cluster", cluster},
                        {"task", {{"type", std::string(job_name(task.job))}, {"index", task.index}}}}
      .dump();
}

std::size_t count(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

TEST(ClusterWaitTest, AChiefWithoutItsClusterNamesTheMissingTasksWhileItWaits) {
  const std::map<TaskId, std::string> addresses = {
      {TaskId::chief(), address()}, {TaskId::ps(0), address()}, {TaskId::worker(0), address()}};
  // Nothing serves: the chief waits for --connect-timeout, saying so.
  Process train = Process::start({testing::twinps_binary(), "train", "--connect-timeout", "3", "--progress-every", "0.5"},
                                 {"TF_CONFIG=" + tf_config(addresses, TaskId::chief())});
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
  // The worker's TF_CONFIG puts ps:0 somewhere nothing listens.
  std::map<TaskId, std::string> addresses = {
      {TaskId::chief(), address()}, {TaskId::ps(0), address()}, {TaskId::worker(0), address()}};
  std::map<TaskId, std::string> wrong = addresses;
  wrong[TaskId::ps(0)] = address();
  Process ps = Process::start({testing::twinps_binary(), "serve"}, {"TF_CONFIG=" + tf_config(addresses, TaskId::ps(0))});
  Process worker =
      Process::start({testing::twinps_binary(), "serve"}, {"TF_CONFIG=" + tf_config(wrong, TaskId::worker(0))});
  ASSERT_TRUE(ps.wait_for_output("serving on", 30s)) << ps.err();
  ASSERT_TRUE(worker.wait_for_output("serving on", 30s)) << worker.err();
  Process train = Process::start({testing::twinps_binary(), "train", "--connect-timeout", "4", "--rpc-timeout", "2"},
                                 {"TF_CONFIG=" + tf_config(addresses, TaskId::chief())});
  ASSERT_TRUE(train.wait(60s));
  EXPECT_NE(train.exit_code(), 0);
  const std::string err = train.err();
  EXPECT_NE(err.find("worker:0 cannot reach ps:0: Health to ps:0 at " + wrong.at(TaskId::ps(0))), std::string::npos)
      << err;
  EXPECT_EQ(count(err, "[failed task ps:0]"), count(err, "cannot reach ps:0")) << "one suffix per message: " << err;
}

}  // namespace
}  // namespace twinps
