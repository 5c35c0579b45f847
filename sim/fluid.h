#pragma once
// Fluid sharing of resources among concurrent activities: the model behind
// the simulator's flow-level network (bytes through links) and its host CPUs
// (work through cores).
//
// A resource has a capacity (units per ns: bytes/ns for a link, cores for a
// CPU). An activity needs an amount of units, crosses a set of resources, and
// may be bounded (a TCP window over the round trip; a single thread can use
// at most one core). Rates are max-min fair, weighted: progressive filling
// raises every unfixed activity's rate in proportion to its weight until a
// resource saturates (its activities are then fixed at that level) or an
// activity reaches its bound (it is fixed there). With one resource of
// capacity C and n unbounded activities of weight 1 each gets C / n; with a
// bound of 1 per activity and C cores it is egalitarian processor sharing,
// min(1, C / n) each.
//
// Rates change only when an activity starts, ends or is cancelled, or a
// capacity changes. Then only the connected component of the resources
// touched is solved again (activities linked through shared resources); the
// others keep their rates. A component of more than kExactLimit activities
// (thousands of flows through saturated links) is solved one level deep:
// the activities of the touched resources, the rest held at their rates —
// bounded work per change, exact again once the component is small. Every change in one instant is solved once, at
// the end of the instant (an event of its own, or the completion event that
// caused it). Each activity's remaining amount is settled only when its rate
// changes; completions come from a heap of finish times, and one timer waits
// for the earliest. Every callback runs from an event, never inside start().
//
// Deterministic: no unordered container is iterated, ties break by id.
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include <boost/container/small_vector.hpp>

#include "core/runtime/executor.h"

namespace twinps::sim {

class FluidSystem {
 public:
  using ActivityId = std::uint64_t;
  static constexpr ActivityId kNoActivity = 0;
  static constexpr double kUnbounded = 1e300;

  // Events (solving, completions) are posted on `executor`.
  explicit FluidSystem(Executor& executor) : ex_(executor) {}
  FluidSystem(const FluidSystem&) = delete;
  FluidSystem& operator=(const FluidSystem&) = delete;
  ~FluidSystem();

  // Units per ns (> 0).
  int add_resource(double capacity);
  void set_capacity(int resource, double capacity);
  double capacity(int resource) const { return resources_[static_cast<std::size_t>(resource)].capacity; }

  // Starts an activity needing `amount` (> 0) units through `resources`
  // (at least one), its rate at most `bound` units per ns, its share in
  // proportion to `weight` (> 0). `done` runs from an event when the last
  // unit has passed.
  ActivityId start(double amount, std::span<const int> resources, double bound, double weight, Callback done);
  // The same, where each unit of the activity uses `uses[i]` units of
  // resources[i] (SimGrid's cross-traffic: a flow's acknowledgements take a
  // twentieth of its rate on the reverse path).
  ActivityId start(double amount, std::span<const int> resources, std::span<const double> uses, double bound,
                   double weight, Callback done);
  // Drops an activity that has not finished; its `done` never runs. A no-op
  // for one that has.
  void cancel(ActivityId id);

  // Its current rate (units per ns; the rate of the last solve, so 0 until
  // the instant it started in has been solved), 0 if it is finished.
  double rate(ActivityId id) const;
  bool active(ActivityId id) const;

  // The resource's capacity used, integrated over time: ns at full load
  // (a link carrying half its capacity for 2 ms was busy 1 ms).
  double busy_ns(int resource) const;
  // Activities crossing the resource now.
  std::size_t load_count(int resource) const { return resources_[static_cast<std::size_t>(resource)].users.size(); }

  // Work done so far, for measuring the solver: activities solved, solves.
  std::uint64_t solves() const { return solves_; }
  std::uint64_t activities_solved() const { return activities_solved_; }
  std::uint64_t bounded_solves() const { return bounded_solves_; }
  // A component of more activities than this is solved one level deep only
  // (see solve()).
  static constexpr std::size_t kExactLimit = 256;

 private:
  struct Use {
    std::uint32_t activity;  // slot
    std::uint32_t k;         // index in that activity's resource list
    double factor;           // units of the resource per unit of the activity
  };
  struct Resource {
    double capacity = 0;
    std::vector<Use> users;
    double used = 0;        // sum of the rates of its activities, as last solved
    double busy = 0;        // integral of used / capacity (ns)
    Time settled_at = 0;    // `busy` is up to date until here
    bool dirty = false;
    std::uint64_t mark = 0;  // component search
    // Progressive filling.
    double remaining_capacity = 0;
    double weight_left = 0;
    int unfixed = 0;
    std::uint64_t stamp = 0;
  };
  struct Activity {
    std::uint32_t generation = 0;
    bool live = false;
    bool fixed = false;
    double remaining = 0;
    double rate = 0;
    double new_rate = 0;
    double bound = kUnbounded;
    double weight = 1;
    Time updated_at = 0;
    Time finish_at = kTimeNever;
    std::uint64_t version = 0;  // bumped when finish_at changes; stale heap entries are skipped
    std::uint64_t mark = 0;
    boost::container::small_vector<int, 4> resources;
    boost::container::small_vector<std::uint32_t, 4> positions;  // in each resource's users
    boost::container::small_vector<double, 4> factors;          // use per unit, per resource
    Callback done;
  };
  struct Finish {
    Time at;
    std::uint32_t slot;
    std::uint64_t version;
    bool operator>(const Finish& o) const { return at != o.at ? at > o.at : slot > o.slot; }
  };

  Activity* find(ActivityId id);
  const Activity* find(ActivityId id) const;
  void detach(std::uint32_t slot);
  void touch(int resource);
  void request_solve();
  void solve();
  void fill(const std::vector<int>& component_resources, const std::vector<std::uint32_t>& component_activities);
  void settle_busy(Resource& r, Time now);
  void arm_timer();
  void on_timer();

  Executor& ex_;
  std::vector<Resource> resources_;
  std::vector<Activity> activities_;
  std::vector<std::uint32_t> free_slots_;
  std::vector<int> dirty_;
  std::vector<Finish> heap_;  // min-heap by (at, slot)
  TimerId timer_ = kNoTimer;
  Time timer_at_ = kTimeNever;
  bool solve_posted_ = false;
  bool in_event_ = false;  // completions running: solve after them, not from an event of its own
  std::uint64_t mark_ = 0;
  std::uint64_t solves_ = 0, activities_solved_ = 0, bounded_solves_ = 0;
  // Scratch, kept to avoid allocating per solve.
  std::vector<int> comp_resources_;
  std::vector<std::uint32_t> comp_activities_, stack_;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace twinps::sim
