// twinps: one binary for every role (TensorFlow's "same binary for all tasks").
//   twinps CMD [options]      run a command; twinps CMD --help for its options
//   twinps help [CMD [SUB]]   the same help
//   twinps --version
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <new>
#include <string>
#include <vector>

#include "net/allocator_tuning.h"
#include "net/log.h"
#include "tools/commands/commands.h"
#include "tools/version.h"

namespace {

void usage(std::FILE* out) {
  std::fprintf(out,
               "usage: twinps <command> [options]   (twinps help <command>, or twinps <command> --help, for its "
               "options)\n       twinps --version\n\ncommands:\n");
  for (const auto& c : twinps::cli::commands()) std::fprintf(out, "  %-10s %s\n", c.name, c.summary);
  std::fprintf(out, "\nDocumentation: README.md, docs/ (installed under share/twinps/)\n");
}

// Runs `command` with `args` (after the command's name), its argv[0] being its
// whole name ("twinps train"), as every command's messages say it.
int run(const twinps::cli::Command& command, std::vector<std::string> args) {
  std::string name = std::string("twinps ") + command.name;
  std::vector<char*> argv{name.data()};
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  return command.run(static_cast<int>(argv.size()) - 1, argv.data());
}

const twinps::cli::Command* find(const char* name) {
  for (const auto& c : twinps::cli::commands())
    if (name == std::string(c.name)) return &c;
  return nullptr;
}

int unknown(const char* name) {
  std::fprintf(stderr, "twinps: unknown command '%s'\n\n", name);
  usage(stderr);
  return 2;
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
  // Tensors are allocated and freed every step: keep freed memory for reuse
  // rather than page-faulting it in again (net/allocator_tuning.h).
  twinps::net::tune_allocator_for_large_tensors();
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
  if (argc < 2) {
    usage(stderr);
    return 2;
  }
  const std::string first = argv[1];
  if (first == "--help" || first == "-h" || (first == "help" && argc == 2)) {
    usage(stdout);
    return 0;
  }
  if (first == "--version" || first == "version") {
    std::printf("%s\n", twinps::cli::version_text().c_str());
    return 0;
  }
  if (first == "help") {  // twinps help CMD [SUB...]: CMD [SUB...] --help
    const auto* c = find(argv[2]);
    if (!c) return unknown(argv[2]);
    std::vector<std::string> args(argv + 3, argv + argc);
    args.push_back("--help");
    return run(*c, args);
  }
  const auto* c = find(argv[1]);
  if (!c) return unknown(argv[1]);
  return run(*c, std::vector<std::string>(argv + 2, argv + argc));
}
}  // namespace
