#pragma once
// Child processes: the twinps binary itself run with other arguments
// (TensorFlow-style: one binary for every role) by the bench, calibrate and
// tune commands, and by the integration tests (tests/tools/process.h); output
// captured to files, stopped when the handle goes away.
//
// Spawning is posix_spawn(3): glibc starts the child in the parent's memory
// (clone with CLONE_VM | CLONE_VFORK) with its own stack and every signal
// handler reset, and the child only opens the output files and calls
// execve — what is safe in a process that runs threads (gRPC's) — and a
// failed exec comes back with its errno. fork() is not used on purpose: it
// write-protects every page of this process for copy-on-write, and after the
// child has exec'd each first write to a page still takes a fault. Measured
// here (a Firecracker VM): about 12 us a page, so writing over a 32 MiB table
// after starting a child cost 100 ms — the row probe read 1-8 us a row after
// each real run instead of 0.08 (tools/tune/speed_probe.h), and a chief that
// restarts a killed ps paid it on its whole working set. Waiting with a
// timeout polls (waitpid with WNOHANG): no process-wide SIGCHLD handler,
// which a multi-threaded process must not install.
#include <chrono>
#include <string>
#include <vector>

namespace twinps::cli {

// This executable (to start it again in another role).
std::string self_binary();
// A fresh empty directory under the system's temp dir.
std::string make_temp_dir(const std::string& tag);

// A fresh temp dir for one command's scratch files (children's output, keys),
// removed with everything in it when the handle goes away: a bench run many
// times must not fill /tmp. Declare it before the Child handles writing into
// it, so they stop first.
class ScratchDir {
 public:
  explicit ScratchDir(const std::string& tag) : path_(make_temp_dir(tag)) {}
  ~ScratchDir();
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

class Child {
 public:
  // Starts `args` (args[0] is the program) with extra `env` entries ("K=V");
  // stdout and stderr go to files under `dir` named after `name` (default: a
  // fresh temp dir, removed with the handle). A program that cannot be started gives a handle that
  // has exited with code 127 and whose err() says why.
  static Child start(const std::vector<std::string>& args, const std::vector<std::string>& env = {},
                     const std::string& dir = "", const std::string& name = "child");
  Child();
  Child(Child&& o) noexcept;
  Child& operator=(Child&& o) noexcept;
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;
  ~Child();  // SIGTERM, then SIGKILL if it lingers

  bool started() const { return pid_ > 0; }  // (false again once reaped)
  int pid() const { return pid_; }              // -1 once reaped
  // Still running (reaps it if it has exited).
  bool running();
  // Waits for exit; true if it exited within `timeout` (exit_code() is then set, 128+signal if killed).
  bool wait(std::chrono::milliseconds timeout);
  int exit_code() const { return exit_code_; }
  // Waits until the child's stdout or stderr contains `text`; false on timeout or exit.
  bool wait_for_output(const std::string& text, std::chrono::milliseconds timeout);
  void stop();  // SIGTERM, wait a little, then SIGKILL
  // SIGTERM without waiting: for stopping many children together (stop() then reaps each).
  void terminate();
  // Sends `signal` (e.g. SIGKILL, to inject a crash) if it still runs.
  void kill(int signal);
  std::string out() const;
  std::string err() const;
  const std::string& out_file() const { return out_path_; }  // where out() is read from

 private:
  int pid_ = -1;
  int exit_code_ = -1;
  std::string out_path_, err_path_;
  std::string owned_dir_;  // the temp dir start() made for the output, if it made one
  void remove_owned_dir();
};

// A TCP port held for as long as the handle lives: bound on every interface
// with SO_REUSEADDR, never listening. Nothing can connect to it (refused),
// the OS gives it to no one else (not for port 0, nor as an outgoing
// connection's local port), and a plain bind of it fails. A twinps task told
// to listen on it can: Linux lets a socket that sets SO_REUSEADDR bind and
// listen next to a bound one that is not listening, and gRPC's listener sets
// it (so does the data plane on a fixed --data-port). So it serves as an
// address where nothing listens, and keeps a killed task's port its own
// until the task is restarted on it.
class ReservedPort {
 public:
  // `port` 0: one the OS picks. held() is false when the port cannot be bound.
  explicit ReservedPort(int port = 0);
  ~ReservedPort();
  ReservedPort(ReservedPort&& o) noexcept;
  ReservedPort& operator=(ReservedPort&&) = delete;
  ReservedPort(const ReservedPort&) = delete;
  ReservedPort& operator=(const ReservedPort&) = delete;

  bool held() const { return fd_ >= 0; }
  int port() const { return port_; }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }

 private:
  int fd_ = -1;
  int port_ = 0;
};

}  // namespace twinps::cli
