#pragma once
// Child processes for integration tests: the real `twinps` binary started with
// its own environment, output captured to files, killed (only what the test
// started) when the handle goes away.
#include <chrono>
#include <string>
#include <vector>

namespace twinps::testing {

// Path of the twinps binary under test (set by CMake).
std::string twinps_binary();

// A TCP port that was free a moment ago on 127.0.0.1.
int free_port();

// A fresh empty directory under the system's temp dir.
std::string temp_dir(const std::string& tag);

class Process {
 public:
  // Starts `args` (args[0] is the program) with extra `env` entries ("K=V").
  static Process start(std::vector<std::string> args, std::vector<std::string> env = {});
  Process() = default;
  Process(Process&& o) noexcept;
  Process& operator=(Process&& o) noexcept;
  Process(const Process&) = delete;
  Process& operator=(const Process&) = delete;
  ~Process();  // SIGKILLs the process if it still runs

  int pid() const { return pid_; }
  bool running();
  // Waits up to `timeout` for the exit; true if it exited. exit_code() is
  // then the code, or 128 + signal.
  bool wait(std::chrono::milliseconds timeout);
  int exit_code() const { return exit_code_; }
  void kill(int signal);
  std::string out() const;  // stdout so far
  std::string err() const;  // stderr so far
  // Waits until stdout (or stderr) contains `text`; false on timeout or exit.
  bool wait_for_output(const std::string& text, std::chrono::milliseconds timeout, bool stderr_too = true);

 private:
  int pid_ = -1;
  int exit_code_ = -1;
  std::string out_path_, err_path_;
};

}  // namespace twinps::testing
