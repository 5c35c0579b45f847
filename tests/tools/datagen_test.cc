// The real `twinps datagen ctr`: writes the click log and prints the hidden
// model's AUC (the same number hidden_model.json holds); the same seed
// writes the same bytes; bad input exits 2 naming the flag.
#include <gtest/gtest.h>

#include <filesystem>

#include <nlohmann/json.hpp>

#include "tests/tools/process.h"
#include "tests/tools/read_file.h"

namespace twinps {
namespace {

using namespace std::chrono_literals;
using testing::Process;

using testing::twinps;

TEST(DatagenTest, CtrWritesTheLogAndTheHiddenAuc) {
  const std::string dir = testing::temp_dir("datagen");
  for (const std::string& out : {dir + "/a", dir + "/b"}) {
    Process p = twinps({"datagen", "ctr", "--out", out, "--examples", "3000", "--seed", "4", "--train-files", "2",
                        "--max-vocabulary", "1000"});
    ASSERT_TRUE(p.wait(120s));
    ASSERT_EQ(p.exit_code(), 0) << p.err();
    auto json = nlohmann::json::parse(testing::read_file(out + "/hidden_model.json"));
    char line[64];
    std::snprintf(line, sizeof line, "hidden model test auc: %.4f", json["hidden_test_auc"].get<double>());
    EXPECT_NE(p.out().find(line), std::string::npos) << p.out();
    EXPECT_EQ(json["train_examples"], 2700);
    EXPECT_EQ(json["test_examples"], 300);
  }
  for (const std::string f : {"train-00000-of-00002.tfrecord", "train-00001-of-00002.tfrecord",
                              "test-00000-of-00001.tfrecord"}) {
    EXPECT_TRUE(std::filesystem::file_size(dir + "/a/" + f) > 0) << f;
    EXPECT_TRUE(testing::read_file(dir + "/a/" + f) == testing::read_file(dir + "/b/" + f)) << f << " differs between runs with one seed";
  }
  std::filesystem::remove_all(dir);
}

TEST(DatagenTest, BadInputExitsTwo) {
  const std::string dir = testing::temp_dir("datagen_bad");
  const std::vector<std::vector<std::string>> bad = {
      {"datagen"},
      {"datagen", "mnist"},
      {"datagen", "ctr"},
      {"datagen", "ctr", "--out", dir, "--examples", "1"},
      {"datagen", "ctr", "--out", dir, "--test-fraction", "1.5"},
      {"datagen", "ctr", "--out", dir, "--examples", "ten"},
      {"datagen", "ctr", "--out", dir, "--zipf-exponent", "-1"},
  };
  for (const auto& args : bad) {
    Process p = twinps(args);
    ASSERT_TRUE(p.wait(30s)) << args.back();
    EXPECT_EQ(p.exit_code(), 2) << args.back() << ": " << p.err();
    EXPECT_FALSE(p.err().empty()) << args.back();
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace twinps
