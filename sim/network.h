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
// That is the FIFO model (the default). The FLOW model shares each link
// among the messages crossing it at once instead, max-min fair (sim/fluid.h):
// a message pays its path's latency, then transfers at its fair share of
// every link on its path, at most a TCP window per round trip; SimGrid's
// LV08 corrections (latency and bandwidth factors, RTT-weighted sharing,
// acknowledgement cross-traffic) can be switched on.
//
// With hosts (sim/hosts.h) tasks sit on hosts, and messages between tasks on
// one host take the loopback: its latency, no link. Each side of a message
// then also spends CPU time on it (MessageCpu: per message, item, row and
// byte), on its task's thread and host cores: the sender before the message
// leaves, the receiver before its handler sees it. Over a stream (a socket)
// a large message leaves before its sender's CPU for it ends, and the
// sender's rest runs beside the receiver's (MessageCosts::request_overlap).
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
#include "inmemory/in_memory_network.h"
#include "sim/cost_curve.h"
#include "sim/fluid.h"
#include "sim/hosts.h"

namespace twinps::sim {

struct LinkParams {
  double bandwidth_gbps = 10;
  Duration latency = 10 * kMicrosecond;
};

// CPU time one side of a call spends on a message: per message, per item
// (shard) in it, per row id it names or returns, and for its bytes — a
// measured curve of (bytes, us) points interpolated linearly (allocation,
// copies and caches make it other than proportional), or per_kib_ns alone.
struct MessageCpu {
  double per_message_ns = 0;
  // In its place when no core of the side's host is idle at the time
  // (MessageCpu.per_message_on_busy_host_us in sim/scenario.proto).
  std::optional<double> per_message_on_busy_host_ns;
  double per_item_ns = 0;
  double per_item_by_id_ns = 0;  // beyond per_item_ns, an item naming rows by id
  double per_row_ns = 0;
  double per_kib_ns = 0;
  CostCurve bytes_curve;  // replaces per_kib_ns when set
  double ns(const MessageShape& m, bool busy_host = false) const;
  bool zero() const {
    return per_message_ns == 0 && per_item_ns == 0 && per_item_by_id_ns == 0 && per_row_ns == 0 && per_kib_ns == 0 &&
           bytes_curve.empty();
  }
};

// How much of a side's `cpu` for a message of `bytes` runs beside the other
// side's, by an overlap curve (ns): at most all of it.
Duration stream_overlap(const CostCurve& curve, std::size_t bytes, Duration cpu);

struct MessageCosts {
  // Pull and Push (the data plane), the caller's side: sending its request,
  // receiving the reply. A ps's side is its service time (PsServiceModel).
  MessageCpu data_send, data_receive;
  MessageCpu control_send, control_receive;  // everything else (gRPC)
  // A data-plane request reaches the ps this long (ns, by its bytes) before
  // the caller's CPU for sending it ends: over a stream both ends copy at
  // once. (A reply's: PsServiceModel::reply_overlap.)
  CostCurve request_overlap;
  // A control message's side, beyond control_send / control_receive, by the
  // time since its task's previous one in the same direction (both in ns;
  // held level outside the curve): a process that slept is woken for it.
  CostCurve control_by_interval;
  // Such a side's price instead, when its host has no idle core at the time
  // (ns): a process woken then takes a core from a running one, where one
  // woken beside an idle core wakes that core first (a halted virtual CPU
  // wakes through its hypervisor). Unset: by interval on any host.
  std::optional<double> control_on_busy_host;
  bool zero() const {
    return data_send.zero() && data_receive.zero() && control_send.zero() && control_receive.zero() &&
           control_by_interval.empty();
  }
};

// The flow model's TCP and SimGrid's LV08 corrections.
struct FlowParams {
  double tcp_window_bytes = 4194304;  // rate <= window / (2 x path latency); 0: no bound
  double latency_factor = 1;          // LV08: 13.01 (slow start)
  double bandwidth_factor = 1;        // LV08: 0.97 (headers)
  double weight_s_bytes = 0;          // LV08: 20537 (RTT-unfair sharing: weight 1 / sum(latency + S / bandwidth))
  double crosstraffic = 0;            // LV08: 0.05 of a flow's rate on the reverse path (acknowledgements)
  // A message of at most one TCP segment is one packet: it is not shared
  // over time (it takes size / the slowest link's capacity, no fluid solve).
  std::size_t single_packet_bytes = 1448;
};

struct NetworkOptions {
  LinkParams host;               // every host's link to its switch
  int hosts_per_rack = 0;        // 0: one switch for all hosts
  LinkParams rack_uplink{100, 5 * kMicrosecond};
  std::vector<std::pair<TaskId, LinkParams>> host_overrides;  // the link of that task's host
  Duration connection_timeout = 10 * kSecond;
  enum class Model { kFifo, kFlow };
  Model model = Model::kFifo;
  FlowParams flow;
  Duration loopback_latency = 0;  // between tasks on one host
  MessageCosts cpu;               // with hosts
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
  // Every topology the network model builds is a tree (hosts on one switch,
  // or on rack switches under a core): the path between two hosts is the one
  // through their lowest common ancestor, found by climbing parent links, in
  // O(vertices) memory. The per-source tables below (vertices^2 entries, a
  // gigabyte at 11,000 tasks, and a Dijkstra per source) are for any other graph.
  bool build_tree();
  int tree_route(int from, int to, int* out, int max) const;
  int directed(int link, int from) const {
    return 2 * link + (ends_[static_cast<std::size_t>(link)].first == from ? 0 : 1);
  }

  Graph graph_;
  std::vector<std::pair<int, int>> ends_;           // by link id
  // The tree, when the graph is one (rooted at vertex 0): per vertex its
  // parent, the link to it and its depth; empty until first used or not a tree.
  struct TreeVertex {
    int parent = -1, link = -1, depth = 0;
  };
  std::vector<TreeVertex> tree_;
  bool tree_checked_ = false, is_tree_ = false;
  // Per source vertex, computed on first use: for each vertex, the vertex it
  // is reached from (high 32 bits) and the directed link (low 32), -1: none.
  std::vector<std::vector<std::int64_t>> via_;
};

class NetworkModel final : public LinkModel {
 public:
  NetworkModel(ClusterShape shape, NetworkOptions options);
  // About how much memory a model of this cluster holds once every task has
  // sent a message (the topology is a tree, so routes need no per-source
  // tables: see Topology). The scenario resource estimate (sim/resource_estimate.h) uses it; keep it in
  // step with the tables here.
  static double estimated_bytes(ClusterShape shape, int hosts_per_rack);
  // With hosts: tasks on one host share it (its link, its loopback), and
  // messages are carried asynchronously on `executor` (send()) when the flow
  // model, limited cores or message CPU costs need it.
  NetworkModel(ClusterShape shape, NetworkOptions options, HostModel* hosts, Executor* executor, FluidSystem* fluid);

  bool asynchronous() const override { return async_; }
  bool send(const TaskId& from, const TaskId& to, const MessageShape& shape, Callback arrived) override;

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
  // Directed link stats of a task's host link: out of the host, into it
  // (a host's tasks share them). Zero for a task alone on its host's loopback.
  const LinkStats& uplink(const TaskId& task) const;
  const LinkStats& downlink(const TaskId& task) const;
  std::uint64_t messages_lost() const { return lost_; }
  const Topology& topology() const { return topology_; }

 private:
  struct Directed {
    Time free_at = 0;
    mutable LinkStats stats;
    int resource = -1;  // flow model: its fluid resource
  };
  struct Partition {
    int id = 0;
    std::vector<std::uint8_t> side;  // by task slot: 0 neither, 1 a, 2 b
    bool b_is_rest = false;
  };
  int slot(const TaskId& t) const;
  bool partitioned(int a, int b) const;
  int host_link_of(const TaskId& t) const { return host_link_[static_cast<std::size_t>(slot(t))]; }
  int vertex_of(int task_slot) const { return vertex_[static_cast<std::size_t>(task_slot)]; }
  void build();
  // The network part of send(): after the sender's CPU, before the receiver's.
  void transmit(int from, int to, std::size_t bytes, Callback then);
  void start_flow(const int* path, int hops, std::size_t bytes, Callback then);
  void set_link_capacity(int link);
  // A control message's price by its interval (MessageCosts::
  // control_by_interval) for the task in `slot`, whose previous one in this
  // direction was at last[slot]; notes this one.
  Duration control_interval_price(std::vector<Time>& last, int task_slot);
  Time fifo(const int* path, int hops, std::size_t bytes, Time now);
  const LinkStats& stats_of(std::size_t directed) const;

  ClusterShape shape_;
  NetworkOptions options_;
  Topology topology_;
  HostModel* hosts_ = nullptr;
  Executor* ex_ = nullptr;
  FluidSystem* fluid_ = nullptr;
  bool async_ = false;
  std::vector<int> vertex_;                   // by task slot: its host's vertex
  std::vector<int> host_link_;                // by task slot (-1: its host has no link)
  std::vector<LinkParams> params_;            // by link id (current, after slowdowns)
  std::vector<std::vector<double>> slowdowns_;  // by link id: active factors
  std::vector<Directed> directed_;            // by directed link id
  // By task slot: when it last sent, and last received, a control message
  // (kNoControlMessage: never).
  std::vector<Time> last_control_sent_, last_control_received_;
  std::vector<Partition> partitions_;
  std::vector<Duration> departure_delay_;     // by task slot, for the next message only
  int next_partition_ = 1;
  std::uint64_t lost_ = 0;
};

}  // namespace twinps::sim
