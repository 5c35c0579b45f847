// The real `twinps` binary's command line: every bad value is refused with
// exit code 2 and a message naming the whole command and the one flag at
// fault; negative numbers for unsigned flags, stray words and unknown
// commands are refused; `--version`, `help CMD` and defaults shown as written.
#include <gtest/gtest.h>

#include <algorithm>
#include <regex>
#include <string>
#include <vector>

#include "tests/tools/process.h"

namespace twinps {
namespace {

using namespace std::chrono_literals;
using testing::Process;

struct Result {
  int exit_code = -1;
  std::string out, err;
};

Result twinps(std::vector<std::string> args) {
  args.insert(args.begin(), testing::twinps_binary());
  Process p = Process::start(args);
  EXPECT_TRUE(p.wait(60s)) << args[1];
  return {p.exit_code(), p.out(), p.err()};
}

std::string joined(const std::vector<std::string>& args) {
  std::string out;
  for (const auto& a : args) out += (out.empty() ? "" : " ") + a;
  return out;
}

TEST(CliFlagsTest, EachBadValueNamesItsFlagAndTheWholeCommand) {
  struct Case {
    std::vector<std::string> args;
    std::string message;  // the whole line after the command's name
  };
  const std::vector<Case> cases = {
      {{"train", "--in-memory", "--batch-size", "0"}, "twinps train: --batch-size must be at least 1 (got 0)"},
      {{"train", "--in-memory", "--epochs", "-2"}, "twinps train: --epochs must be at least 1 (got -2)"},
      {{"train", "--in-memory", "--learning-rate", "0"}, "twinps train: --learning-rate must be positive (got 0)"},
      {{"train", "--in-memory", "--learning-rate", "nan"}, "twinps train: --learning-rate must be positive (got nan)"},
      {{"train", "--in-memory", "--heartbeat", "-1"}, "twinps train: --heartbeat must be positive (got -1)"},
      {{"train", "--in-memory", "--checkpoint-every-steps", "-5"},
       "twinps train: --checkpoint-every-steps must be at least 0 (got -5)"},
      {{"train", "--in-memory", "--data-plane", "udp"},
       "twinps train: --data-plane must be tcp, tcp-unix, tcp-only, grpc or tcp-all (got 'udp')"},
      {{"train", "--in-memory", "--shards", "0"}, "twinps train: --shards must be at least 1 (got 0)"},
      {{"eval", "--checkpoint-dir", "x", "--timeout", "0"}, "twinps eval: --timeout must be positive (got 0)"},
      {{"serve", "--max-message-mb", "0"}, "twinps serve: --max-message-mb must be from 1 to 2047 (got 0)"},
      {{"serve", "--role", "chief"}, "twinps serve: --role must be ps or worker (got 'chief')"},
      {{"sim", "--swarm", "0"}, "twinps sim: --swarm must be at least 1 (got 0)"},
      {{"tune", "--top", "-1"}, "twinps tune: --top must be at least 0 (got -1)"},
      {{"tune", "--validate", "--rounds", "0"}, "twinps tune: --rounds must be from 1 to 100 (got 0)"},
      {{"calibrate", "--repeats", "0"}, "twinps calibrate: --repeats must be at least 1 (got 0)"},
      {{"model", "spec.textproto", "--ps", "0"}, "twinps model: --ps must be from 1 to 100000 (got 0)"},
      {{"bench", "sim", "--workers", "0"}, "twinps bench sim: --workers must be at least 1 (got 0)"},
      {{"bench", "train", "--where", "moon"},
       "twinps bench train: --where must be in-process, processes or both (got 'moon')"},
      {{"bench", "ps", "--mode", "fast"},
       "twinps bench ps: --mode must be pipelined, sequential, push-then-pull or push-pull (got 'fast')"},
      {{"bench", "ps", "--window", "0"}, "twinps bench ps: --window must be positive (got 0)"},
      {{"bench", "ps", "--optimizer", "momentum"},
       "twinps bench ps: --optimizer must be none, sgd or adam (got 'momentum')"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(joined(c.args));
    Result r = twinps(c.args);
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_NE(r.err.find(c.message + "\n"), std::string::npos) << r.err;
    // One flag named: the message is about this flag only.
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 2) << r.err;  // the error and "(see ... --help)"
    const std::string command = c.message.substr(0, c.message.find(':'));
    EXPECT_NE(r.err.find("(see " + command + " --help)"), std::string::npos) << r.err;
  }
}

TEST(CliFlagsTest, NegativeNumbersForUnsignedFlagsAreRefused) {
  const std::vector<std::vector<std::string>> cases = {
      {"train", "--in-memory", "--seed", "-3"},
      {"sim", "--swarm", "2", "--swarm-first-seed", "-1"},
      {"bench", "sim", "--seed", "-2"},
      {"tune", "--model", "m", "--workers", "1", "--seed", "-7"},
      {"serve", "--max-message-mb", "-1"},
  };
  for (const auto& args : cases) {
    SCOPED_TRACE(joined(args));
    Result r = twinps(args);
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_NE(r.err.find("must not be negative (got " + args[args.size() - 1] + ")"), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find("18446744073709551"), std::string::npos) << r.err;
  }
}

TEST(CliFlagsTest, StrayWordsAreErrors) {
  Result r = twinps({"train", "--in-memory", "extra"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("twinps train: unexpected argument 'extra'"), std::string::npos) << r.err;
  EXPECT_EQ(r.out.find("Finished epoch"), std::string::npos) << "nothing ran";

  r = twinps({"sim", "a.textproto", "b.textproto"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("twinps sim: unexpected argument 'b.textproto'"), std::string::npos) << r.err;

  r = twinps({"bench", "sim", "100"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("twinps bench sim: unexpected argument '100'"), std::string::npos) << r.err;
}

TEST(CliFlagsTest, UnknownCommandsAndMissingOnesExitTwo) {
  for (const std::vector<std::string>& args : {std::vector<std::string>{}, {"frobnicate"}, {"bench"}, {"bench", "gpu"},
                                               {"help", "frobnicate"}}) {
    SCOPED_TRACE(joined(args));
    Result r = twinps(args);
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_NE(r.err.find("usage:"), std::string::npos) << r.err;
  }
  Result r = twinps({"eval", "--frobnicate"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("twinps eval: unrecognised option '--frobnicate'"), std::string::npos) << r.err;
}

TEST(CliFlagsTest, VersionAndHelpCommand) {
  Result v = twinps({"--version"});
  EXPECT_EQ(v.exit_code, 0) << v.err;
  EXPECT_TRUE(std::regex_search(v.out, std::regex(R"(^twinps \d+\.\d+\.\d+\n)"))) << v.out;
  EXPECT_NE(v.out.find("gRPC"), std::string::npos) << v.out;

  Result h = twinps({"help"});
  EXPECT_EQ(h.exit_code, 0);
  EXPECT_NE(h.out.find("commands:"), std::string::npos) << h.out;

  for (const std::vector<std::string>& cmd :
       {std::vector<std::string>{"train"}, {"eval"}, {"tune"}, {"bench", "sim"}}) {
    SCOPED_TRACE(joined(cmd));
    std::vector<std::string> help_cmd{"help"};
    help_cmd.insert(help_cmd.end(), cmd.begin(), cmd.end());
    std::vector<std::string> dash_help = cmd;
    dash_help.push_back("--help");
    Result a = twinps(help_cmd), b = twinps(dash_help);
    EXPECT_EQ(a.exit_code, 0) << a.err;
    EXPECT_EQ(a.out, b.out);
    EXPECT_NE(a.out.find("usage: twinps " + joined(cmd)), std::string::npos) << a.out;
  }
}

TEST(CliFlagsTest, DefaultsAreShownAsWritten) {
  // (train's --learning-rate has no default of its own: it overrides the spec's)
  Result eval = twinps({"eval", "--help"});
  EXPECT_NE(eval.out.find("--poll arg (=0.2)"), std::string::npos) << eval.out;
  // No command or bench target prints a default with binary-fraction noise
  // (0.10000000000000001) or float noise (0.150000006).
  const std::regex noisy(R"(\(=[-0-9.e]*(0000000|9999999)[0-9]*\))");
  for (const std::vector<std::string>& cmd :
       {std::vector<std::string>{"train"}, {"serve"}, {"eval"}, {"sim"}, {"tune"}, {"tune", "--validate"},
        {"calibrate"}, {"model"}, {"bench", "sim"}, {"bench", "ps"}, {"bench", "train"}}) {
    std::vector<std::string> args = cmd;
    args.push_back("--help");
    Result r = twinps(args);
    SCOPED_TRACE(joined(args));
    EXPECT_EQ(r.exit_code, 0) << r.err;
    std::smatch m;
    EXPECT_FALSE(std::regex_search(r.out, m, noisy)) << m.str();
  }
}

}  // namespace
}  // namespace twinps
