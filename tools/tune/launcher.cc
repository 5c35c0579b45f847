#include "tools/tune/launcher.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

namespace twinps::cli {

using namespace std::chrono_literals;

std::string self_binary() {
  std::error_code ec;
  auto p = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string("twinps") : p.string();
}

StatusOr<int> free_loopback_port() {
  // The kernel may hand out the same ephemeral port twice in a row once the
  // first probe is closed: remember every port given out.
  static std::set<int> given;
  for (int attempt = 0; attempt < 100; ++attempt) {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) break;
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof addr;
    const bool bound = ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
                       ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0;
    ::close(fd);
    if (bound && given.insert(ntohs(addr.sin_port)).second) return static_cast<int>(ntohs(addr.sin_port));
  }
  return absl::UnavailableError(std::string("no free loopback port: ") + std::strerror(errno));
}

StatusOr<std::string> make_temp_dir(const std::string& tag) {
  std::string pattern = (std::filesystem::temp_directory_path() / ("twinps-" + tag + "-XXXXXX")).string();
  if (::mkdtemp(pattern.data()) == nullptr)
    return absl::UnavailableError("cannot create a temporary directory: " + std::string(std::strerror(errno)));
  return pattern;
}

StatusOr<std::unique_ptr<ServerProcess>> ServerProcess::start(const std::vector<std::string>& args,
                                                              const std::vector<std::string>& env,
                                                              const std::string& log) {
  std::unique_ptr<ServerProcess> p(new ServerProcess());
  p->log_ = log;
  // Built before fork: the child only calls async-signal-safe functions.
  std::vector<std::string> args_copy = args;
  std::vector<char*> argv;
  for (auto& a : args_copy) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::vector<std::string> env_strings;
  for (char** e = environ; *e; ++e) {
    const std::string entry = *e;
    const std::string key = entry.substr(0, entry.find('='));
    bool replaced = false;
    for (const auto& x : env) replaced |= x.substr(0, x.find('=')) == key;
    if (!replaced) env_strings.push_back(entry);
  }
  env_strings.insert(env_strings.end(), env.begin(), env.end());
  std::vector<char*> envp;
  for (auto& e : env_strings) envp.push_back(e.data());
  envp.push_back(nullptr);
  const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return absl::UnavailableError("cannot write " + log + ": " + std::strerror(errno));
  const pid_t pid = ::fork();
  if (pid < 0) {
    ::close(fd);
    return absl::UnavailableError(std::string("fork failed: ") + std::strerror(errno));
  }
  if (pid == 0) {
    ::dup2(fd, 1);
    ::dup2(fd, 2);
    ::execve(argv[0], argv.data(), envp.data());
    ::_exit(127);
  }
  ::close(fd);
  p->pid_ = pid;
  return p;
}

ServerProcess::~ServerProcess() { stop(); }

bool ServerProcess::exited() {
  if (pid_ <= 0) return true;
  int status = 0;
  if (::waitpid(pid_, &status, WNOHANG) == pid_) {
    pid_ = -1;
    return true;
  }
  return false;
}

void ServerProcess::stop() {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGTERM);
  for (int i = 0; i < 100; ++i) {  // up to 2 s for a clean exit
    if (exited()) return;
    std::this_thread::sleep_for(20ms);
  }
  ::kill(pid_, SIGKILL);
  int status = 0;
  ::waitpid(pid_, &status, 0);
  pid_ = -1;
}

std::string ServerProcess::log_text() const {
  std::ifstream in(log_);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

bool ServerProcess::wait_for_log(const std::string& text, std::chrono::milliseconds timeout) {
  const auto end = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < end) {
    if (log_text().find(text) != std::string::npos) return true;
    if (exited()) return false;
    std::this_thread::sleep_for(10ms);
  }
  return false;
}

StatusOr<std::unique_ptr<ProcessCluster>> ProcessCluster::start(int workers, int ps,
                                                                const std::vector<std::string>& serve_args,
                                                                const std::string& log_dir) {
  std::unique_ptr<ProcessCluster> c(new ProcessCluster());
  std::vector<TaskId> tasks{TaskId::chief()};
  for (int i = 0; i < ps; ++i) tasks.push_back(TaskId::ps(i));
  for (int i = 0; i < workers; ++i) tasks.push_back(TaskId::worker(i));
  nlohmann::json cluster = nlohmann::json::object();
  for (const auto& t : tasks) {
    auto port = free_loopback_port();
    if (!port.ok()) return port.status();
    c->addresses_[t] = "127.0.0.1:" + std::to_string(*port);
    cluster[std::string(job_name(t.job))].push_back(c->addresses_[t]);
  }
  const std::string binary = self_binary();
  for (const auto& t : tasks) {
    if (t.job == Job::kChief) continue;
    nlohmann::json tf{{"cluster", cluster}, {"task", {{"type", std::string(job_name(t.job))}, {"index", t.index}}}};
    std::vector<std::string> args{binary, "serve"};
    args.insert(args.end(), serve_args.begin(), serve_args.end());
    const std::string log = log_dir + "/" + std::string(job_name(t.job)) + "-" + std::to_string(t.index) + ".log";
    auto p = ServerProcess::start(args, {"TF_CONFIG=" + tf.dump()}, log);
    if (!p.ok()) return p.status();
    c->servers_.push_back(std::move(*p));
  }
  for (std::size_t i = 0; i < c->servers_.size(); ++i) {
    auto& s = *c->servers_[i];
    if (!s.wait_for_log("serving on", 30s))
      return absl::UnavailableError("a twinps serve process did not start:\n" + s.log_text());
  }
  return c;
}

ProcessCluster::~ProcessCluster() {
  // SIGTERM to all first, so they wind down together.
  for (auto& s : servers_)
    if (s->pid() > 0) ::kill(s->pid(), SIGTERM);
  servers_.clear();
}

std::string ProcessCluster::address(const TaskId& t) const {
  auto it = addresses_.find(t);
  return it == addresses_.end() ? std::string() : it->second;
}

}  // namespace twinps::cli
