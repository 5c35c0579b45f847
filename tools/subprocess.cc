#include "tools/subprocess.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <climits>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <stdexcept>
#include <thread>

namespace twinps::cli {

std::string self_binary() {
  char buf[PATH_MAX];
  const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return "twinps";
  return std::string(buf, static_cast<std::size_t>(n));
}

int free_port() {
  static std::set<int> given;  // the kernel may hand out a just-closed port again
  for (int attempt = 0; attempt < 100; ++attempt) {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
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
  throw std::runtime_error("no free port on 127.0.0.1");
}

std::string make_temp_dir(const std::string& tag) {
  std::string templ = (std::filesystem::temp_directory_path() / ("twinps-" + tag + "-XXXXXX")).string();
  if (!::mkdtemp(templ.data())) throw std::runtime_error("cannot create a temp dir for " + tag);
  return templ;
}

Child Child::start(const std::vector<std::string>& args, const std::vector<std::string>& env, const std::string& dir,
                   const std::string& name) {
  Child c;
  const std::string where = dir.empty() ? make_temp_dir("proc") : dir;
  c.out_path_ = where + "/" + name + ".out";
  c.err_path_ = where + "/" + name + ".err";
  const pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error("fork failed");
  if (pid == 0) {
    const int out = ::open(c.out_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int err = ::open(c.err_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ::dup2(out, 1);
    ::dup2(err, 2);
    for (const auto& e : env) ::putenv(const_cast<char*>(e.c_str()));
    std::vector<char*> argv;
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  c.pid_ = pid;
  return c;
}

Child::Child(Child&& o) noexcept { *this = std::move(o); }
Child& Child::operator=(Child&& o) noexcept {
  if (this != &o) {
    stop();
    pid_ = o.pid_;
    exit_code_ = o.exit_code_;
    out_path_ = std::move(o.out_path_);
    err_path_ = std::move(o.err_path_);
    o.pid_ = -1;
  }
  return *this;
}
Child::~Child() { stop(); }

bool Child::running() {
  if (pid_ <= 0) return false;
  int status = 0;
  if (::waitpid(pid_, &status, WNOHANG) != pid_) return true;
  exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  pid_ = -1;
  return false;
}

bool Child::wait(std::chrono::milliseconds timeout) {
  const auto until = std::chrono::steady_clock::now() + timeout;
  while (running()) {
    if (std::chrono::steady_clock::now() >= until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return true;
}

void Child::terminate() { kill(SIGTERM); }

void Child::kill(int signal) {
  if (pid_ > 0) ::kill(pid_, signal);
}

void Child::stop() {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGTERM);
  if (wait(std::chrono::seconds(5))) return;
  ::kill(pid_, SIGKILL);
  wait(std::chrono::seconds(5));
}

namespace {
std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}
}  // namespace

std::string Child::out() const { return slurp(out_path_); }
std::string Child::err() const { return slurp(err_path_); }

bool Child::wait_for_output(const std::string& text, std::chrono::milliseconds timeout) {
  const auto until = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    if (out().find(text) != std::string::npos || err().find(text) != std::string::npos) return true;
    if (!running()) return out().find(text) != std::string::npos || err().find(text) != std::string::npos;
    if (std::chrono::steady_clock::now() >= until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

}  // namespace twinps::cli
