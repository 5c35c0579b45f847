#pragma once
// The simulated network: a Boost.Graph topology of hosts, switches and
// full-duplex links, plugged into core's InMemoryNetwork as its LinkModel.
//
// Every task has a host of its own. A message follows the lowest-latency path
// (Dijkstra, computed once per source host) and crosses each directed link in
// turn. A link carries one message at a time, in the order they were sent:
// a message starts on a link when its head arrives and the link is free,
// occupies it for size / bandwidth, and its head moves on after the link's
// latency (cut-through, so a large message is not charged its transfer time
// once per hop). Delivery is when its tail reaches the last hop's end. A hot
// parameter server therefore shows up as a queue on its host link.
//
// Faults: partitions (messages between two sets of tasks are lost; the call
// fails with UNAVAILABLE after the connection timeout or DEADLINE_EXCEEDED at
// its deadline, whichever is first) and slow host links.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <boost/graph/adjacency_list.hpp>

#include "core/cluster/task_id.h"
#include "core/coordinator/cluster_coordinator.h"
#include "core/local/in_memory_network.h"

namespace twinps::sim {

struct LinkParams {
  double bandwidth_gbps = 10;
  Duration latency = 10 * kMicrosecond;
};

struct NetworkOptions {
  LinkParams host;               // every host's link to its switch
  int hosts_per_rack = 0;        // 0: one switch for all hosts
  LinkParams rack_uplink{100, 5 * kMicrosecond};
  std::vector<std::pair<TaskId, LinkParams>> host_overrides;
  Duration connection_timeout = 10 * kSecond;
};

class Topology {
 public:
  struct Vertex {
    std::string name;  // "worker:3", "rack:0", "core"
    bool is_switch = false;
  };
  struct Edge {
    int id = 0;
    LinkParams params;
    double weight = 1;  // for routing: latency, plus 1 so fewer hops win ties
  };
  using Graph = boost::adjacency_list<boost::vecS, boost::vecS, boost::undirectedS, Vertex, Edge>;

  int add_host(std::string name);
  int add_switch(std::string name);
  int add_link(int a, int b, LinkParams params);  // returns the link id

  // The directed links from host `from` to host `to`, in order; each id is
  // 2 * link + (0 if it runs from the link's first endpoint, else 1).
  // Writes at most `max` ids and returns how many the path has (0 if none).
  int route(int from, int to, int* out, int max);

  const Graph& graph() const { return graph_; }
  int num_links() const { return static_cast<int>(ends_.size()); }
  std::pair<int, int> link_ends(int link) const { return ends_[static_cast<std::size_t>(link)]; }

 private:
  Graph graph_;
  std::vector<std::pair<int, int>> ends_;           // by link id
  // Per source vertex, computed on first use: for each vertex, the vertex it
  // is reached from (high 32 bits) and the directed link (low 32), -1: none.
  std::vector<std::vector<std::int64_t>> via_;
};

class NetworkModel final : public LinkModel {
 public:
  NetworkModel(ClusterShape shape, NetworkOptions options);
  // About how much memory a model of this cluster holds once every task has
  // sent a message: mostly the route tables (Topology::route caches, per
  // source vertex, an entry for every vertex: vertices^2 entries). The
  // scenario resource estimate (sim/resource_estimate.h) uses it; keep it in
  // step with the tables here.
  static double estimated_bytes(ClusterShape shape, int hosts_per_rack);

  std::optional<Time> deliver(const TaskId& from, const TaskId& to, std::size_t bytes, Time now) override;
  std::optional<Duration> loss_detection_delay() const override { return options_.connection_timeout; }

  // The next message `from` sends leaves `delay` after it is handed over (a
  // ps reply that leaves when its service ends), so no event is needed to
  // hold it back.
  void depart_later(const TaskId& from, Duration delay) { departure_delay_[static_cast<std::size_t>(slot(from))] = delay; }

  // Messages between a task in `a` and one in `b` (every task not in `a` when
  // `b` is empty) are lost until remove_partition(id).
  int add_partition(const std::vector<TaskId>& a, const std::vector<TaskId>& b);
  void remove_partition(int id);
  // The task's host link gets `factor` times slower (bandwidth / factor,
  // latency * factor) until undone by unslow_host_link with the same factor.
  void slow_host_link(const TaskId& task, double factor);
  void unslow_host_link(const TaskId& task, double factor);

  struct LinkStats {
    std::uint64_t messages = 0;
    std::uint64_t bytes = 0;
    Duration busy = 0;
    Duration max_wait = 0;  // longest a message waited for the link
  };
  // Directed link stats of a task's host link: out of the host, into it.
  const LinkStats& uplink(const TaskId& task) const;
  const LinkStats& downlink(const TaskId& task) const;
  std::uint64_t messages_lost() const { return lost_; }
  const Topology& topology() const { return topology_; }

 private:
  struct Directed {
    Time free_at = 0;
    LinkStats stats;
  };
  struct Partition {
    int id = 0;
    std::vector<std::uint8_t> side;  // by task slot: 0 neither, 1 a, 2 b
    bool b_is_rest = false;
  };
  int slot(const TaskId& t) const;
  bool partitioned(int a, int b) const;
  int host_link_of(const TaskId& t) const { return host_link_[static_cast<std::size_t>(slot(t))]; }

  ClusterShape shape_;
  NetworkOptions options_;
  Topology topology_;
  std::vector<int> host_link_;                // by task slot
  std::vector<LinkParams> params_;            // by link id (current, after slowdowns)
  std::vector<std::vector<double>> slowdowns_;  // by link id: active factors
  std::vector<Directed> directed_;            // by directed link id
  std::vector<Partition> partitions_;
  std::vector<Duration> departure_delay_;     // by task slot, for the next message only
  int next_partition_ = 1;
  std::uint64_t lost_ = 0;
};

}  // namespace twinps::sim
