// twinps: one binary for every role (TensorFlow's "same binary for all tasks").
#include <cstdio>
#include <cstring>
#include <string>

#include "net/log.h"
#include "tools/commands/commands.h"

namespace {

void usage(std::FILE* out) {
  std::fprintf(out,
               "usage: twinps <command> [options]   (twinps <command> --help for its options)\n\n"
               "commands:\n");
  for (const auto& c : twinps::cli::commands()) std::fprintf(out, "  %-10s %s\n", c.name, c.summary);
}

}  // namespace

int main(int argc, char** argv) {
  twinps::log::init("twinps");  // before anything can log; gRPC's log goes through it
  if (argc < 2 || std::strcmp(argv[1], "--help") == 0 || std::strcmp(argv[1], "-h") == 0) {
    usage(argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  for (const auto& c : twinps::cli::commands()) {
    if (argv[1] == std::string(c.name)) return c.run(argc - 1, argv + 1);
  }
  std::fprintf(stderr, "twinps: unknown command '%s'\n\n", argv[1]);
  usage(stderr);
  return 2;
}
