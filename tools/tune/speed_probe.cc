#include "tools/tune/speed_probe.h"

#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <iterator>
#include <thread>
#include <vector>

#include "core/models/synthetic/synthetic.h"
#include "core/runtime/random.h"

namespace twinps::cli {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// One-byte round trips over a Unix socket pair between this thread and an
// echoing one, per round trip: both threads' CPU seconds, and the wall
// seconds. Over about `seconds` (at most 100,000 round trips); zeros if the
// pair cannot be made.
struct RoundTrip {
  double cpu_s = 0;
  double wall_s = 0;
};
RoundTrip time_round_trips(double seconds) {
  int fds[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM, 0, fds) != 0) return {};
  constexpr int kMax = 100000;
  double echo_cpu = 0;
  std::jthread echo([fd = fds[1], &echo_cpu] {
    const double cpu0 = thread_cpu_seconds();
    char c;
    while (::read(fd, &c, 1) == 1 && c != 0)
      if (::write(fd, &c, 1) != 1) break;
    echo_cpu = thread_cpu_seconds() - cpu0;
  });
  int n = 0;
  const auto t0 = Clock::now();
  const double cpu0 = thread_cpu_seconds();
  char c = 1;
  for (; n < kMax && (n < 20 || seconds_since(t0) < seconds); ++n)
    if (::write(fds[0], &c, 1) != 1 || ::read(fds[0], &c, 1) != 1) break;
  const double mine = thread_cpu_seconds() - cpu0;
  const double wall = seconds_since(t0);
  c = 0;  // tells the echo thread to stop
  [[maybe_unused]] const auto w = ::write(fds[0], &c, 1);
  echo.join();
  ::close(fds[0]);
  ::close(fds[1]);
  if (n == 0) return {};
  // The echo thread's CPU includes its wait for the stop byte: at most one
  // more read, nothing against thousands of round trips.
  return RoundTrip{(mine + echo_cpu) / n, wall / n};
}

// The probe's kernels: one call of each is a basket. Three regimes of
// synthetic::compute_gradient, from the calibration's shapes: a 1 MiB
// variable at a small batch (streams its values), a square one at a middle
// batch (arithmetic-bound), a narrow one at a large batch (its batch x rows
// input outweighs the FLOPs). One kernel alone slowed down by 1.0-1.85x
// between runs here while the models' kernels did not follow it.
struct ProbeKernel {
  Matrix w;
  int batch;
};
std::vector<ProbeKernel> probe_kernels() {
  return {{Matrix::Constant(4096, 64, 0.01f), 32}, {Matrix::Constant(512, 512, 0.01f), 64},
          {Matrix::Constant(2048, 4, 0.01f), 512}};
}

// CPU seconds per basket over about `seconds` (at least one basket).
double basket_cpu_seconds(const std::vector<ProbeKernel>& kernels, double seconds) {
  double sum = 0;
  for (const ProbeKernel& k : kernels) sum += gradient_cpu_seconds(k.w, k.batch, seconds / static_cast<double>(kernels.size()));
  return sum;
}

// The median of five timings of about a fifth of `seconds` each: a burst of
// someone else's load spoils one of them, not the probe.
template <typename Timed>
double median_of_five(double seconds, Timed timed) {
  double t[5];
  for (double& one : t) one = timed(seconds / 5);
  std::sort(std::begin(t), std::end(t));
  return t[2];
}

// The row probe: 2,048 rows of 64 floats at random places of a 32 MiB table
// (larger than this machine's caches, as an embedding is) gathered into a
// buffer and added back, as a ps's row pull and sparse SGD push do. The ids
// are drawn once, 64 sets of them, so a timing is the rows' work alone.
class RowProbe {
 public:
  static constexpr std::size_t kWidth = 64, kTableRows = (32u << 20) / (kWidth * 4), kRows = 2048, kSets = 64;

  RowProbe() : table_(kTableRows * kWidth, 0.01f), buffer_(kRows * kWidth) {
    RandomStream random(1);  // any fixed sequence of places will do
    for (auto& set : sets_) {
      set.resize(kRows);
      for (auto& id : set) id = static_cast<std::uint32_t>(random.below(kTableRows));
      std::sort(set.begin(), set.end());  // a ps visits a request's rows in order
    }
  }

  // CPU seconds per row over about `seconds` (at least one set).
  double cpu_seconds_per_row(double seconds) {
    std::size_t calls = 0;
    const auto t0 = Clock::now();
    const double cpu0 = thread_cpu_seconds();
    do {
      gather_and_add(sets_[next_++ % kSets]);
      ++calls;
    } while (seconds_since(t0) < seconds);
    return (thread_cpu_seconds() - cpu0) / static_cast<double>(calls * kRows);
  }

 private:
  void gather_and_add(const std::vector<std::uint32_t>& ids) {
    for (std::size_t j = 0; j < ids.size(); ++j)
      std::copy_n(&table_[ids[j] * kWidth], kWidth, &buffer_[j * kWidth]);
    for (std::size_t j = 0; j < ids.size(); ++j) {
      float* row = &table_[ids[j] * kWidth];
      for (std::size_t c = 0; c < kWidth; ++c) row[c] -= 1e-6f * buffer_[j * kWidth + c];
    }
  }

  std::vector<float> table_, buffer_;
  std::vector<std::uint32_t> sets_[kSets];
  std::size_t next_ = 0;
};

// How many times longer the probe's kernels take, in CPU time, when
// `threads` threads run them at once than when one does (>= 1), and the CPU
// seconds of one basket of them alone. Timed for about `seconds`.
struct ComputeProbe {
  double alone_s = 0;
  double slowdown = 1;
};
ComputeProbe probe_compute(int threads, double seconds) {
  const std::vector<ProbeKernel> kernels = probe_kernels();
  basket_cpu_seconds(kernels, seconds / 4);  // warm: first-touch pages, clock ramp-up
  auto timed = [&kernels](double s) { return basket_cpu_seconds(kernels, s); };
  ComputeProbe out;
  out.alone_s = median_of_five(seconds, timed);
  if (threads <= 1 || out.alone_s <= 0) return out;
  std::vector<double> together(static_cast<std::size_t>(threads));
  {
    std::vector<std::jthread> running;
    for (auto& t : together) running.emplace_back([&t, &timed, seconds] { t = median_of_five(seconds, timed); });
  }
  // The mean over the threads: each ran as long, on its own core.
  double sum = 0;
  for (double t : together) sum += t;
  out.slowdown = std::max(sum / static_cast<double>(threads) / out.alone_s, 1.0);
  return out;
}

void scale(scenario::Compute& c, double f) {
  if (c.has_per_example_s()) c.set_per_example_s(c.per_example_s() * f);
  if (c.has_per_gflop_s()) c.set_per_gflop_s(c.per_gflop_s() * f);
  for (auto& k : *c.mutable_kernel()) {
    k.set_per_call_us(k.per_call_us() * f);
    k.set_per_gflop_s(k.per_gflop_s() * f);
    k.set_per_gib_s(k.per_gib_s() * f);
    k.set_per_ginput_s(k.per_ginput_s() * f);
    if (k.has_per_record_us()) k.set_per_record_us(k.per_record_us() * f);
    if (k.has_per_gflop_per_doubling_s()) k.set_per_gflop_per_doubling_s(k.per_gflop_per_doubling_s() * f);
  }
}

// A ps's prices of rows at random places of its tables: pulled (per row,
// per KiB of their values) and pushed, each optimizer's scatter.
void scale_rows(scenario::PsService& ps, double f) {
  if (ps.has_per_row_us()) ps.set_per_row_us(ps.per_row_us() * f);  // unset: the schema's default stays
  if (ps.has_per_row_kib_us()) ps.set_per_row_kib_us(ps.per_row_kib_us() * f);
  for (auto& a : *ps.mutable_apply()) {
    if (a.has_per_row_pushed_us()) a.set_per_row_pushed_us(a.per_row_pushed_us() * f);
    if (a.has_per_row_pushed_kib_us()) a.set_per_row_pushed_kib_us(a.per_row_pushed_kib_us() * f);
  }
}

}  // namespace

double thread_cpu_seconds() {
  timespec ts{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

double gradient_cpu_seconds(const Matrix& w, int batch, double seconds) {
  int n = 0;
  double sink = 0;
  const auto t0 = Clock::now();
  const double cpu0 = thread_cpu_seconds();
  while (n < 3 || seconds_since(t0) < seconds) {
    sink += synthetic::compute_gradient(w, batch)(0, 0);
    ++n;
  }
  const double t = (thread_cpu_seconds() - cpu0) / n;
  return std::isfinite(sink) ? t : 0;  // reading the result keeps the work from being optimised away
}

double row_cpu_us(double seconds) {
  static RowProbe probe;  // its table built once per process
  probe.cpu_seconds_per_row(seconds / 10);  // warm: the sets' pages, the clock
  return median_of_five(seconds, [](double s) { return probe.cpu_seconds_per_row(s); }) * 1e6;
}

scenario::MachineSpeed probe_compute_speed(double seconds) {
  const int online = static_cast<int>(std::max(1L, ::sysconf(_SC_NPROCESSORS_ONLN)));
  const ComputeProbe compute = probe_compute(online, seconds);
  scenario::MachineSpeed s;
  s.set_compute_us(compute.alone_s * 1e6);
  s.set_together_slowdown(compute.slowdown);
  return s;
}

scenario::MachineSpeed probe_machine_speed(double seconds) {
  scenario::MachineSpeed s = probe_compute_speed(seconds / 2);
  // Five timings; each figure is its own median over them.
  std::vector<double> cpu, hand_off;
  for (int i = 0; i < 5; ++i) {
    const RoundTrip r = time_round_trips(seconds / 20);
    cpu.push_back(r.cpu_s);
    hand_off.push_back(std::max(0.0, r.wall_s - r.cpu_s) / 2);
  }
  std::sort(cpu.begin(), cpu.end());
  std::sort(hand_off.begin(), hand_off.end());
  s.set_round_trip_us(cpu[2] * 1e6);
  s.set_hand_off_us(hand_off[2] * 1e6);
  s.set_row_us(row_cpu_us(seconds / 4));
  return s;
}

scenario::MachineSpeed calibration_speed(const scenario::MachineSpeed& before, const scenario::MachineSpeed& between,
                                         const scenario::MachineSpeed& after) {
  auto median_of_three = [](double a, double b, double c) { return std::max(std::min(a, b), std::min(std::max(a, b), c)); };
  scenario::MachineSpeed s;
  s.set_compute_us(median_of_three(before.compute_us(), between.compute_us(), after.compute_us()));
  s.set_together_slowdown(
      median_of_three(before.together_slowdown(), between.together_slowdown(), after.together_slowdown()));
  s.set_round_trip_us((before.round_trip_us() + after.round_trip_us()) / 2);
  s.set_hand_off_us((before.hand_off_us() + after.hand_off_us()) / 2);
  return s;
}

double usable_cores(int online, const scenario::MachineSpeed& speed) {
  return std::max(1, online) / std::max(1.0, speed.together_slowdown());
}

SpeedRatios speed_ratios(const scenario::MachineSpeed& measured, const scenario::MachineSpeed& now) {
  SpeedRatios r;
  if (measured.compute_us() > 0 && now.compute_us() > 0) r.compute = now.compute_us() / measured.compute_us();
  if (measured.round_trip_us() > 0 && now.round_trip_us() > 0)
    r.messages = now.round_trip_us() / measured.round_trip_us();
  if (measured.row_us() > 0 && now.row_us() > 0) r.rows = now.row_us() / measured.row_us();
  return r;
}

scenario::CostProfile at_speed(const scenario::CostProfile& profile, const scenario::MachineSpeed& now,
                               int online_cores) {
  scenario::CostProfile out = profile;
  const SpeedRatios r = speed_ratios(profile.speed(), now);
  if (out.has_compute()) scale(*out.mutable_compute(), r.compute);
  if (out.has_ps_service()) scale_rows(*out.mutable_ps_service(), r.rows);
  if (now.has_together_slowdown() && profile.has_speed()) out.mutable_hosts()->set_cores(usable_cores(online_cores, now));
  return out;
}

}  // namespace twinps::cli
