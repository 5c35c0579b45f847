#include "sim/fluid.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

namespace twinps::sim {

namespace {
// A rate or capacity below this counts as nothing (units per ns).
constexpr double kTiny = 1e-15;
}  // namespace

FluidSystem::~FluidSystem() {
  *alive_ = false;
  if (timer_ != kNoTimer) ex_.cancel(timer_);
}

int FluidSystem::add_resource(double capacity) {
  Resource r;
  r.capacity = capacity;
  r.settled_at = ex_.now();
  resources_.push_back(std::move(r));
  return static_cast<int>(resources_.size()) - 1;
}

void FluidSystem::settle_busy(Resource& r, Time now) {
  if (now > r.settled_at && r.capacity > kTiny)
    r.busy += std::min(r.used / r.capacity, 1.0) * static_cast<double>(now - r.settled_at);
  r.settled_at = now;
}

double FluidSystem::busy_ns(int resource) const {
  const Resource& r = resources_[static_cast<std::size_t>(resource)];
  const Time now = ex_.now();
  double busy = r.busy;
  if (now > r.settled_at && r.capacity > kTiny)
    busy += std::min(r.used / r.capacity, 1.0) * static_cast<double>(now - r.settled_at);
  return busy;
}

void FluidSystem::set_capacity(int resource, double capacity) {
  Resource& r = resources_[static_cast<std::size_t>(resource)];
  settle_busy(r, ex_.now());
  r.capacity = capacity;
  touch(resource);
  request_solve();
}

FluidSystem::ActivityId FluidSystem::start(double amount, std::span<const int> resources, double bound, double weight,
                                           Callback done) {
  return start(amount, resources, {}, bound, weight, std::move(done));
}

FluidSystem::ActivityId FluidSystem::start(double amount, std::span<const int> resources, std::span<const double> uses,
                                           double bound, double weight, Callback done) {
  std::uint32_t slot;
  if (!free_slots_.empty()) {
    slot = free_slots_.back();
    free_slots_.pop_back();
  } else {
    slot = static_cast<std::uint32_t>(activities_.size());
    activities_.emplace_back();
  }
  Activity& a = activities_[slot];
  ++a.generation;
  a.live = true;
  a.remaining = std::max(amount, 0.0);
  a.rate = 0;
  a.bound = bound > 0 ? bound : kUnbounded;
  a.weight = weight > 0 ? weight : 1;
  a.updated_at = ex_.now();
  a.finish_at = kTimeNever;
  ++a.version;
  a.done = std::move(done);
  a.resources.assign(resources.begin(), resources.end());
  a.positions.resize(a.resources.size());
  a.factors.assign(a.resources.size(), 1.0);
  for (std::size_t k = 0; k < a.resources.size() && k < uses.size(); ++k) a.factors[k] = uses[k];
  for (std::size_t k = 0; k < a.resources.size(); ++k) {
    Resource& r = resources_[static_cast<std::size_t>(a.resources[k])];
    a.positions[k] = static_cast<std::uint32_t>(r.users.size());
    r.users.push_back(Use{slot, static_cast<std::uint32_t>(k), a.factors[k]});
    touch(a.resources[k]);
  }
  request_solve();
  return (static_cast<ActivityId>(a.generation) << 32) | (slot + 1);
}

FluidSystem::Activity* FluidSystem::find(ActivityId id) {
  const auto slot = static_cast<std::uint32_t>(id & 0xffffffffu) - 1;
  if (id == kNoActivity || slot >= activities_.size()) return nullptr;
  Activity& a = activities_[slot];
  return a.live && a.generation == static_cast<std::uint32_t>(id >> 32) ? &a : nullptr;
}

const FluidSystem::Activity* FluidSystem::find(ActivityId id) const {
  return const_cast<FluidSystem*>(this)->find(id);
}

double FluidSystem::rate(ActivityId id) const {
  const Activity* a = find(id);
  return a ? a->rate : 0;
}

bool FluidSystem::active(ActivityId id) const { return find(id) != nullptr; }

void FluidSystem::cancel(ActivityId id) {
  if (find(id) == nullptr) return;
  detach(static_cast<std::uint32_t>(id & 0xffffffffu) - 1);
  request_solve();
}

// Takes the activity off its resources (which become dirty) and frees its slot.
void FluidSystem::detach(std::uint32_t slot) {
  Activity& a = activities_[slot];
  const Time now = ex_.now();
  for (std::size_t k = 0; k < a.resources.size(); ++k) {
    const int rid = a.resources[k];
    Resource& r = resources_[static_cast<std::size_t>(rid)];
    settle_busy(r, now);
    r.used = std::max(0.0, r.used - a.rate * a.factors[k]);
    const std::uint32_t pos = a.positions[k];
    const Use last = r.users.back();
    r.users[pos] = last;
    activities_[last.activity].positions[last.k] = pos;
    r.users.pop_back();
    if (r.users.empty()) r.used = 0;
    touch(rid);
  }
  a.live = false;
  a.rate = 0;
  a.done = nullptr;
  ++a.version;
  free_slots_.push_back(slot);
}

void FluidSystem::touch(int resource) {
  Resource& r = resources_[static_cast<std::size_t>(resource)];
  if (r.dirty) return;
  r.dirty = true;
  dirty_.push_back(resource);
}

void FluidSystem::request_solve() {
  if (in_event_ || solve_posted_) return;
  solve_posted_ = true;
  ex_.post([this, alive = std::weak_ptr<bool>(alive_)] {
    if (alive.expired()) return;
    solve_posted_ = false;
    solve();
    arm_timer();
  });
}

// Solves the components of the dirty resources again.
void FluidSystem::solve() {
  if (dirty_.empty()) return;
  ++solves_;
  ++mark_;
  comp_resources_.clear();
  comp_activities_.clear();
  stack_.clear();
  for (int rid : dirty_) {
    Resource& r = resources_[static_cast<std::size_t>(rid)];
    r.dirty = false;
    if (r.mark == mark_) continue;
    r.mark = mark_;
    comp_resources_.push_back(rid);
  }
  dirty_.clear();
  // Breadth first through activities to every resource they share — the
  // component, solved exactly — unless it grows past kExactLimit
  // activities (a saturated cluster of thousands of flows is one
  // component). Then only the activities on the resources that changed are
  // solved again, the others on their resources held at their rates (their
  // own starts and ends solve them in turn): the cost of a solve is then
  // bounded by the activities of the resources a change touches.
  const std::size_t dirty_count = comp_resources_.size();
  bool exact = true;
  for (std::size_t i = 0; i < comp_resources_.size(); ++i) {
    const Resource& r = resources_[static_cast<std::size_t>(comp_resources_[i])];
    for (const Use& u : r.users) {
      Activity& a = activities_[u.activity];
      if (a.mark == mark_) continue;
      a.mark = mark_;
      comp_activities_.push_back(u.activity);
      for (int other : a.resources) {
        Resource& o = resources_[static_cast<std::size_t>(other)];
        if (o.mark == mark_) continue;
        o.mark = mark_;
        comp_resources_.push_back(other);
      }
    }
    if (comp_activities_.size() > kExactLimit) {
      exact = false;
      break;
    }
  }
  if (!exact) {
    // Again, one level deep: the dirty resources' activities and their resources.
    ++mark_;
    comp_resources_.resize(dirty_count);
    comp_activities_.clear();
    for (int rid : comp_resources_) resources_[static_cast<std::size_t>(rid)].mark = mark_;
    for (std::size_t i = 0; i < dirty_count; ++i) {
      const Resource& r = resources_[static_cast<std::size_t>(comp_resources_[i])];
      for (const Use& u : r.users) {
        Activity& a = activities_[u.activity];
        if (a.mark == mark_) continue;
        a.mark = mark_;
        comp_activities_.push_back(u.activity);
        for (int other : a.resources) {
          Resource& o = resources_[static_cast<std::size_t>(other)];
          if (o.mark == mark_) continue;
          o.mark = mark_;
          comp_resources_.push_back(other);
        }
      }
    }
    ++bounded_solves_;
  }
  activities_solved_ += comp_activities_.size();
  const Time now = ex_.now();
  for (int rid : comp_resources_) settle_busy(resources_[static_cast<std::size_t>(rid)], now);
  for (std::uint32_t slot : comp_activities_) {
    Activity& a = activities_[slot];
    a.remaining = std::max(0.0, a.remaining - a.rate * static_cast<double>(now - a.updated_at));
    a.updated_at = now;
  }
  fill(comp_resources_, comp_activities_);
  for (std::uint32_t slot : comp_activities_) {
    Activity& a = activities_[slot];
    for (std::size_t k = 0; k < a.resources.size(); ++k) {
      Resource& r = resources_[static_cast<std::size_t>(a.resources[k])];
      r.used = std::max(0.0, r.used + (a.new_rate - a.rate) * a.factors[k]);
    }
    if (a.new_rate == a.rate && a.finish_at != kTimeNever) continue;  // same pace, same finish
    a.rate = a.new_rate;
    Time finish = kTimeNever;
    if (a.rate > kTiny) {
      const double ns = std::ceil(a.remaining / a.rate);
      if (ns < 9e18 - static_cast<double>(now)) finish = now + static_cast<Time>(ns);
    }
    if (finish == a.finish_at) continue;
    a.finish_at = finish;
    ++a.version;
    if (finish != kTimeNever) {
      heap_.push_back(Finish{finish, slot, a.version});
      std::push_heap(heap_.begin(), heap_.end(), std::greater<>());
    }
  }
}

// Progressive filling over one component: every unfixed activity's rate
// rises with its weight; the resource whose remaining capacity per unit of
// weight is smallest saturates first and fixes its activities; an activity
// whose bound comes first is fixed at its bound.
void FluidSystem::fill(const std::vector<int>& comp_resources, const std::vector<std::uint32_t>& comp_activities) {
  struct Level {
    double level;
    int resource;
    std::uint64_t stamp;
    bool operator>(const Level& o) const { return level != o.level ? level > o.level : resource > o.resource; }
  };
  std::vector<Level> levels;
  levels.reserve(comp_resources.size());
  for (int rid : comp_resources) {
    Resource& r = resources_[static_cast<std::size_t>(rid)];
    r.remaining_capacity = r.capacity;
    r.weight_left = 0;
    r.unfixed = 0;
    for (const Use& u : r.users) {
      const Activity& a = activities_[u.activity];
      if (a.mark != mark_) {  // held at its rate (a bounded solve)
        r.remaining_capacity = std::max(0.0, r.remaining_capacity - u.factor * a.rate);
        continue;
      }
      r.weight_left += u.factor * a.weight;
      ++r.unfixed;
    }
    ++r.stamp;
    if (r.unfixed > 0) levels.push_back(Level{r.remaining_capacity / r.weight_left, rid, r.stamp});
  }
  std::make_heap(levels.begin(), levels.end(), std::greater<>());
  // Bounds in the order they bind (level = bound / weight), ties by slot.
  std::vector<std::pair<double, std::uint32_t>> bounds;
  for (std::uint32_t slot : comp_activities) {
    Activity& a = activities_[slot];
    a.fixed = false;
    a.new_rate = 0;
    if (a.bound < kUnbounded) bounds.emplace_back(a.bound / a.weight, slot);
  }
  std::sort(bounds.begin(), bounds.end());
  std::size_t next_bound = 0;

  auto fix = [&](std::uint32_t slot, double rate) {
    Activity& a = activities_[slot];
    a.fixed = true;
    a.new_rate = std::max(rate, 0.0);
    for (std::size_t k = 0; k < a.resources.size(); ++k) {
      const int rid = a.resources[k];
      Resource& r = resources_[static_cast<std::size_t>(rid)];
      r.remaining_capacity = std::max(0.0, r.remaining_capacity - a.new_rate * a.factors[k]);
      r.weight_left -= a.factors[k] * a.weight;
      if (--r.unfixed <= 0) {
        r.weight_left = 0;
        continue;
      }
      ++r.stamp;
      levels.push_back(Level{r.remaining_capacity / std::max(r.weight_left, kTiny), rid, r.stamp});
      std::push_heap(levels.begin(), levels.end(), std::greater<>());
    }
  };

  for (;;) {
    while (!levels.empty()) {
      const Level& top = levels.front();
      const Resource& r = resources_[static_cast<std::size_t>(top.resource)];
      if (top.stamp == r.stamp && r.unfixed > 0) break;
      std::pop_heap(levels.begin(), levels.end(), std::greater<>());
      levels.pop_back();
    }
    while (next_bound < bounds.size() && activities_[bounds[next_bound].second].fixed) ++next_bound;
    const double resource_level = levels.empty() ? std::numeric_limits<double>::infinity() : levels.front().level;
    const double bound_level =
        next_bound < bounds.size() ? bounds[next_bound].first : std::numeric_limits<double>::infinity();
    if (std::isinf(resource_level) && std::isinf(bound_level)) break;
    if (bound_level <= resource_level) {
      const std::uint32_t slot = bounds[next_bound++].second;
      fix(slot, activities_[slot].bound);
      continue;
    }
    const int rid = levels.front().resource;
    std::pop_heap(levels.begin(), levels.end(), std::greater<>());
    levels.pop_back();
    // Fix every unfixed activity on the saturated resource at this level.
    // (Iterating by index: fix() never reorders a resource's users.)
    const auto& users = resources_[static_cast<std::size_t>(rid)].users;
    for (std::size_t i = 0; i < users.size(); ++i) {
      const std::uint32_t slot = users[i].activity;
      if (activities_[slot].mark == mark_ && !activities_[slot].fixed) fix(slot, resource_level * activities_[slot].weight);
    }
  }
}

void FluidSystem::arm_timer() {
  while (!heap_.empty()) {
    const Finish& f = heap_.front();
    const Activity& a = activities_[f.slot];
    if (a.live && a.version == f.version) break;
    std::pop_heap(heap_.begin(), heap_.end(), std::greater<>());
    heap_.pop_back();
  }
  const Time next = heap_.empty() ? kTimeNever : heap_.front().at;
  if (next == timer_at_ && timer_ != kNoTimer) return;
  if (timer_ != kNoTimer) ex_.cancel(timer_);
  timer_ = kNoTimer;
  timer_at_ = next;
  if (next == kTimeNever) return;
  timer_ = ex_.post_at(next, [this, alive = std::weak_ptr<bool>(alive_)] {
    if (alive.expired()) return;
    timer_ = kNoTimer;
    timer_at_ = kTimeNever;
    on_timer();
  });
}

void FluidSystem::on_timer() {
  const Time now = ex_.now();
  std::vector<Callback> finished;
  while (!heap_.empty() && heap_.front().at <= now) {
    const Finish f = heap_.front();
    std::pop_heap(heap_.begin(), heap_.end(), std::greater<>());
    heap_.pop_back();
    Activity& a = activities_[f.slot];
    if (!a.live || a.version != f.version) continue;
    // Settle so that the resource's load drops by what it carried.
    finished.push_back(std::move(a.done));
    detach(f.slot);
  }
  // Callbacks may start activities: one solve after all of them.
  in_event_ = true;
  for (auto& done : finished)
    if (done) done();
  in_event_ = false;
  solve();
  arm_timer();
}

}  // namespace twinps::sim
