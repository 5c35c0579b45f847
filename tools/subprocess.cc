#include "tools/subprocess.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
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

namespace {

// The environment a child starts with: this process's, with `overrides`
// ("K=V") replacing or adding entries.
std::vector<std::string> child_environment(const std::vector<std::string>& overrides) {
  std::vector<std::string> out;
  for (char** e = environ; e && *e; ++e) out.emplace_back(*e);
  for (const auto& entry : overrides) {
    const std::string name = entry.substr(0, entry.find('=')) + "=";
    std::erase_if(out, [&name](const std::string& e) { return e.compare(0, name.size(), name) == 0; });
    out.push_back(entry.find('=') == std::string::npos ? entry + "=" : entry);
  }
  return out;
}

// The char* array execve wants, pointing into `strings` (which must outlive it).
std::vector<char*> pointers(std::vector<std::string>& strings) {
  std::vector<char*> out;
  for (auto& s : strings) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

// A started child's pid, or the errno of why it could not be started.
struct Spawned {
  pid_t pid = -1;
  int error = 0;
};

// Starts `args` with stdin from /dev/null and stdout/stderr to the files.
Spawned spawn(std::vector<std::string> args, std::vector<std::string> environment, const std::string& out_path,
              const std::string& err_path) {
  posix_spawn_file_actions_t files;
  posix_spawnattr_t attributes;
  ::posix_spawn_file_actions_init(&files);
  ::posix_spawnattr_init(&attributes);
  ::posix_spawn_file_actions_addopen(&files, 0, "/dev/null", O_RDONLY, 0);
  ::posix_spawn_file_actions_addopen(&files, 1, out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  ::posix_spawn_file_actions_addopen(&files, 2, err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  // The child starts with no signal blocked, whatever the spawning thread blocks.
  sigset_t none;
  sigemptyset(&none);
  ::posix_spawnattr_setsigmask(&attributes, &none);
  ::posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETSIGMASK);
  std::vector<char*> argv = pointers(args), envp = pointers(environment);
  pid_t pid = -1;
  const int error = ::posix_spawn(&pid, argv[0], &files, &attributes, argv.data(), envp.data());
  ::posix_spawnattr_destroy(&attributes);
  ::posix_spawn_file_actions_destroy(&files);
  return error != 0 ? Spawned{-1, error} : Spawned{pid, 0};
}

}  // namespace

Child Child::start(const std::vector<std::string>& args, const std::vector<std::string>& env, const std::string& dir,
                   const std::string& name) {
  Child c;
  // Output goes to files in `dir`, or in a temp dir of the child's own that
  // goes away with the handle.
  if (dir.empty()) c.owned_dir_ = make_temp_dir("proc");
  const std::string where = dir.empty() ? c.owned_dir_ : dir;
  c.out_path_ = where + "/" + name + ".out";
  c.err_path_ = where + "/" + name + ".err";
  const Spawned started =
      args.empty() ? Spawned{-1, ENOENT} : spawn(args, child_environment(env), c.out_path_, c.err_path_);
  if (started.error != 0) {
    // As a shell reports it: exit code 127, the reason where stderr would be.
    c.exit_code_ = 127;
    std::ofstream(c.err_path_) << "cannot start " << (args.empty() ? std::string("(no program)") : args[0]) << ": "
                               << std::strerror(started.error) << "\n";
    return c;
  }
  c.pid_ = started.pid;
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
  int status = 0;
  pid_t reaped = ::waitpid(pid_, &status, WNOHANG);
  while (reaped < 0 && errno == EINTR) reaped = ::waitpid(pid_, &status, WNOHANG);
  if (reaped == 0) return true;
  // Exited (and reaped now), or no longer ours to wait for (-1: ECHILD).
  const bool exited = reaped > 0 && WIFEXITED(status), killed = reaped > 0 && WIFSIGNALED(status);
  exit_code_ = exited ? WEXITSTATUS(status) : killed ? 128 + WTERMSIG(status) : -1;
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
