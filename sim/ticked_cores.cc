#include "sim/ticked_cores.h"

#include <algorithm>
#include <bit>
#include <cmath>

namespace twinps::sim {

TickedCores::TickedCores(Executor& executor, double usable_cores, Duration tick, Duration slice)
    : ex_(executor),
      usable_(usable_cores > 0 ? usable_cores : 1.0),
      tick_(std::max<Duration>(tick, 1)),
      cores_(static_cast<std::size_t>(std::max(1, static_cast<int>(std::ceil(usable_ - 1e-9))))) {
  slice_ = slice > 0 ? slice : linux_slice(static_cast<int>(cores_.size()));
}

Duration TickedCores::linux_slice(int cores) {
  // kernel/sched/fair.c: sysctl_sched_base_slice (0.75 ms) scaled by
  // 1 + ilog2(min(online cpus, 8)) (the default, logarithmic, tunable scaling).
  const unsigned n = static_cast<unsigned>(std::clamp(cores, 1, 8));
  const int log2 = std::bit_width(n) - 1;
  return 750000 * (1 + log2);
}

int& TickedCores::last_core(std::size_t thread) { return last_core_.try_emplace(thread, -1).first->second; }

std::optional<std::size_t> TickedCores::idle_core(std::size_t home) const {
  if (!cores_[home].current) return home;
  for (std::size_t i = 0; i < cores_.size(); ++i)
    if (!cores_[i].current) return i;
  return std::nullopt;
}

TickedCores::JobId TickedCores::start(std::size_t thread, Duration work, Callback done) {
  Job job{next_id_++, thread, static_cast<double>(std::max<Duration>(work, 0)), std::move(done)};
  const JobId id = job.id;
  const int last = last_core(thread);
  const std::size_t home = last >= 0 ? static_cast<std::size_t>(last) : thread % cores_.size();
  if (const auto idle = idle_core(home)) {
    run_on(*idle, std::move(job));
    return id;
  }
  Core& c = cores_[home];
  if (ex_.now() - c.turn_start < slice_) {
    c.queue.push_back(std::move(job));
    arm_tick();
    arm_slice_end(home);
    return id;
  }
  // The running job has had its slice: the woken one preempts it at once
  // (EEVDF's wake-up preemption), and it resumes next, or on a core idle at
  // the next tick.
  c.queue.push_front(take_current(home));
  run_on(home, std::move(job));
  arm_tick();
  return id;
}

void TickedCores::run_on(std::size_t core, Job job) {
  Core& c = cores_[core];
  last_core(job.thread) = static_cast<int>(core);
  const Time now = ex_.now();
  if (job.thread != c.last_thread || c.last_end != now) c.turn_start = now;
  c.current = std::move(job);
  c.since = now;
  ++busy_cores_;
  set_speed();
  post_completion(core);
  arm_slice_end(core);
}

TickedCores::Job TickedCores::take_current(std::size_t core) {
  Core& c = cores_[core];
  count_progress(c);
  Job job = std::move(*c.current);
  c.current.reset();
  if (c.timer != kNoTimer) ex_.cancel(c.timer);
  c.timer = kNoTimer;
  --busy_cores_;
  set_speed();
  return job;
}

void TickedCores::count_progress(Core& c) {
  const Time now = ex_.now();
  const Duration ran = now - c.since;
  busy_ns_ += static_cast<double>(ran);
  c.current->remaining = std::max(0.0, c.current->remaining - static_cast<double>(ran) * speed_);
  c.since = now;
}

void TickedCores::post_completion(std::size_t core) {
  Core& c = cores_[core];
  if (c.timer != kNoTimer) ex_.cancel(c.timer);
  const auto ns = static_cast<Duration>(std::ceil(c.current->remaining / speed_));
  c.timer = ex_.post_after(ns, [this, core] { complete(core); });
}

void TickedCores::set_speed() {
  // Fewer usable cores than cores (shared caches, memory bandwidth): the
  // busy cores share the usable ones, and a core alone runs at full speed.
  const double speed = std::min(1.0, usable_ / std::max(busy_cores_, 1));
  if (speed == speed_) return;
  for (Core& c : cores_)
    if (c.current) count_progress(c);
  speed_ = speed;
  for (std::size_t i = 0; i < cores_.size(); ++i)
    if (cores_[i].current) post_completion(i);
}

void TickedCores::complete(std::size_t core) {
  Core& c = cores_[core];
  c.timer = kNoTimer;  // this very timer fired
  Job job = take_current(core);
  c.last_thread = job.thread;
  c.last_end = ex_.now();
  if (job.done) job.done();
  settle();
}

void TickedCores::settle() {
  for (std::size_t i = 0; i < cores_.size(); ++i) {
    Core& c = cores_[i];
    if (c.current || c.queue.empty()) continue;
    Job next = std::move(c.queue.front());
    c.queue.pop_front();
    run_on(i, std::move(next));
  }
}

void TickedCores::cancel(JobId id) {
  for (std::size_t i = 0; i < cores_.size(); ++i) {
    Core& c = cores_[i];
    if (c.current && c.current->id == id) {
      take_current(i);
      settle();
      return;
    }
    const auto it = std::find_if(c.queue.begin(), c.queue.end(), [id](const Job& j) { return j.id == id; });
    if (it != c.queue.end()) {
      c.queue.erase(it);
      return;
    }
  }
}

void TickedCores::arm_tick() {
  if (tick_timer_ != kNoTimer) return;
  const Time now = ex_.now();
  const Time next = (now / tick_ + 1) * tick_;
  tick_timer_ = ex_.post_at(next, [this] {
    tick_timer_ = kNoTimer;
    on_tick();
  });
}

void TickedCores::on_tick() {
  // Idle cores take queued jobs, from the longest queue first.
  for (std::size_t i = 0; i < cores_.size(); ++i) {
    if (cores_[i].current) continue;
    auto longest = std::max_element(cores_.begin(), cores_.end(),
                                    [](const Core& a, const Core& b) { return a.queue.size() < b.queue.size(); });
    if (longest->queue.empty()) break;
    Job job = std::move(longest->queue.front());
    longest->queue.pop_front();
    run_on(i, std::move(job));
  }
  // A busy core with a queue switches at its thread's slice end
  // (arm_slice_end), not here.
  if (queued() > 0) arm_tick();
}

void TickedCores::rotate(std::size_t core) {
  Core& c = cores_[core];
  Job preempted = take_current(core);
  Job next = std::move(c.queue.front());
  c.queue.pop_front();
  c.queue.push_back(std::move(preempted));
  run_on(core, std::move(next));
}

void TickedCores::arm_slice_end(std::size_t core) {
  Core& c = cores_[core];
  if (!c.current || c.queue.empty()) return;
  const Time at = c.turn_start + slice_;
  if (c.slice_timer != kNoTimer) {
    if (c.slice_at == at) return;
    ex_.cancel(c.slice_timer);
  }
  c.slice_at = at;
  c.slice_timer = ex_.post_at(std::max(at, ex_.now()), [this, core] {
    cores_[core].slice_timer = kNoTimer;
    on_slice_end(core);
  });
}

void TickedCores::on_slice_end(std::size_t core) {
  Core& c = cores_[core];
  if (!c.current || c.queue.empty()) return;
  if (ex_.now() - c.turn_start < slice_) return arm_slice_end(core);
  // A job ending at this very instant ends; its core then serves the queue.
  if (static_cast<double>(ex_.now() - c.since) * speed_ >= c.current->remaining) return;
  rotate(core);
}

double TickedCores::busy_ns() const {
  double busy = busy_ns_;
  for (const Core& c : cores_)
    if (c.current) busy += static_cast<double>(ex_.now() - c.since);
  return busy;
}

int TickedCores::idle_cores() const {
  int n = 0;
  for (const Core& c : cores_) n += c.current ? 0 : 1;
  return n;
}

std::size_t TickedCores::queued() const {
  std::size_t n = 0;
  for (const Core& c : cores_) n += c.queue.size();
  return n;
}

}  // namespace twinps::sim
