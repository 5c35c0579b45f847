#pragma once
// Child processes: the twinps binary itself run with other arguments
// (TensorFlow-style: one binary for every role) by the bench, calibrate and
// tune commands, and by the integration tests (tests/tools/process.h); output
// captured to files, stopped when the handle goes away.
#include <chrono>
#include <string>
#include <vector>

namespace twinps::cli {

// This executable (to start it again in another role).
std::string self_binary();
// A TCP port that was free a moment ago on 127.0.0.1 (never the same twice per process).
int free_port();
// A fresh empty directory under the system's temp dir.
std::string make_temp_dir(const std::string& tag);

class Child {
 public:
  // Starts `args` (args[0] is the program) with extra `env` entries ("K=V");
  // stdout and stderr go to files under `dir` (default: a fresh temp dir)
  // named after `name`.
  static Child start(const std::vector<std::string>& args, const std::vector<std::string>& env = {},
                     const std::string& dir = "", const std::string& name = "child");
  Child() = default;
  Child(Child&& o) noexcept;
  Child& operator=(Child&& o) noexcept;
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;
  ~Child();  // SIGTERM, then SIGKILL if it lingers

  bool started() const { return pid_ > 0; }
  int pid() const { return pid_; }  // -1 once reaped
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

 private:
  int pid_ = -1;
  int exit_code_ = -1;
  std::string out_path_, err_path_;
};

}  // namespace twinps::cli
