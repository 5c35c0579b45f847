#include "sim/hosts.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace twinps::sim {

namespace {
// Marks a thread taken while its job's work is being found (run_when_started).
constexpr TimerId kReserved = ~TimerId{0};
}  // namespace

HostModel::HostModel(ClusterShape shape, HostOptions options, Executor& executor, FluidSystem& fluid)
    : shape_(shape), options_(options), ex_(executor), fluid_(fluid), durations_(options.seed) {
  const int tasks = 1 + shape_.workers + shape_.ps;
  const int per_host = std::max(options_.tasks_per_host, 1);
  host_.resize(static_cast<std::size_t>(tasks));
  switch (options_.placement) {
    case HostOptions::Placement::kOnePerHost:
      for (int i = 0; i < tasks; ++i) host_[static_cast<std::size_t>(i)] = i;
      num_hosts_ = tasks;
      break;
    case HostOptions::Placement::kOneHost:
      num_hosts_ = 1;
      break;
    case HostOptions::Placement::kBinPack:
      for (int i = 0; i < tasks; ++i) host_[static_cast<std::size_t>(i)] = i / per_host;
      num_hosts_ = (tasks + per_host - 1) / per_host;
      break;
    case HostOptions::Placement::kSpread:
      num_hosts_ = (tasks + per_host - 1) / per_host;
      for (int i = 0; i < tasks; ++i) host_[static_cast<std::size_t>(i)] = i % num_hosts_;
      break;
  }
  if (limited() && options_.scheduler == HostOptions::Scheduler::kTicked) {
    ticked_.reserve(static_cast<std::size_t>(num_hosts_));
    for (int h = 0; h < num_hosts_; ++h) ticked_.emplace_back(ex_, options_.cores, options_.tick, options_.slice);
  } else if (limited()) {
    for (int h = 0; h < num_hosts_; ++h) cpu_.push_back(fluid_.add_resource(options_.cores));
  }
  unlimited_busy_.assign(static_cast<std::size_t>(num_hosts_), 0);
  crowding_price_.assign(static_cast<std::size_t>(num_hosts_), 0);
  sharing_jobs_.assign(static_cast<std::size_t>(num_hosts_), 0);
  if (limited() && !options_.crowded_message.empty()) {
    std::vector<int> on_host(static_cast<std::size_t>(num_hosts_), 0);
    for (int i = 0; i < tasks; ++i) ++on_host[static_cast<std::size_t>(host_of(i))];
    for (int h = 0; h < num_hosts_; ++h) {
      const double per_core = on_host[static_cast<std::size_t>(h)] / options_.cores;
      crowding_price_[static_cast<std::size_t>(h)] =
          std::max<Duration>(0, std::llround(level_curve_cost(options_.crowded_message, per_core)));
    }
  }
  tasks_ = std::vector<TaskThreads>(static_cast<std::size_t>(tasks));
  for (auto& t : tasks_) t.running.resize(1);
}

int HostModel::slot(const TaskId& t) const {
  switch (t.job) {
    case Job::kChief: return 0;
    case Job::kWorker: return 1 + t.index;
    case Job::kPs: return 1 + shape_.workers + t.index;
    case Job::kEvaluator: break;
  }
  return 0;
}

void HostModel::set_threads(int slot, int threads) {
  auto& t = tasks_[static_cast<std::size_t>(slot)];
  t.threads = std::max(threads, 1);
  if (t.running.size() < static_cast<std::size_t>(t.threads)) t.running.resize(static_cast<std::size_t>(t.threads));
}

void HostModel::run(int slot, Duration work, Callback done, JobKind kind) {
  tasks_[static_cast<std::size_t>(slot)].queue.push_back(
      CpuJob{std::max<Duration>(work, 0), nullptr, std::move(done), kind});
  start_next(slot);
}

void HostModel::run_when_started(int slot, UniqueFunction<Duration()> begin, Callback done, JobKind kind) {
  tasks_[static_cast<std::size_t>(slot)].queue.push_back(CpuJob{0, std::move(begin), std::move(done), kind});
  start_next(slot);
}

void HostModel::start_next(int slot) {
  auto& t = tasks_[static_cast<std::size_t>(slot)];
  for (std::size_t which = 0; which < static_cast<std::size_t>(t.threads) && !t.queue.empty(); ++which) {
    Running& r = t.running[which];
    if (r.busy()) continue;
    CpuJob job = std::move(t.queue.front());
    t.queue.pop_front();
    const std::uint64_t epoch = t.epoch;
    if (job.begin) {
      // It may touch this task's jobs (a reset): take the thread first.
      r.timer = kReserved;
      job.work = std::max<Duration>(job.begin(), 0);
      if (epoch != t.epoch) return;
      r.timer = kNoTimer;
    }
    // A priced message job on a crowded host also refills the caches others
    // filled (HostOptions::crowded_message); a job of no work is no wake-up.
    if (job.kind == JobKind::kMessage && job.work > 0) job.work += crowding_price(slot);
    const Duration work = drawn(job.work);
    auto finish = [this, slot, epoch, which, work, done = std::move(job.done)]() mutable {
      finished(slot, epoch, which, work);
      if (done) done();
    };
    if (ticked() && work > 0) {
      auto& cores = ticked_[static_cast<std::size_t>(host_of(slot))];
      // The thread's next job (queued behind this one) starts in finished(),
      // before the core's queue is served: a busy thread keeps its core.
      r.ticked = cores.start(thread_key(slot, which), work, std::move(finish));
    } else if (limited() && work > 0) {
      const int cpu = cpu_[static_cast<std::size_t>(host_of(slot))];
      r.activity = fluid_.start(static_cast<double>(work), std::span<const int>(&cpu, 1), 1.0, 1.0, std::move(finish));
      ++sharing_jobs_[static_cast<std::size_t>(host_of(slot))];
    } else {
      unlimited_busy_[static_cast<std::size_t>(host_of(slot))] += work;
      r.timer = ex_.post_after(work, std::move(finish));
    }
  }
}

Duration HostModel::drawn(Duration work) {
  const double sigma = options_.duration_spread;
  if (!(sigma > 0) || work <= 0) return work;
  // Median exp(-sigma^2 / 2): the draws average to the price, so the CPU a
  // run is charged stays what the cost model priced.
  const double factor = durations_.lognormal(std::exp(-sigma * sigma / 2), sigma);
  return std::max<Duration>(1, std::llround(static_cast<double>(work) * factor));
}

void HostModel::finished(int slot, std::uint64_t epoch, std::size_t which, Duration work) {
  auto& t = tasks_[static_cast<std::size_t>(slot)];
  if (epoch != t.epoch) return;
  if (t.running[which].activity != FluidSystem::kNoActivity) --sharing_jobs_[static_cast<std::size_t>(host_of(slot))];
  t.running[which] = Running{};
  t.charged += work;
  start_next(slot);
  if (!awake(slot)) t.idle_since = ex_.now();
}

void HostModel::reset(int slot) {
  auto& t = tasks_[static_cast<std::size_t>(slot)];
  ++t.epoch;
  t.idle_since = kNeverWorked;  // a new process
  t.queue.clear();
  for (Running& r : t.running) {
    if (r.ticked != TickedCores::kNoJob) ticked_[static_cast<std::size_t>(host_of(slot))].cancel(r.ticked);
    if (r.activity != FluidSystem::kNoActivity) {
      fluid_.cancel(r.activity);
      --sharing_jobs_[static_cast<std::size_t>(host_of(slot))];
    }
    if (r.timer != kNoTimer && r.timer != kReserved) ex_.cancel(r.timer);
    r = Running{};
  }
}

bool HostModel::idle_core(int slot) const {
  const auto host = static_cast<std::size_t>(host_of(slot));
  if (ticked()) return ticked_[host].idle_cores() > 0;
  if (limited()) return static_cast<double>(sharing_jobs_[host]) < options_.cores;
  return true;
}

bool HostModel::awake(int slot) const {
  const auto& t = tasks_[static_cast<std::size_t>(slot)];
  return !t.queue.empty() || std::any_of(t.running.begin(), t.running.end(), [](const Running& r) { return r.busy(); });
}

Duration HostModel::idle_for(int slot) const {
  if (awake(slot)) return 0;
  const Time since = tasks_[static_cast<std::size_t>(slot)].idle_since;
  return since == kNeverWorked ? std::numeric_limits<Duration>::max() : ex_.now() - since;
}

double HostModel::cpu_ns(int host) const {
  if (ticked()) return ticked_[static_cast<std::size_t>(host)].busy_ns();
  if (limited()) return fluid_.busy_ns(cpu_[static_cast<std::size_t>(host)]) * options_.cores;
  return static_cast<double>(unlimited_busy_[static_cast<std::size_t>(host)]);
}

}  // namespace twinps::sim
