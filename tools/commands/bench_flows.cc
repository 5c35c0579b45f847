// twinps bench flows: which network model predicts concurrent TCP streams
// on this machine's loopback — first come first served per link (the
// simulator's FIFO) or max-min fair sharing (FLOW)?
//
// For each stream count N (--streams, 1..8) and size S (--sizes), N
// connections are opened, then N sender threads each write their stream at
// the same instant (a barrier) and N receiver threads read them; each
// stream's completion is the time its last byte was read, from the instant
// the first sender began.
// Two shapes: "equal" (N streams of S bytes) and "mixed" (stream i carries
// (i + 1) x S / N bytes, so they end at different times). Each case runs
// --repeats times; the k-th completion (sorted) is the median over repeats.
//
// Predictions come from the simulator's own models: the loopback as one
// link whose capacity is the single-stream throughput measured here
// (N = 1 at the largest size) and whose latency is half a one-byte round
// trip. FIFO: streams cross it one after another; FLOW (sim/fluid.h): they
// share it max-min fair. The error of a model is |predicted - measured| /
// measured over every stream's completion; the summary gives each model's
// median and mean over all cases.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <barrier>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

#include "inmemory/deterministic_engine.h"
#include "sim/fluid.h"
#include "tools/cli.h"
#include "tools/commands/commands.h"
#include "tools/tune/calibration.h"

namespace twinps::cli {
namespace {

using Clock = std::chrono::steady_clock;

struct Socket {
  int fd = -1;
  Socket() = default;
  explicit Socket(int f) : fd(f) {}
  Socket(Socket&& o) noexcept : fd(std::exchange(o.fd, -1)) {}
  Socket& operator=(Socket&& o) noexcept {
    if (fd >= 0) ::close(fd);
    fd = std::exchange(o.fd, -1);
    return *this;
  }
  ~Socket() {
    if (fd >= 0) ::close(fd);
  }
};

bool write_all(int fd, const char* p, std::size_t n) {
  while (n > 0) {
    const ssize_t w = ::send(fd, p, n, MSG_NOSIGNAL);
    if (w <= 0) return false;
    p += w;
    n -= static_cast<std::size_t>(w);
  }
  return true;
}

bool read_all(int fd, char* p, std::size_t n) {
  while (n > 0) {
    const ssize_t r = ::recv(fd, p, n, 0);
    if (r <= 0) return false;
    n -= static_cast<std::size_t>(r);
  }
  return true;
}

// N connected pairs on loopback: (sender end, receiver end).
std::vector<std::pair<Socket, Socket>> connect_pairs(int n, bool unix_socket = false) {
  if (unix_socket) {
    // What the data plane uses between tasks of one host (net/data_plane.h).
    std::vector<std::pair<Socket, Socket>> out;
    for (int i = 0; i < n; ++i) {
      int fds[2];
      if (::socketpair(AF_UNIX, SOCK_STREAM, 0, fds) != 0) throw std::runtime_error("cannot make a Unix socket pair");
      out.emplace_back(Socket(fds[0]), Socket(fds[1]));
    }
    return out;
  }
  Socket listener(::socket(AF_INET, SOCK_STREAM, 0));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  if (::bind(listener.fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || ::listen(listener.fd, 64) != 0)
    throw std::runtime_error("cannot listen on loopback");
  socklen_t len = sizeof addr;
  ::getsockname(listener.fd, reinterpret_cast<sockaddr*>(&addr), &len);
  std::vector<std::pair<Socket, Socket>> out;
  for (int i = 0; i < n; ++i) {
    Socket s(::socket(AF_INET, SOCK_STREAM, 0));
    int one = 1;
    ::setsockopt(s.fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (::connect(s.fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0)
      throw std::runtime_error("cannot connect on loopback");
    Socket r(::accept(listener.fd, nullptr, nullptr));
    if (r.fd < 0) throw std::runtime_error("accept failed");
    out.emplace_back(std::move(s), std::move(r));
  }
  return out;
}

// One run: stream i carries sizes[i] bytes; returns each stream's completion
// (s), from the instant the first sender began writing (so that waking the
// threads up is not counted).
std::vector<double> run_streams(const std::vector<std::size_t>& sizes, bool unix_socket = false) {
  const int n = static_cast<int>(sizes.size());
  auto pairs = connect_pairs(n, unix_socket);
  const std::size_t most = *std::max_element(sizes.begin(), sizes.end());
  std::vector<std::vector<char>> out(static_cast<std::size_t>(n), std::vector<char>(most, 'x'));
  std::vector<std::vector<char>> in(static_cast<std::size_t>(n), std::vector<char>(most));
  std::vector<Clock::time_point> began(static_cast<std::size_t>(n)), ended(static_cast<std::size_t>(n));
  std::barrier start(2 * n);
  std::atomic<bool> ok{true};
  {
    std::vector<std::jthread> threads;
    for (int i = 0; i < n; ++i) {
      const auto k = static_cast<std::size_t>(i);
      threads.emplace_back([&, k] {
        start.arrive_and_wait();
        began[k] = Clock::now();
        if (!write_all(pairs[k].first.fd, out[k].data(), sizes[k])) ok = false;
      });
      threads.emplace_back([&, k] {
        start.arrive_and_wait();
        if (!read_all(pairs[k].second.fd, in[k].data(), sizes[k])) ok = false;
        ended[k] = Clock::now();
      });
    }
  }
  if (!ok) throw std::runtime_error("a stream failed");
  const Clock::time_point t0 = *std::min_element(began.begin(), began.end());
  std::vector<double> done;
  for (const auto& e : ended) done.push_back(std::chrono::duration<double>(e - t0).count());
  return done;
}

// Half the round trip of one byte: the loopback's latency.
double measure_latency(int repeats) {
  auto pairs = connect_pairs(1);
  const int rounds = repeats * 50;
  std::jthread echo([&] {
    char c;
    for (int i = 0; i < rounds; ++i)
      if (!read_all(pairs[0].second.fd, &c, 1) || !write_all(pairs[0].second.fd, &c, 1)) return;
  });
  char b = 'x';
  std::vector<double> rtts;
  for (int i = 0; i < rounds; ++i) {
    const auto t0 = Clock::now();
    if (!write_all(pairs[0].first.fd, &b, 1) || !read_all(pairs[0].first.fd, &b, 1))
      throw std::runtime_error("the echo failed");
    rtts.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
  }
  return median(rtts) / 2;
}

}  // namespace

double loopback_stream_bytes_per_s(std::size_t bytes, int repeats) {
  std::vector<double> rates;
  for (int r = 0; r < std::max(repeats, 1); ++r) rates.push_back(static_cast<double>(bytes) / run_streams({bytes}).at(0));
  return median(rates);
}

double unix_stream_bytes_per_s(std::size_t bytes, int repeats) {
  std::vector<double> rates;
  for (int r = 0; r < std::max(repeats, 1); ++r)
    rates.push_back(static_cast<double>(bytes) / run_streams({bytes}, true).at(0));
  return median(rates);
}

namespace {

// The models' completion times for `sizes` started together on one link of
// `bytes_per_s` and `latency_s`.
std::vector<double> predict_fifo(const std::vector<std::size_t>& sizes, double bytes_per_s, double latency_s) {
  std::vector<double> out;
  double t = 0;
  for (std::size_t s : sizes) {
    t += static_cast<double>(s) / bytes_per_s;
    out.push_back(latency_s + t);
  }
  return out;
}

std::vector<double> predict_flow(const std::vector<std::size_t>& sizes, double bytes_per_s, double latency_s) {
  DeterministicEngine engine;
  NodeExecutor ex(engine, engine.add_node());
  sim::FluidSystem fluid(ex);
  const int link = fluid.add_resource(bytes_per_s / 1e9);
  std::vector<double> out(sizes.size(), 0);
  for (std::size_t i = 0; i < sizes.size(); ++i)
    fluid.start(static_cast<double>(sizes[i]), std::vector<int>{link}, sim::FluidSystem::kUnbounded, 1,
                [&out, &engine, i] { out[i] = to_seconds(engine.now()); });
  engine.run();
  for (double& t : out) t += latency_s;
  return out;
}

std::vector<std::size_t> parse_sizes(const std::string& list) {
  std::vector<std::size_t> out;
  std::stringstream in(list);
  for (std::string item; std::getline(in, item, ',');) {
    std::size_t mult = 1;
    if (!item.empty() && (item.back() == 'K' || item.back() == 'k')) mult = 1 << 10, item.pop_back();
    if (!item.empty() && (item.back() == 'M' || item.back() == 'm')) mult = 1 << 20, item.pop_back();
    const long v = std::stol(item);
    if (v <= 0) throw std::invalid_argument(item);
    out.push_back(static_cast<std::size_t>(v) * mult);
  }
  return out;
}

}  // namespace

int run_bench_flows(int argc, char** argv) {
  std::string sizes_flag = "64K,1M,16M";
  int max_streams = 8, repeats = 5;
  po::options_description opts("twinps bench flows options");
  opts.add_options()("help,h", "show this help")
      ("sizes", po::value(&sizes_flag)->default_value("64K,1M,16M"), "stream sizes (K and M suffixes)")
      ("streams", po::value(&max_streams)->default_value(8), "up to this many concurrent streams (1, 2, 4, ...)")
      ("repeats", po::value(&repeats)->default_value(5), "runs of each case; medians");
  po::variables_map vm;
  if (int rc = parse(argc, argv,
                     "usage: twinps bench flows [--sizes 64K,1M,16M] [--streams 8] [--repeats 5]\n\n"
                     "Concurrent TCP streams on loopback against the simulator's FIFO and FLOW network models.",
                     opts, vm);
      rc >= 0)
    return rc;
  std::vector<std::size_t> sizes;
  try {
    sizes = parse_sizes(sizes_flag);
  } catch (const std::exception&) {
    std::fprintf(stderr, "twinps bench flows: --sizes: \"%s\" is not a list of positive sizes\n", sizes_flag.c_str());
    return kExitBadInput;
  }
  if (sizes.empty() || max_streams < 1 || max_streams > 64 || repeats < 1 || repeats > 100) {
    std::fprintf(stderr, "twinps bench flows: --streams must be 1..64, --repeats 1..100, --sizes not empty\n");
    return kExitBadInput;
  }
  std::vector<int> counts;
  for (int n = 1; n <= max_streams; n *= 2) counts.push_back(n);
  if (counts.back() != max_streams) counts.push_back(max_streams);

  try {
    std::printf("load average before: %s\n", load_average().c_str());
    const double latency = measure_latency(repeats);
    // The link's capacity: one stream of the largest size alone.
    const std::size_t largest = *std::max_element(sizes.begin(), sizes.end());
    std::vector<double> alone;
    for (int r = 0; r < repeats; ++r) alone.push_back(run_streams({largest})[0]);
    const double capacity = static_cast<double>(largest) / std::max(median(alone) - latency, 1e-9);
    std::printf("loopback: latency %.1f us (half a 1-byte round trip), one stream %.2f GB/s (%zu bytes)\n",
                latency * 1e6, capacity / 1e9, largest);
    std::printf("%-6s %8s %7s %10s %10s %10s %9s %9s\n", "shape", "size", "streams", "measured", "fifo", "flow",
                "fifo err", "flow err");
    std::vector<double> fifo_errors, flow_errors;
    for (const char* shape : {"equal", "mixed"}) {
      for (std::size_t size : sizes) {
        for (int n : counts) {
          if (std::string(shape) == "mixed" && n == 1) continue;
          std::vector<std::size_t> streams;
          for (int i = 0; i < n; ++i)
            streams.push_back(std::string(shape) == "equal" ? size
                                                            : std::max<std::size_t>(1, size * static_cast<std::size_t>(i + 1) / static_cast<std::size_t>(n)));
          // The k-th completion over repeats.
          std::vector<std::vector<double>> by_rank(static_cast<std::size_t>(n));
          for (int r = 0; r < repeats; ++r) {
            auto done = run_streams(streams);
            std::sort(done.begin(), done.end());
            for (int k = 0; k < n; ++k) by_rank[static_cast<std::size_t>(k)].push_back(done[static_cast<std::size_t>(k)]);
          }
          std::vector<std::size_t> sorted = streams;
          std::sort(sorted.begin(), sorted.end());  // FIFO's best order (shortest first), as measured ranks
          auto fifo = predict_fifo(sorted, capacity, latency);
          auto flow = predict_flow(streams, capacity, latency);
          std::sort(flow.begin(), flow.end());
          double measured_sum = 0, fifo_sum = 0, flow_sum = 0;
          std::vector<double> fe, le;
          for (int k = 0; k < n; ++k) {
            const double m = median(by_rank[static_cast<std::size_t>(k)]);
            const auto kk = static_cast<std::size_t>(k);
            fe.push_back(std::abs(fifo[kk] - m) / m);
            le.push_back(std::abs(flow[kk] - m) / m);
            fifo_errors.push_back(fe.back());
            flow_errors.push_back(le.back());
            measured_sum += m;
            fifo_sum += fifo[kk];
            flow_sum += flow[kk];
          }
          std::printf("%-6s %7zuK %7d %8.3f ms %7.3f ms %7.3f ms %8.1f%% %8.1f%%\n", shape, size >> 10, n,
                      measured_sum / n * 1e3, fifo_sum / n * 1e3, flow_sum / n * 1e3, median(fe) * 100,
                      median(le) * 100);
        }
      }
    }
    auto mean = [](const std::vector<double>& v) {
      double s = 0;
      for (double x : v) s += x;
      return v.empty() ? 0 : s / static_cast<double>(v.size());
    };
    std::printf("\nevery stream's completion, |predicted - measured| / measured:\n");
    std::printf("  FIFO: median %.1f %%, mean %.1f %%\n", median(fifo_errors) * 100, mean(fifo_errors) * 100);
    std::printf("  FLOW: median %.1f %%, mean %.1f %%\n", median(flow_errors) * 100, mean(flow_errors) * 100);
    std::printf("load average after: %s\n", load_average().c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "twinps bench flows: %s\n", e.what());
    return kExitFailed;
  }
  return kExitOk;
}

}  // namespace twinps::cli
