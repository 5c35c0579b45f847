// twinps bench TARGET: performance measurements, one target per layer.
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "tools/cli.h"
#include "tools/commands/commands.h"

namespace twinps::cli {

namespace {

struct BenchTarget {
  const char* name;
  const char* summary;
  int (*run)(int argc, char** argv);
};

// Every target, in the order --help lists them.
const BenchTarget kTargets[] = {
    {"sim", "the simulator: a timing-only cluster (default 1000 workers x 100 ps)", run_bench_sim},
    {"ps", "push/pull throughput against real ps processes on loopback", run_bench_ps},
    {"train", "tutorial training throughput in real mode (in-process and as processes)", run_bench_train},
    {"flows", "concurrent TCP streams on loopback against the simulator's FIFO and FLOW models", run_bench_flows},
    {"all", "the standard set beside this machine's limits (TCP stream, memcpy), one run; --report FILE: Markdown",
     run_bench_all},
};

void usage(std::FILE* out) {
  std::fprintf(out, "usage: twinps bench TARGET [options]   (twinps bench TARGET --help for its options)\n\ntargets:\n");
  for (const auto& t : kTargets) std::fprintf(out, "  %-8s %s\n", t.name, t.summary);
}

}  // namespace

int run_bench(int argc, char** argv) {
  if (argc < 2 || std::strcmp(argv[1], "--help") == 0 || std::strcmp(argv[1], "-h") == 0) {
    usage(argc < 2 ? stderr : stdout);
    return argc < 2 ? kExitBadInput : kExitOk;
  }
  for (const auto& t : kTargets) {
    if (argv[1] != std::string(t.name)) continue;
    std::string name = std::string(argv[0]) + " " + t.name;  // "twinps bench sim": the target's messages say it
    std::vector<char*> args(argv + 1, argv + argc + 1);  // the trailing nullptr too
    args[0] = name.data();
    return t.run(argc - 1, args.data());
  }
  std::fprintf(stderr, "twinps bench: unknown target '%s'\n\n", argv[1]);
  usage(stderr);
  return kExitBadInput;
}

}  // namespace twinps::cli
