#include "tests/tools/process.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <stdexcept>
#include <thread>

namespace twinps::testing {

std::string twinps_binary() { return TWINPS_BINARY; }

int free_port() {
  // The kernel may hand the same ephemeral port to two probes in a row once
  // the first is closed, so remember every port given out in this process.
  static std::set<int> given;
  for (int attempt = 0; attempt < 100; ++attempt) {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = 0;
    if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
      ::close(fd);
      continue;
    }
    socklen_t len = sizeof addr;
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
    ::close(fd);
    const int port = ntohs(addr.sin_port);
    if (given.insert(port).second) return port;
  }
  throw std::runtime_error("no free port");
}

std::string temp_dir(const std::string& tag) {
  static std::atomic<int> counter{0};
  auto dir = std::filesystem::temp_directory_path() /
             ("twinps-" + tag + "-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir.string();
}

Process Process::start(std::vector<std::string> args, std::vector<std::string> env) {
  Process p;
  const std::string dir = temp_dir("proc");
  p.out_path_ = dir + "/stdout";
  p.err_path_ = dir + "/stderr";
  pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error("fork failed");
  if (pid == 0) {
    int out = ::open(p.out_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int err = ::open(p.err_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ::dup2(out, 1);
    ::dup2(err, 2);
    for (const auto& e : env) ::putenv(const_cast<char*>(e.c_str()));
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  p.pid_ = pid;
  return p;
}

Process::Process(Process&& o) noexcept { *this = std::move(o); }
Process& Process::operator=(Process&& o) noexcept {
  if (this != &o) {
    if (pid_ > 0 && running()) {
      ::kill(pid_, SIGKILL);
      wait(std::chrono::milliseconds(5000));
    }
    pid_ = o.pid_;
    exit_code_ = o.exit_code_;
    out_path_ = std::move(o.out_path_);
    err_path_ = std::move(o.err_path_);
    o.pid_ = -1;
  }
  return *this;
}

Process::~Process() {
  if (pid_ > 0 && running()) {
    ::kill(pid_, SIGKILL);
    wait(std::chrono::milliseconds(5000));
  }
}

bool Process::running() {
  if (pid_ <= 0 || exit_code_ >= 0) return false;
  int status = 0;
  pid_t r = ::waitpid(pid_, &status, WNOHANG);
  if (r == pid_) {
    exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    return false;
  }
  return true;
}

bool Process::wait(std::chrono::milliseconds timeout) {
  const auto end = std::chrono::steady_clock::now() + timeout;
  while (running()) {
    if (std::chrono::steady_clock::now() >= end) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return true;
}

void Process::kill(int signal) {
  if (pid_ > 0 && running()) ::kill(pid_, signal);
}

namespace {
std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}
}  // namespace

std::string Process::out() const { return slurp(out_path_); }
std::string Process::err() const { return slurp(err_path_); }

bool Process::wait_for_output(const std::string& text, std::chrono::milliseconds timeout, bool stderr_too) {
  const auto end = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    if (out().find(text) != std::string::npos) return true;
    if (stderr_too && err().find(text) != std::string::npos) return true;
    if (!running() || std::chrono::steady_clock::now() >= end) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

}  // namespace twinps::testing
