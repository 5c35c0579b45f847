#include "tools/subprocess.h"

#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/process/args.hpp>
#include <boost/process/child.hpp>
#include <boost/process/env.hpp>
#include <boost/process/environment.hpp>
#include <boost/process/exe.hpp>
#include <boost/process/io.hpp>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>
#include <utility>

namespace twinps::cli {

std::string self_binary() {
  char buf[PATH_MAX];
  const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return "twinps";
  return std::string(buf, static_cast<std::size_t>(n));
}

std::string make_temp_dir(const std::string& tag) {
  std::string templ = (std::filesystem::temp_directory_path() / ("twinps-" + tag + "-XXXXXX")).string();
  if (!::mkdtemp(templ.data())) throw std::runtime_error("cannot create a temp dir for " + tag);
  return templ;
}

ScratchDir::~ScratchDir() {
  std::error_code ignored;  // best effort: a leftover dir is no reason to fail a finished command
  std::filesystem::remove_all(path_, ignored);
}

Child::Child() = default;

Child Child::start(const std::vector<std::string>& args, const std::vector<std::string>& env, const std::string& dir,
                   const std::string& name) {
  namespace bp = boost::process;
  Child c;
  // Output goes to files in `dir`, or in a temp dir of the child's own that
  // goes away with the handle.
  if (dir.empty()) c.owned_dir_ = make_temp_dir("proc");
  const std::string where = dir.empty() ? c.owned_dir_ : dir;
  c.out_path_ = where + "/" + name + ".out";
  c.err_path_ = where + "/" + name + ".err";
  bp::environment environment = boost::this_process::environment();
  for (const auto& e : env) {
    const auto eq = e.find('=');
    // set(), not operator[]: Boost 1.74's find() behind operator[] compares a
    // name against shorter entries past their end (ASan reports it).
    environment.set(e.substr(0, eq), eq == std::string::npos ? std::string() : e.substr(eq + 1));
  }
  std::error_code ec;
  if (!args.empty()) {
    c.process_ = std::make_unique<bp::child>(
        bp::exe = args[0], bp::args = std::vector<std::string>(args.begin() + 1, args.end()),
        bp::std_out > c.out_path_, bp::std_err > c.err_path_, bp::std_in < bp::null, bp::env = environment, ec);
  }
  if (args.empty() || ec || !c.process_->valid()) {
    // As a shell reports it: exit code 127, the reason where stderr would be.
    c.process_.reset();
    c.exit_code_ = 127;
    std::ofstream(c.err_path_) << "cannot start " << (args.empty() ? std::string("(no program)") : args[0]) << ": "
                               << (ec ? ec.message() : std::string("unknown error")) << "\n";
    return c;
  }
  c.pid_ = c.process_->id();
  return c;
}

Child::Child(Child&& o) noexcept { *this = std::move(o); }
Child& Child::operator=(Child&& o) noexcept {
  if (this != &o) {
    stop();
    process_ = std::move(o.process_);
    pid_ = o.pid_;
    exit_code_ = o.exit_code_;
    out_path_ = std::move(o.out_path_);
    err_path_ = std::move(o.err_path_);
    remove_owned_dir();
    owned_dir_ = std::exchange(o.owned_dir_, std::string());
    o.pid_ = -1;
  }
  return *this;
}
Child::~Child() {
  stop();
  remove_owned_dir();
}

void Child::remove_owned_dir() {
  if (owned_dir_.empty()) return;
  std::error_code ignored;  // a leftover temp dir is not worth failing over
  std::filesystem::remove_all(owned_dir_, ignored);
  owned_dir_.clear();
}

bool Child::running() {
  if (pid_ <= 0) return false;
  std::error_code ec;
  if (process_->running(ec)) return true;
  // Exited (and reaped by running()), or no longer ours to wait for.
  const int status = process_->native_exit_code();
  exit_code_ = ec ? -1 : WIFEXITED(status) ? WEXITSTATUS(status) : WIFSIGNALED(status) ? 128 + WTERMSIG(status) : -1;
  pid_ = -1;
  process_.reset();
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
  kill(SIGTERM);
  if (wait(std::chrono::seconds(5))) return;
  kill(SIGKILL);
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

ReservedPort::ReservedPort(int port) {
  fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd_ < 0) return;
  const int one = 1;
  ::setsockopt(fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_ANY);
  addr.sin_port = htons(static_cast<std::uint16_t>(port));
  socklen_t len = sizeof addr;
  if (::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    ::close(fd_);
    fd_ = -1;
    return;
  }
  port_ = ntohs(addr.sin_port);
}

ReservedPort::~ReservedPort() {
  if (fd_ >= 0) ::close(fd_);
}

ReservedPort::ReservedPort(ReservedPort&& o) noexcept : fd_(std::exchange(o.fd_, -1)), port_(o.port_) {}

}  // namespace twinps::cli
