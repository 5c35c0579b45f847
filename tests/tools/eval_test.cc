// The real side-car evaluator, `twinps eval`: it takes the run's epochs,
// seeds and model from the checkpoints' metadata (no flag to keep in step
// with training), accepts an evaluator's TF_CONFIG and refuses another task's,
// and says what it waits for instead of waiting silently.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <regex>
#include <string>

#include "core/checkpoint/checkpoint_manager.h"
#include "core/checkpoint/storage.h"
#include "tests/tools/process.h"

namespace twinps {
namespace {

using namespace std::chrono_literals;
using testing::Process;

Process eval(std::vector<std::string> args, std::vector<std::string> env = {}) {
  args.insert(args.begin(), {testing::twinps_binary(), "eval"});
  return Process::start(args, env);
}

Process train(const std::string& ckpt, std::vector<std::string> extra) {
  std::vector<std::string> args{testing::twinps_binary(), "train", "--in-memory", "--checkpoint-dir", ckpt};
  args.insert(args.end(), extra.begin(), extra.end());
  return Process::start(args);
}

// The "Evaluated ..." lines of an evaluator's output, in order.
std::vector<std::string> evaluated(const std::string& out) {
  std::vector<std::string> lines;
  static const std::regex line(R"(Evaluated (ckpt-\d+) \(([^)]*)\): accuracy ([0-9.]+))");
  for (std::sregex_iterator m(out.begin(), out.end(), line), end; m != end; ++m) lines.push_back((*m)[1]);
  return lines;
}

TEST(EvalTest, TakesEpochsSeedsAndModelFromTheCheckpoints) {
  // A 10-epoch run with another seed, steps per epoch and embedding layout
  // than the defaults, checkpoints kept: the evaluator, given only the
  // directory, must evaluate through the last epoch's checkpoint.
  const std::string ckpt = testing::temp_dir("eval-metadata") + "/ckpt";
  Process t = train(ckpt, {"--epochs", "10", "--steps-per-epoch", "4", "--seed", "7", "--keep", "0"});
  ASSERT_TRUE(t.wait(120s));
  ASSERT_EQ(t.exit_code(), 0) << t.err();

  Process e = eval({"--checkpoint-dir", ckpt, "--timeout", "60"});
  ASSERT_TRUE(e.wait(120s));
  ASSERT_EQ(e.exit_code(), 0) << e.err();
  const auto names = evaluated(e.out());
  ASSERT_EQ(names.size(), 10u) << e.out();
  EXPECT_EQ(names.front(), "ckpt-4");
  EXPECT_EQ(names.back(), "ckpt-40");
  EXPECT_NE(e.out().find("Evaluated ckpt-40 (epoch 9, iterations 40)"), std::string::npos) << e.out();
  EXPECT_NE(e.err().find("ckpt-40 is the checkpoint of the run's last epoch (9 of 10): done"), std::string::npos)
      << e.err();

  // What the evaluator read: the run's own configuration, recorded by train.
  auto storage = LocalDiskStorage::open(ckpt, false);
  ASSERT_TRUE(storage.ok()) << describe(storage.status());
  CheckpointManager manager(**storage, 0);
  auto header = manager.restore("ckpt-40", {}, OptimizerConfig{});
  ASSERT_TRUE(header.ok()) << describe(header.status());
  EXPECT_EQ(header->metadata.at("epochs"), "10");
  EXPECT_EQ(header->metadata.at("steps_per_epoch"), "4");
  EXPECT_EQ(header->metadata.at("eval_data"), "builtin:tutorial:8:16") << "the evaluation records of seed 7 + 1";
  EXPECT_NE(header->metadata.at("model_spec").find("init_seed: 8"), std::string::npos)
      << "the spec trained, with --seed 7's initial values";
}

TEST(EvalTest, AnEvaluatorTfConfigIsUsedAndAnotherTasksIsRefused) {
  const std::string ckpt = testing::temp_dir("eval-tfconfig") + "/ckpt";
  Process t = train(ckpt, {"--epochs", "2"});
  ASSERT_TRUE(t.wait(120s));
  ASSERT_EQ(t.exit_code(), 0) << t.err();

  const std::string cluster = R"("cluster":{"chief":["127.0.0.1:1"],"worker":["127.0.0.1:2"],"ps":["127.0.0.1:3"]})";
  Process e = eval({"--checkpoint-dir", ckpt, "--timeout", "60"},
                   {std::string("TF_CONFIG={") + cluster + R"(,"task":{"type":"evaluator","index":0}})"});
  ASSERT_TRUE(e.wait(120s));
  EXPECT_EQ(e.exit_code(), 0) << e.err();
  EXPECT_NE(e.err().find("twinps eval: evaluator:0: following checkpoints in " + ckpt), std::string::npos) << e.err();
  EXPECT_EQ(evaluated(e.out()).size(), 2u) << e.out();

  // Without --checkpoint-dir: told what is missing and why TF_CONFIG does not supply it.
  Process missing = eval({}, {std::string("TF_CONFIG={") + cluster + R"(,"task":{"type":"evaluator","index":0}})"});
  ASSERT_TRUE(missing.wait(30s));
  EXPECT_EQ(missing.exit_code(), 2);
  EXPECT_NE(missing.err().find("--checkpoint-dir is required"), std::string::npos) << missing.err();
  EXPECT_NE(missing.err().find("TF_CONFIG names this task, not where the checkpoints are"), std::string::npos)
      << missing.err();

  // Another task's TF_CONFIG is a mistake, named.
  Process worker = eval({"--checkpoint-dir", ckpt},
                        {std::string("TF_CONFIG={") + cluster + R"(,"task":{"type":"worker","index":0}})"});
  ASSERT_TRUE(worker.wait(30s));
  EXPECT_EQ(worker.exit_code(), 2);
  EXPECT_NE(worker.err().find("TF_CONFIG's task is worker:0; twinps eval runs the evaluator task"), std::string::npos)
      << worker.err();

  Process garbled = eval({"--checkpoint-dir", ckpt, "--tf-config", "{\"cluster\": "});
  ASSERT_TRUE(garbled.wait(30s));
  EXPECT_EQ(garbled.exit_code(), 2);
  EXPECT_NE(garbled.err().find("--tf-config"), std::string::npos) << garbled.err();
}

TEST(EvalTest, SaysWhatItWaitsForAndGivesUpNamingIt) {
  const std::string typo = testing::temp_dir("eval-typo") + "/no/such/dir";
  Process e = eval({"--checkpoint-dir", typo, "--timeout", "2", "--poll", "0.05", "--progress-every", "0.5"});
  ASSERT_TRUE(e.wait(60s));
  EXPECT_EQ(e.exit_code(), 1);
  const std::string err = e.err();
  EXPECT_NE(err.find("twinps eval: waiting for " + typo + " to appear (it does not exist)"), std::string::npos) << err;
  EXPECT_NE(err.find("twinps eval: still waiting for " + typo), std::string::npos) << err;
  EXPECT_NE(err.find("twinps eval: gave up after 2 s (--timeout) waiting for " + typo), std::string::npos) << err;
}

TEST(EvalTest, ACheckpointWithoutTheRunsConfigurationIsSkippedNamingWhy) {
  // A checkpoint saved without metadata (not by twinps train): skipped with
  // the reason, and the evaluator keeps waiting for one it can read.
  const std::string dir = testing::temp_dir("eval-nometa");
  {
    auto storage = LocalDiskStorage::open(dir, true);
    ASSERT_TRUE(storage.ok());
    CheckpointManager manager(**storage, 0);
    ASSERT_TRUE(manager.save(5, {}, {}, OptimizerConfig{}).ok());
  }
  Process e = eval({"--checkpoint-dir", dir, "--timeout", "1", "--poll", "0.05"});
  ASSERT_TRUE(e.wait(60s));
  EXPECT_EQ(e.exit_code(), 1);
  EXPECT_NE(e.err().find("skipped ckpt-5: INVALID_ARGUMENT: records no training configuration"), std::string::npos)
      << e.err();
}

}  // namespace
}  // namespace twinps
