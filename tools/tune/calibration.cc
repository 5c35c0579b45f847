#include "tools/tune/calibration.h"

#include <spdlog/spdlog.h>

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <thread>

#include <Eigen/Dense>
#include <google/protobuf/text_format.h>

#include "core/models/synthetic/synthetic.h"
#include "core/runtime/block_on.h"
#include "net/grpc_transport.h"
#include "sim/tuner.h"
#include "sim/workload.h"
#include "tools/cli.h"
#include "tools/data_plane_flag.h"
#include "tools/tune/process_cluster.h"
#include "tools/tune/real_run.h"

namespace twinps::cli {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// CPU time every thread of process `pid` has used, in seconds: the first
// field of /proc/<pid>/task/<tid>/schedstat is nanoseconds on a CPU (finer
// than the clock ticks of /proc/<pid>/stat).
double process_cpu_seconds(int pid) {
  double ns = 0;
  std::error_code ec;
  for (const auto& task : std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/task", ec)) {
    std::ifstream in(task.path() / "schedstat");
    double on_cpu = 0;
    if (in >> on_cpu) ns += on_cpu;
  }
  return ns * 1e-9;
}

// Least squares in relative terms: the coefficients b minimising the sum of
// ((X b - y) / y)^2, so that a 20 us call weighs as much as a 4 ms one and
// the intercept (the per-request cost) comes from the small calls.
std::vector<double> least_squares(const std::vector<std::vector<double>>& x, const std::vector<double>& y) {
  Eigen::MatrixXd a(static_cast<Eigen::Index>(x.size()), static_cast<Eigen::Index>(x.at(0).size()));
  Eigen::VectorXd b(static_cast<Eigen::Index>(y.size()));
  for (std::size_t i = 0; i < x.size(); ++i) {
    const double w = y[i] > 0 ? 1 / y[i] : 1;
    for (std::size_t j = 0; j < x[i].size(); ++j)
      a(static_cast<Eigen::Index>(i), static_cast<Eigen::Index>(j)) = w * x[i][j];
    b(static_cast<Eigen::Index>(i)) = w * y[i];
  }
  const Eigen::VectorXd coef = a.colPivHouseholderQr().solve(b);
  return std::vector<double>(coef.data(), coef.data() + coef.size());
}

// One kind of call, repeated: what it carries and what it cost.
struct Probe {
  std::string name;
  std::function<Request()> request;
  double kib = 0;   // request + reply payload, as the simulator's per-KiB cost counts it
  double rows = 0;  // rows the store updates
  double rtt_s = 0;     // median round trip, seen by the caller
  double ps_cpu_s = 0;  // median ps CPU time per call, less its idle use
};

// This process as the chief of a real cluster, calling ps:0 one call at a time.
class PsProber {
 public:
  PsProber(const CalibrationOptions& o, ProcessCluster& cluster, int ps_pid, double idle_cpu_per_s)
      : o_(o), cluster_(cluster), ps_pid_(ps_pid), idle_cpu_per_s_(idle_cpu_per_s) {}

  Status connect() {
    net::GrpcTransportOptions t;
    if (!apply_data_plane("calibrate", o_.data_plane, &t)) return absl::InvalidArgumentError("bad data plane");
    t.resolve = net::address_map(cluster_.addresses());
    t.max_message_bytes = std::size_t{512} << 20;
    auto transport = net::GrpcTransport::create(TaskId::chief(), ex_, t);
    if (!transport.ok()) return transport.status();
    transport_ = std::move(*transport);
    return absl::OkStatus();
  }

  StatusOr<Response> call(Request request) {
    CallOptions options{ex_.now() + 60 * kSecond, {}, 0};
    if (std::holds_alternative<PushRequest>(request)) options.request_id = ++pushes_;  // pushes carry ids (dedup)
    auto f = call_async(ex_, *transport_, TaskId::ps(0), std::move(request), std::move(options));
    auto r = block_on(ex_, [](Future<StatusOr<Response>> f) -> Task<StatusOr<Response>> { co_return co_await f; }(
                               std::move(f)));
    if (!r) return absl::DeadlineExceededError("no answer from ps:0");
    return std::move(*r);
  }

  // Times `p`'s call: `repeats` batches of about `seconds_per_batch` each.
  Status measure(Probe& p) {
    for (int i = 0; i < 3; ++i)  // connections, first-touch allocations
      if (auto r = call(p.request()); !r.ok()) return r.status();
    std::vector<double> rtts, cpus;
    for (int b = 0; b < o_.repeats; ++b) {
      std::vector<double> batch;
      const double cpu0 = process_cpu_seconds(ps_pid_);
      const auto t0 = Clock::now();
      while (batch.size() < 5 || seconds_since(t0) < o_.seconds_per_batch) {
        Request req = p.request();  // built outside the timed call
        const auto c0 = Clock::now();
        if (auto r = call(std::move(req)); !r.ok()) return r.status();
        batch.push_back(seconds_since(c0));
      }
      const double elapsed = seconds_since(t0);
      const double cpu = process_cpu_seconds(ps_pid_) - cpu0 - idle_cpu_per_s_ * elapsed;
      rtts.push_back(median(batch));
      cpus.push_back(std::max(cpu, 0.0) / static_cast<double>(batch.size()));
    }
    p.rtt_s = median(rtts);
    p.ps_cpu_s = median(cpus);
    if (o_.verbose)
      spdlog::info("calibrate: {:<28} {:9.1f} KiB {:6.0f} rows: round trip {:8.1f} us, ps CPU {:8.1f} us", p.name, p.kib,
                   p.rows, p.rtt_s * 1e6, p.ps_cpu_s * 1e6);
    return absl::OkStatus();
  }

 private:
  const CalibrationOptions& o_;
  ProcessCluster& cluster_;
  int ps_pid_;
  double idle_cpu_per_s_;
  net::AsioExecutor ex_;
  std::unique_ptr<net::GrpcTransport> transport_;
  RequestId pushes_ = 0;
};

ShardState shard(ShardId id, std::int64_t rows, std::int64_t cols) {
  ShardState s;
  s.spec = ShardSpec{id, "calibrate_" + std::to_string(id), VariableKind::kTrainable, rows, cols};
  s.value = Matrix::Constant(rows, cols, 0.5f);
  return s;
}

// The calls whose costs separate per request, per KiB and per row: a
// one-float pull; dense pulls and pushes of 64 KiB .. 4 MiB (one row); sparse
// pushes of 256 KiB spread over 64 .. 16384 rows.
std::vector<Probe> probes(CreateShardsRequest& create) {
  std::vector<Probe> out;
  ShardId next = 1;
  const ShardId tiny = next++;
  create.shards.push_back(shard(tiny, 1, 1));
  out.push_back({"pull 1 float", [tiny] { return Request(PullRequest{{PullItem{tiny, true, {}}}}); }, 0, 0});
  for (std::int64_t floats : {16384, 65536, 262144, 1048576}) {
    const ShardId id = next++;
    create.shards.push_back(shard(id, 1, floats));
    const double kib = static_cast<double>(floats) * 4 / 1024;
    out.push_back({"dense pull", [id] { return Request(PullRequest{{PullItem{id, true, {}}}}); }, kib, 0});
    out.push_back({"dense push",
                   [id, floats] {
                     PushRequest push;
                     Update u;
                     u.shard = id;
                     u.values = Matrix::Constant(1, floats, 1e-3f);
                     push.updates.push_back(std::move(u));
                     return Request(std::move(push));
                   },
                   kib, 1});
  }
  constexpr std::int64_t kSparseFloats = 65536;  // 256 KiB of values whatever the row count
  for (std::int64_t rows : {64, 512, 4096, 16384}) {
    const ShardId id = next++;
    const std::int64_t cols = kSparseFloats / rows;
    create.shards.push_back(shard(id, rows, cols));
    RowIds ids(static_cast<std::size_t>(rows));
    for (std::int64_t r = 0; r < rows; ++r) ids[static_cast<std::size_t>(r)] = r;
    const double kib = (static_cast<double>(kSparseFloats) * 4 + static_cast<double>(rows) * sizeof(ids[0])) / 1024;
    out.push_back({"sparse push " + std::to_string(rows) + " rows",
                   [id, ids, rows, cols] {
                     PushRequest push;
                     Update u;
                     u.shard = id;
                     u.sparse = true;
                     u.rows = ids;
                     u.values = Matrix::Constant(rows, cols, 1e-3f);
                     push.updates.push_back(std::move(u));
                     return Request(std::move(push));
                   },
                   kib, static_cast<double>(rows)});
  }
  return out;
}

constexpr double kMaxGbps = 1024.0 * 8 / (0.01 * 1000);  // 0.01 us per KiB

struct CallCosts {
  double per_request_us = 0, per_kib_us = 0, per_row_us = 0;  // ps CPU
  double latency_us = 0, bandwidth_gbps = 0;                    // the rest of a round trip
  double small_rtt_us = 0;
};

StatusOr<CallCosts> measure_calls(const CalibrationOptions& o, std::string* report) {
  auto cluster = ProcessCluster::start(1, 1, {"--data-plane", o.data_plane}, {"--data-plane", o.data_plane}, o.work_dir);
  if (!cluster.ok()) return cluster.status();
  const int ps_pid = (*cluster)->pid(TaskId::ps(0));
  // What the idle ps burns anyway (gRPC's pollers, its 100 ms tick), to subtract.
  const double idle0 = process_cpu_seconds(ps_pid);
  const auto t0 = Clock::now();
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  const double idle_per_s = (process_cpu_seconds(ps_pid) - idle0) / seconds_since(t0);

  PsProber prober(o, **cluster, ps_pid, idle_per_s);
  if (Status s = prober.connect(); !s.ok()) return s;
  CreateShardsRequest create;
  if (o.model) {  // the model's optimizer: Adam applies more per row than SGD
    auto spec = sim::model_spec(*o.model);
    if (!spec.ok()) return spec.status();
    create.optimizer = spec->optimizer;
  }
  std::vector<Probe> all = probes(create);
  if (auto r = prober.call(create); !r.ok()) return r.status();
  for (auto& p : all)
    if (Status s = prober.measure(p); !s.ok()) return s;

  std::vector<std::vector<double>> x;
  std::vector<double> cpu, rtt;
  for (const auto& p : all) {
    x.push_back({1.0, p.kib, p.rows});
    cpu.push_back(p.ps_cpu_s * 1e6);
    rtt.push_back(p.rtt_s * 1e6);
  }
  const auto ps = least_squares(x, cpu);   // ps CPU us = per_request + per_kib * KiB + per_row * rows
  const auto trip = least_squares(x, rtt);  // round trip us, the same regressors
  CallCosts c;
  c.per_request_us = std::max(ps[0], 0.1);
  c.per_kib_us = std::max(ps[1], 0.0);
  c.per_row_us = std::max(ps[2], 0.0);
  c.small_rtt_us = all[0].rtt_s * 1e6;
  // Four host-link latencies per round trip (two links each way).
  c.latency_us = std::max((c.small_rtt_us - c.per_request_us) / 4, 0.5);
  // The round trip's per-KiB slope beyond the ps's own work is the transfer:
  // 1 KiB per (slope) us -> bits per ns.
  // On loopback the copy is CPU work the ps's time already holds, and the
  // remainder can vanish: floor it at 0.01 us/KiB (kMaxGbps).
  const double transfer_us_per_kib = std::max(trip[1] - c.per_kib_us, 0.01);
  c.bandwidth_gbps = 1024.0 * 8 / (transfer_us_per_kib * 1000);
  *report += format("ps calls (1 ps process on loopback, one call in flight, data plane %s):\n", o.data_plane.c_str());
  for (const auto& p : all)
    *report += format("  %-26s %8.1f KiB %6.0f rows: round trip %8.1f us, ps CPU %7.1f us\n", p.name.c_str(), p.kib,
                      p.rows, p.rtt_s * 1e6, p.ps_cpu_s * 1e6);
  *report += format("  ps CPU fit:     %.2f us + %.4f us/KiB + %.4f us/row  (ps idle CPU %.1f%% subtracted)\n", ps[0],
                    ps[1], ps[2], idle_per_s * 100);
  *report += format("  round trip fit: %.2f us + %.4f us/KiB + %.4f us/row\n", trip[0], trip[1], trip[2]);
  return c;
}

struct ComputeCosts {
  double per_gflop_s = 0;
  double intercept_s = 0;
};

// Seconds per call of synthetic::compute_gradient(w, batch), over about `seconds`.
double time_gradient(const Matrix& w, int batch, double seconds) {
  int n = 0;
  double sink = 0;
  const auto t0 = Clock::now();
  while (n < 3 || seconds_since(t0) < seconds) {
    sink += synthetic::compute_gradient(w, batch)(0, 0);
    ++n;
  }
  const double t = seconds_since(t0) / n;
  return std::isfinite(sink) ? t : 0;  // reading the result keeps the work from being optimised away
}

// The [rows x cols] matrices whose gradients a step computes: with a model,
// what its step pulls of each variable (the looked-up rows of an embedding,
// the whole of the others); without, a range of sizes.
std::vector<std::pair<std::int64_t, std::int64_t>> gradient_shapes(const scenario::SyntheticModel* model) {
  std::vector<std::pair<std::int64_t, std::int64_t>> out;
  if (!model) {
    for (std::int64_t rows : {256, 1024, 4096, 16384}) out.emplace_back(rows, 64);
    return out;
  }
  for (const auto& v : model->variable()) {
    if (!v.per_step() || v.shape_size() == 0) continue;
    std::int64_t cols = 1;
    for (int d = 1; d < v.shape_size(); ++d) cols *= v.shape(d);
    out.emplace_back(v.rows_per_step() > 0 ? v.rows_per_step() : v.shape(0), cols);
  }
  return out;
}

// Seconds per GFLOP of synthetic::compute_gradient: with a model, its whole
// step's gradients (time over GFLOP); without, the slope over a range of sizes.
ComputeCosts measure_compute(const CalibrationOptions& o, int batch, std::string* report) {
  std::vector<std::vector<double>> x;
  std::vector<double> y;
  double total_s = 0, total_gflop = 0;
  *report += format("compute (synthetic::compute_gradient, batch %d, %s):\n", batch,
                    o.model ? "the model's pulled shapes" : "a range of sizes");
  for (const auto& [rows, cols] : gradient_shapes(o.model)) {
    const Matrix w = Matrix::Constant(rows, cols, 0.01f);
    const double gflop = 4.0 * batch * static_cast<double>(rows * cols) / 1e9;
    std::vector<double> per_call;
    for (int b = 0; b < o.repeats; ++b) per_call.push_back(time_gradient(w, batch, o.seconds_per_batch));
    const double t = median(per_call);
    x.push_back({1.0, gflop});
    y.push_back(t);
    total_s += t;
    total_gflop += gflop;
    *report += format("  %7lld x %-5lld %8.4f GFLOP: %9.1f us\n", static_cast<long long>(rows),
                      static_cast<long long>(cols), gflop, t * 1e6);
  }
  if (o.model || x.size() < 2) {
    *report += format("  step: %.1f us for %.4f GFLOP\n", total_s * 1e6, total_gflop);
    return ComputeCosts{std::max(total_s / std::max(total_gflop, 1e-12), 1e-6), 0};
  }
  const auto fit = least_squares(x, y);
  *report += format("  fit: %.1f us + %.4f s/GFLOP\n", fit[0] * 1e6, fit[1]);
  return ComputeCosts{std::max(fit[1], 1e-6), fit[0]};
}

// A whole step of a one-float model on a real one-worker cluster (seconds).
StatusOr<double> measure_tiny_step(const CalibrationOptions& o) {
  RealRunOptions r;
  auto* v = r.model.add_variable();
  v->set_name("w");
  v->add_shape(1);
  r.workers = 1;
  r.ps = 1;
  r.warmup = 50;
  r.seconds = std::max(1.0, o.seconds_per_batch * o.repeats);
  r.data_plane = o.data_plane;
  r.work_dir = o.work_dir + "/tiny";
  std::filesystem::create_directories(r.work_dir);
  // Three clusters, the median: one run's second can catch a burst of load.
  std::vector<double> per_step;
  for (int i = 0; i < 3; ++i) {
    auto result = run_real(r);
    if (!result.ok()) return result.status();
    per_step.push_back(result->seconds / result->measured);
  }
  return median(per_step);
}

std::string load_average() {
  std::ifstream in("/proc/loadavg");
  std::string a, b, c;
  in >> a >> b >> c;
  return a + " " + b + " " + c;
}

std::string machine() {
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line, model;
  while (std::getline(cpuinfo, line))
    if (line.rfind("model name", 0) == 0) {
      model = line.substr(line.find(':') + 2);
      break;
    }
  const std::time_t now = std::time(nullptr);
  char date[32];
  std::strftime(date, sizeof date, "%Y-%m-%d %H:%M UTC", std::gmtime(&now));
  return format("%s, %s, %ld cores, %s, load average %s", host, model.c_str(), ::sysconf(_SC_NPROCESSORS_ONLN), date,
                load_average().c_str());
}

void fill_profile(scenario::CostProfile& p, const std::string& measured_on, const CallCosts& calls,
                  const ComputeCosts& compute, double step_overhead_s) {
  p.set_measured_on(measured_on);
  auto* net = p.mutable_network();
  net->set_host_latency_us(calls.latency_us);
  net->set_host_bandwidth_gbps(calls.bandwidth_gbps);
  auto* ps = p.mutable_ps_service();
  ps->set_per_request_us(calls.per_request_us);
  ps->set_per_kib_us(calls.per_kib_us);
  ps->set_per_row_us(calls.per_row_us);
  ps->set_threads(1);  // a ps applies requests on its one executor thread
  auto* c = p.mutable_compute();
  c->set_per_gflop_s(compute.per_gflop_s);
  c->set_per_example_s(0);  // the synthetic step's work is all in its FLOPs
  c->mutable_step_time()->set_constant_s(step_overhead_s);
}

struct Residue {
  double real_s = 0, predicted_s = 0;  // per step
};

StatusOr<Residue> model_step_residue(const CalibrationOptions& o, const scenario::CostProfile& profile) {
  RealRunOptions r;
  r.model = *o.model;
  r.model.clear_partitioner();
  r.seconds = std::max(1.0, o.seconds_per_batch * o.repeats * 2);
  r.data_plane = o.data_plane;
  r.work_dir = o.work_dir + "/model";
  std::filesystem::create_directories(r.work_dir);
  auto real = run_real(r);
  if (!real.ok()) return real.status();
  sim::PredictRequest pr;
  pr.model = r.model;
  pr.profile = profile;
  pr.timing_only = false;
  pr.warmup = real->warmup;
  pr.measured = real->measured;
  auto predicted = sim::predict(pr);
  if (!predicted.ok()) return predicted.status();
  return Residue{1 / real->steps_per_second, 1 / predicted->steps_per_second};
}

}  // namespace

StatusOr<Calibration> calibrate(const CalibrationOptions& o) {
  Calibration out;
  std::string& report = out.report;
  const int batch = o.model ? o.model->batch_size() : 32;
  const std::string before = machine();

  auto calls = measure_calls(o, &report);
  if (!calls.ok()) return calls.status();
  const ComputeCosts compute = measure_compute(o, batch, &report);
  auto tiny_step_s = measure_tiny_step(o);
  if (!tiny_step_s.ok()) return tiny_step_s.status();
  // What the profile already charges a one-float step: the coordinator's
  // call to the worker (4 latencies), a pull and a push (4 latencies and a
  // request's service each). The rest is a fixed cost of every step.
  const double charged_s = (12 * calls->latency_us + 2 * calls->per_request_us) * 1e-6;
  double step_overhead_s = std::max(*tiny_step_s - charged_s, 0.0);
  report += format("one-float model, 1 worker, 1 ps: %.1f us per step; the calls above charge %.1f us of it\n",
                   *tiny_step_s * 1e6, charged_s * 1e6);

  scenario::CostProfile& p = out.profile;
  fill_profile(p, before, *calls, compute, step_overhead_s);
  if (o.model) {
    // What the profile still misses of the model's own step — the worker's
    // handling of the pulled and pushed bytes and rows, which the ps CPU and
    // round trips above do not see — measured as a real 1-worker, 1-ps run of
    // the model less the simulation of the same closures with this profile.
    auto residue = model_step_residue(o, p);
    if (!residue.ok()) return residue.status();
    step_overhead_s += std::max(residue->real_s - residue->predicted_s, 0.0);
    report += format("the model on 1 worker, 1 ps: %.2f ms per step measured, %.2f ms simulated with the above\n",
                     residue->real_s * 1e3, residue->predicted_s * 1e3);
    fill_profile(p, before, *calls, compute, step_overhead_s);
  }
  report += "\nprofile:\n";
  report += format("  network.host_latency_us      %10.2f  (small round trip %.1f us - ps per request) / 4 links\n",
                   calls->latency_us, calls->small_rtt_us);
  report += format("  network.host_bandwidth_gbps  %10.2f  round trip per KiB beyond the ps's CPU per KiB%s\n",
                   calls->bandwidth_gbps, calls->bandwidth_gbps >= kMaxGbps ? " (none: at the floor)" : "");
  report += format("  ps_service.per_request_us    %10.2f  ps CPU fit, intercept\n", calls->per_request_us);
  report += format("  ps_service.per_kib_us        %10.4f  ps CPU fit, per KiB\n", calls->per_kib_us);
  report += format("  ps_service.per_row_us        %10.4f  ps CPU fit, per row updated\n", calls->per_row_us);
  report += format("  compute.per_gflop_s          %10.4f  compute_gradient fit, slope\n", compute.per_gflop_s);
  report += format("  compute.step_time            %10.1f us  one-float step less what the calls above charge%s\n",
                   step_overhead_s * 1e6, o.model ? ", plus the model step's residue" : "");
  report += "load average after: " + load_average() + "\n";
  return out;
}

double compute_slowdown(int threads, int batch, double seconds) {
  if (threads <= 1) return 1;
  const Matrix w = Matrix::Constant(4096, 64, 0.01f);  // 1 MiB: a mid-sized variable
  time_gradient(w, batch, seconds / 4);                 // warm: first-touch pages, clock ramp-up
  const double alone = time_gradient(w, batch, seconds);
  std::vector<double> together(static_cast<std::size_t>(threads));
  {
    std::vector<std::jthread> running;
    for (auto& t : together) running.emplace_back([&t, &w, batch, seconds] { t = time_gradient(w, batch, seconds); });
  }
  return alone > 0 ? std::max(median(together) / alone, 1.0) : 1.0;
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

std::string profile_text(const Calibration& c) {
  std::string out = "# CostProfile (sim/scenario.proto) written by `twinps calibrate`.\n"
                    "# Every timing is a median over repeats; see tools/tune/calibration.h for the method.\n";
  std::istringstream lines(c.report);
  for (std::string line; std::getline(lines, line);) out += "# " + line + "\n";
  std::string body;
  google::protobuf::TextFormat::PrintToString(c.profile, &body);
  return out + body;
}

}  // namespace twinps::cli
