// twinps: one binary for every role (TensorFlow's "same binary for all tasks").
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <new>
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

constexpr char kOutOfMemory[] =
    "twinps: out of memory (an allocation failed); for a simulation, `twinps sim` estimates what a scenario needs "
    "before it runs (see --max-memory-gb)\n";

// Running out of memory is reported, never an abort. The new-handler runs
// where the allocation failed, on any thread or coroutine, and ends the
// process at once: unwinding a half-built cluster of thousands of tasks
// could take minutes, and nothing in twinps recovers from a failed
// allocation. write(2) allocates nothing.
[[noreturn]] void on_out_of_memory() {
  (void)!::write(STDERR_FILENO, kOutOfMemory, sizeof kOutOfMemory - 1);
  std::_Exit(1);
}

// Anything else that reaches std::terminate (an exception escaping a
// coroutine or a thread) is reported the same way.
[[noreturn]] void on_terminate() {
  const char* what = "an unexpected error";
  try {
    if (auto e = std::current_exception()) std::rethrow_exception(e);
  } catch (const std::bad_alloc&) {
    what = "out of memory (an allocation failed)";
  } catch (const std::exception& e) {
    std::fprintf(stderr, "twinps: stopped by an unexpected error: %s\n", e.what());
    std::_Exit(1);
  } catch (...) {
  }
  std::fprintf(stderr, "twinps: stopped: %s\n", what);
  std::_Exit(1);
}

int run(int argc, char** argv);

}  // namespace

int main(int argc, char** argv) {
  twinps::log::init("twinps");  // before anything can log; gRPC's log goes through it
  std::set_new_handler(on_out_of_memory);
  std::set_terminate(on_terminate);
  try {
    return run(argc, argv);
  } catch (const std::bad_alloc&) {  // an allocator that throws without the new-handler
    std::fputs(kOutOfMemory, stderr);
    return 1;
  }
}

namespace {
int run(int argc, char** argv) {
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
}  // namespace
