#include "sim/network.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include <boost/graph/dijkstra_shortest_paths.hpp>

namespace twinps::sim {

// ---------------------------------------------------------------- Topology

// Vertices are added bare and their properties set after: adding them with
// a property goes through Boost's named-graph lookup, which GCC 12 with
// sanitizers flags as reading an uninitialized optional (a false positive).
int Topology::add_host(std::string name) {
  via_.clear();
  tree_checked_ = false;
  const auto v = boost::add_vertex(graph_);
  graph_[v] = Vertex{std::move(name), false};
  return static_cast<int>(v);
}

int Topology::add_switch(std::string name) {
  via_.clear();
  tree_checked_ = false;
  const auto v = boost::add_vertex(graph_);
  graph_[v] = Vertex{std::move(name), true};
  return static_cast<int>(v);
}

int Topology::add_link(int a, int b, LinkParams params) {
  via_.clear();
  tree_checked_ = false;
  const int id = static_cast<int>(ends_.size());
  boost::add_edge(static_cast<std::size_t>(a), static_cast<std::size_t>(b),
                  Edge{id, params, static_cast<double>(params.latency) + 1.0}, graph_);
  ends_.emplace_back(a, b);
  return id;
}

namespace {
// Records, for every vertex Dijkstra reaches, the vertex it was reached from
// and the directed link it came by, packed in one word so that walking a
// route back costs one lookup per hop.
struct ViaRecorder : boost::default_dijkstra_visitor {
  std::vector<std::int64_t>* via;
  const std::vector<std::pair<int, int>>* ends;
  ViaRecorder(std::vector<std::int64_t>* v, const std::vector<std::pair<int, int>>* e) : via(v), ends(e) {}
  void edge_relaxed(Topology::Graph::edge_descriptor e, const Topology::Graph& g) const {
    const auto from = static_cast<std::int64_t>(boost::source(e, g));
    const int link = g[e].id;
    const std::int64_t directed = 2 * link + ((*ends)[static_cast<std::size_t>(link)].first == from ? 0 : 1);
    (*via)[boost::target(e, g)] = (from << 32) | directed;
  }
};
}  // namespace

bool Topology::build_tree() {
  tree_checked_ = true;
  tree_.clear();
  const std::size_t n = boost::num_vertices(graph_);
  is_tree_ = n > 0 && boost::num_edges(graph_) == n - 1;
  if (!is_tree_) return false;
  // Breadth first from vertex 0; a graph with n - 1 edges that reaches every
  // vertex is a tree.
  tree_.assign(n, TreeVertex{});
  std::vector<bool> seen(n, false);
  std::vector<std::size_t> queue{0};
  seen[0] = true;
  for (std::size_t i = 0; i < queue.size(); ++i) {
    const std::size_t v = queue[i];
    for (auto e : boost::make_iterator_range(boost::out_edges(v, graph_))) {
      const std::size_t w = boost::target(e, graph_);
      if (seen[w]) continue;
      seen[w] = true;
      tree_[w] = TreeVertex{static_cast<int>(v), graph_[e].id, tree_[v].depth + 1};
      queue.push_back(w);
    }
  }
  is_tree_ = queue.size() == n;
  if (!is_tree_) tree_.clear();
  return is_tree_;
}

int Topology::tree_route(int from, int to, int* out, int max) const {
  // Up from both ends to their lowest common ancestor: `from`'s half runs
  // child to parent, `to`'s half (collected backwards) parent to child.
  int up[64], down[64];
  int n_up = 0, n_down = 0;
  int a = from, b = to;
  auto at = [&](int v) -> const TreeVertex& { return tree_[static_cast<std::size_t>(v)]; };
  while (a != b && n_up < 64 && n_down < 64) {
    if (at(a).depth >= at(b).depth) {
      up[n_up++] = directed(at(a).link, a);
      a = at(a).parent;
    } else {
      down[n_down++] = directed(at(b).link, at(b).parent);
      b = at(b).parent;
    }
  }
  const int hops = n_up + n_down;
  for (int i = 0; i < n_up && i < max; ++i) out[i] = up[i];
  for (int i = 0; i < n_down && n_up + i < max; ++i) out[n_up + i] = down[n_down - 1 - i];
  return hops;
}

int Topology::route(int from, int to, int* out, int max) {
  if (from == to) return 0;
  if (!tree_checked_) build_tree();
  if (is_tree_) return tree_route(from, to, out, max);
  const std::size_t n = boost::num_vertices(graph_);
  if (via_.size() != n) via_.assign(n, {});
  auto& via = via_[static_cast<std::size_t>(from)];
  if (via.empty()) {
    // Latency decides the path; ties are broken by Boost's visiting order,
    // which is fixed for a given construction order.
    via.assign(n, -1);
    std::vector<double> dist(n);
    std::vector<std::size_t> pred(n);
    boost::dijkstra_shortest_paths(
        graph_, static_cast<std::size_t>(from),
        boost::weight_map(boost::get(&Edge::weight, graph_))
            .distance_map(boost::make_iterator_property_map(dist.begin(), boost::get(boost::vertex_index, graph_)))
            .predecessor_map(boost::make_iterator_property_map(pred.begin(), boost::get(boost::vertex_index, graph_)))
            .visitor(ViaRecorder(&via, &ends_)));
  }
  // Walk back from `to`, then reverse.
  int hops = 0;
  int v = to;
  while (v != from) {
    const std::int64_t entry = via[static_cast<std::size_t>(v)];
    if (entry < 0) return 0;  // unreachable
    if (hops < max) out[hops] = static_cast<int>(entry & 0xffffffff);
    ++hops;
    v = static_cast<int>(entry >> 32);
  }
  std::reverse(out, out + std::min(hops, max));
  return hops;
}

// ---------------------------------------------------------------- NetworkModel

namespace {
constexpr Time kNoControlMessage = std::numeric_limits<Time>::min();
}  // namespace

NetworkModel::NetworkModel(ClusterShape shape, NetworkOptions options) : shape_(shape), options_(std::move(options)) {
  build();
}

NetworkModel::NetworkModel(ClusterShape shape, NetworkOptions options, HostModel* hosts, Executor* executor,
                           FluidSystem* fluid)
    : shape_(shape), options_(std::move(options)), hosts_(hosts), ex_(executor), fluid_(fluid) {
  async_ = ex_ != nullptr && (options_.model == NetworkOptions::Model::kFlow ||
                              (hosts_ != nullptr && (hosts_->limited() || !options_.cpu.zero() ||
                                                     hosts_->num_hosts() < 1 + shape_.workers + shape_.ps)));
  build();
}

void NetworkModel::build() {
  const int tasks = 1 + shape_.workers + shape_.ps;
  std::vector<TaskId> order;
  order.push_back(TaskId::chief());
  for (int i = 0; i < shape_.workers; ++i) order.push_back(TaskId::worker(i));
  for (int i = 0; i < shape_.ps; ++i) order.push_back(TaskId::ps(i));
  // A vertex per host: a task's own name when it is alone on its host.
  const int hosts = hosts_ ? hosts_->num_hosts() : tasks;
  vertex_.resize(static_cast<std::size_t>(tasks));
  for (int i = 0; i < tasks; ++i) vertex_[static_cast<std::size_t>(i)] = hosts_ ? hosts_->host_of(i) : i;
  for (int h = 0; h < hosts; ++h) {
    int alone = -1, count = 0;
    for (int i = 0; i < tasks; ++i)
      if (vertex_[static_cast<std::size_t>(i)] == h) alone = i, ++count;
    topology_.add_host(count == 1 ? order[static_cast<std::size_t>(alone)].short_name() : "host:" + std::to_string(h));
  }

  // A host's link: the override of one of its tasks, if any.
  auto host_params = [&](int h) {
    LinkParams p = options_.host;
    for (const auto& [task, o] : options_.host_overrides)
      if (vertex_[static_cast<std::size_t>(slot(task))] == h) p = o;
    return p;
  };
  std::vector<int> link_of_host(static_cast<std::size_t>(hosts));
  if (options_.hosts_per_rack <= 0) {
    const int sw = topology_.add_switch("switch");
    for (int h = 0; h < hosts; ++h) link_of_host[static_cast<std::size_t>(h)] = topology_.add_link(h, sw, host_params(h));
  } else {
    const int core = topology_.add_switch("core");
    int rack = -1;
    for (int h = 0; h < hosts; ++h) {
      if (h % options_.hosts_per_rack == 0) {
        rack = topology_.add_switch("rack:" + std::to_string(h / options_.hosts_per_rack));
        topology_.add_link(rack, core, options_.rack_uplink);
      }
      link_of_host[static_cast<std::size_t>(h)] = topology_.add_link(h, rack, host_params(h));
    }
  }
  host_link_.resize(static_cast<std::size_t>(tasks));
  for (int i = 0; i < tasks; ++i)
    host_link_[static_cast<std::size_t>(i)] = link_of_host[static_cast<std::size_t>(vertex_[static_cast<std::size_t>(i)])];
  params_.resize(static_cast<std::size_t>(topology_.num_links()));
  for (auto e : boost::make_iterator_range(boost::edges(topology_.graph())))
    params_[static_cast<std::size_t>(topology_.graph()[e].id)] = topology_.graph()[e].params;
  slowdowns_.resize(params_.size());
  directed_.resize(2 * params_.size());
  departure_delay_.assign(static_cast<std::size_t>(tasks), 0);
  if (options_.model == NetworkOptions::Model::kFlow && fluid_) {
    for (std::size_t d = 0; d < directed_.size(); ++d) directed_[d].resource = fluid_->add_resource(1.0);
    for (int link = 0; link < topology_.num_links(); ++link) set_link_capacity(link);
  }
}

// Gbit/s = bits per ns; the fluid system counts bytes per ns.
void NetworkModel::set_link_capacity(int link) {
  const double bytes_per_ns = params_[static_cast<std::size_t>(link)].bandwidth_gbps / 8.0 * options_.flow.bandwidth_factor;
  for (int dir = 0; dir < 2; ++dir) fluid_->set_capacity(directed_[static_cast<std::size_t>(2 * link + dir)].resource, bytes_per_ns);
}

double MessageCpu::ns(const MessageShape& m, bool busy_host) const {
  const double fixed = busy_host && per_message_on_busy_host_ns ? *per_message_on_busy_host_ns : per_message_ns;
  double t = fixed + per_item_ns * static_cast<double>(m.items) + per_item_by_id_ns * static_cast<double>(m.items_by_id) +
             per_row_ns * static_cast<double>(m.rows);
  const double b = static_cast<double>(m.bytes);
  if (bytes_curve.empty()) return t + per_kib_ns * b / 1024.0;
  return t + curve_cost(bytes_curve, b);
}

Duration stream_overlap(const CostCurve& curve, std::size_t bytes, Duration cpu) {
  return std::min(cpu, static_cast<Duration>(std::llround(curve_cost(curve, static_cast<double>(bytes)))));
}

Duration NetworkModel::control_interval_price(std::vector<Time>& last, int task_slot) {
  if (last.empty()) last.assign(static_cast<std::size_t>(1 + shape_.workers + shape_.ps), kNoControlMessage);
  Time& previous = last[static_cast<std::size_t>(task_slot)];
  const Time now = ex_->now();
  // The first message of a task: as if it had slept for ever (the curve's last point).
  const double interval = previous == kNoControlMessage ? std::numeric_limits<double>::infinity()
                                                        : static_cast<double>(now - previous);
  previous = now;
  const auto& busy = options_.cpu.control_on_busy_host;
  if (busy && !hosts_->idle_core(task_slot)) return static_cast<Duration>(std::llround(*busy));
  return static_cast<Duration>(std::llround(level_curve_cost(options_.cpu.control_by_interval, interval)));
}

bool NetworkModel::send(const TaskId& from, const TaskId& to, const MessageShape& shape, Callback arrived) {
  const int a = slot(from), b = slot(to);
  if (!partitions_.empty() && partitioned(a, b)) {
    ++lost_;
    return false;
  }
  const MessageCpu& out = shape.data_plane ? options_.cpu.data_send : options_.cpu.control_send;
  const MessageCpu& in = shape.data_plane ? options_.cpu.data_receive : options_.cpu.control_receive;
  // A ps's side of a data-plane call is its service time (sim/ps_service.h).
  const bool from_ps = shape.data_plane && from.job == Job::kPs, to_ps = shape.data_plane && to.job == Job::kPs;
  const bool by_interval = hosts_ && !shape.data_plane && !options_.cpu.control_by_interval.empty();
  auto send_ns = hosts_ && !from_ps ? static_cast<Duration>(std::llround(out.ns(shape, !hosts_->idle_core(a)))) : 0;
  if (by_interval) send_ns += control_interval_price(last_control_sent_, a);
  const std::size_t bytes = shape.bytes;
  // Receiver's CPU, then the handler. A control message's interval on the
  // receiving side, and whether its host has an idle core, are known when it
  // arrives.
  auto receive = [this, b, &in, shape, priced = hosts_ && !to_ps, by_interval, arrived = std::move(arrived)]() mutable {
    const auto receive_ns = priced ? static_cast<Duration>(std::llround(in.ns(shape, !hosts_->idle_core(b)))) : 0;
    const Duration receive_cpu = receive_ns + (by_interval ? control_interval_price(last_control_received_, b) : 0);
    if (receive_cpu > 0) {
      hosts_->run(b, receive_cpu, std::move(arrived), JobKind::kMessage);
    } else {
      arrived();
    }
  };
  auto go = [this, a, b, bytes, receive = std::move(receive)]() mutable { transmit(a, b, bytes, std::move(receive)); };
  if (send_ns == 0) {
    go();  // transmit() never calls back before an event of its own
    return true;
  }
  // Over a stream the message leaves `overlap` before the sender is done
  // with it; the sender's thread spends the rest while the receiver reads.
  const Duration overlap = shape.data_plane ? stream_overlap(options_.cpu.request_overlap, bytes, send_ns) : 0;
  if (overlap == 0) {
    hosts_->run(a, send_ns, std::move(go), JobKind::kMessage);
    return true;
  }
  hosts_->run(
      a, send_ns - overlap,
      [this, a, overlap, go = std::move(go)]() mutable {
        hosts_->run(a, overlap, [] {});  // the same message's rest: no second wake-up
        go();
      },
      JobKind::kMessage);
  return true;
}

void NetworkModel::transmit(int a, int b, std::size_t bytes, Callback then) {
  const int va = vertex_of(a), vb = vertex_of(b);
  if (va == vb) {  // the loopback
    ex_->post_after(options_.loopback_latency, std::move(then));
    return;
  }
  constexpr int kMaxHops = 16;
  int path[kMaxHops];
  const int hops = std::min(topology_.route(va, vb, path, kMaxHops), kMaxHops);
  if (options_.model == NetworkOptions::Model::kFifo) {
    const Time arrival = fifo(path, hops, bytes, ex_->now());
    ex_->post_at(arrival, std::move(then));
    return;
  }
  Duration latency = 0;
  for (int i = 0; i < hops; ++i) latency += params_[static_cast<std::size_t>(path[i] / 2)].latency;
  const auto paid = static_cast<Duration>(std::llround(static_cast<double>(latency) * options_.flow.latency_factor));
  std::vector<int> route(path, path + hops);
  ex_->post_after(paid, [this, route = std::move(route), bytes, then = std::move(then)]() mutable {
    start_flow(route.data(), static_cast<int>(route.size()), bytes, std::move(then));
  });
}

void NetworkModel::start_flow(const int* path, int hops, std::size_t bytes, Callback then) {
  if (bytes == 0 || hops == 0) {
    ex_->post(std::move(then));
    return;
  }
  if (bytes <= options_.flow.single_packet_bytes) {
    // One packet: nothing to share over time; it crosses at the slowest
    // link's speed (the requests, acknowledgements and control calls, most
    // messages of a step, cost no solve).
    double slowest = FluidSystem::kUnbounded;
    for (int i = 0; i < hops; ++i) {
      Directed& d = directed_[static_cast<std::size_t>(path[i])];
      slowest = std::min(slowest, fluid_->capacity(d.resource));
      ++d.stats.messages;
      d.stats.bytes += bytes;
    }
    ex_->post_after(static_cast<Duration>(std::ceil(static_cast<double>(bytes) / slowest)), std::move(then));
    return;
  }
  boost::container::small_vector<int, 8> resources;
  boost::container::small_vector<double, 8> uses;
  Duration latency = 0;
  double penalty = 0;
  for (int i = 0; i < hops; ++i) {
    Directed& d = directed_[static_cast<std::size_t>(path[i])];
    const LinkParams& p = params_[static_cast<std::size_t>(path[i] / 2)];
    latency += p.latency;
    penalty += static_cast<double>(p.latency) + options_.flow.weight_s_bytes / (p.bandwidth_gbps / 8.0);
    ++d.stats.messages;
    d.stats.bytes += bytes;
    resources.push_back(d.resource);
    uses.push_back(1.0);
  }
  if (options_.flow.crosstraffic > 0) {
    for (int i = 0; i < hops; ++i) {
      resources.push_back(directed_[static_cast<std::size_t>(path[i] ^ 1)].resource);
      uses.push_back(options_.flow.crosstraffic);
    }
  }
  const double bound = options_.flow.tcp_window_bytes > 0 && latency > 0
                           ? options_.flow.tcp_window_bytes / (2.0 * static_cast<double>(latency))
                           : FluidSystem::kUnbounded;
  const double weight = penalty > 0 ? 1.0 / penalty : 1.0;
  fluid_->start(static_cast<double>(bytes), std::span<const int>(resources.data(), resources.size()),
                std::span<const double>(uses.data(), uses.size()), bound, weight, std::move(then));
}

double NetworkModel::estimated_bytes(ClusterShape shape, int hosts_per_rack) {
  const double tasks = 1.0 + shape.workers + shape.ps;
  const double switches = hosts_per_rack <= 0 ? 1.0 : 1.0 + std::ceil(tasks / hosts_per_rack);
  const double vertices = tasks + switches;
  const double links = tasks + (hosts_per_rack <= 0 ? 0.0 : switches - 1);
  // The topology is a tree: per vertex its parent, link and depth (routes
  // climb it; no per-source tables); per task its host link, departure delay
  // and graph vertex; per link its parameters, slowdowns and both directions' state.
  return vertices * (12.0 + 32.0) + tasks * 64.0 + links * 256.0;
}

int NetworkModel::slot(const TaskId& t) const {
  switch (t.job) {
    case Job::kChief: return 0;
    case Job::kWorker: return 1 + t.index;
    case Job::kPs: return 1 + shape_.workers + t.index;
    case Job::kEvaluator: break;
  }
  return 0;
}

bool NetworkModel::partitioned(int a, int b) const {
  for (const auto& p : partitions_) {
    const auto sa = p.side[static_cast<std::size_t>(a)], sb = p.side[static_cast<std::size_t>(b)];
    if (p.b_is_rest ? (sa == 1) != (sb == 1) : (sa == 1 && sb == 2) || (sa == 2 && sb == 1)) return true;
  }
  return false;
}

std::optional<Time> NetworkModel::deliver(const TaskId& from, const TaskId& to, std::size_t bytes, Time now) {
  const int a = slot(from), b = slot(to);
  now = add_saturating(now, std::exchange(departure_delay_[static_cast<std::size_t>(a)], 0));
  if (!partitions_.empty() && partitioned(a, b)) {
    ++lost_;
    return std::nullopt;
  }
  constexpr int kMaxHops = 16;
  int path[kMaxHops];
  const int va = vertex_of(a), vb = vertex_of(b);
  if (va == vb) return add_saturating(now, options_.loopback_latency);
  const int hops = std::min(topology_.route(va, vb, path, kMaxHops), kMaxHops);
  return fifo(path, hops, bytes, now);
}

// Crosses each directed link in turn, first come first served (see network.h).
Time NetworkModel::fifo(const int* path, int hops, std::size_t bytes, Time now) {
  Time head = now, tail = now;
  for (int i = 0; i < hops; ++i) {
    Directed& d = directed_[static_cast<std::size_t>(path[i])];
    const LinkParams& p = params_[static_cast<std::size_t>(path[i] / 2)];
    // Gbit/s = bits per ns; ceil so that a byte never travels for free.
    const auto transfer = static_cast<Duration>(std::ceil(static_cast<double>(bytes) * 8.0 / p.bandwidth_gbps));
    const Time start = std::max(head, d.free_at);
    const Time end = std::max(start + transfer, tail);
    d.stats.max_wait = std::max(d.stats.max_wait, start - head);
    d.stats.busy += end - start;
    d.stats.bytes += bytes;
    ++d.stats.messages;
    d.free_at = end;
    head = start + p.latency;
    tail = end + p.latency;
  }
  return tail;
}

int NetworkModel::add_partition(const std::vector<TaskId>& a, const std::vector<TaskId>& b) {
  Partition p;
  p.id = next_partition_++;
  p.side.assign(static_cast<std::size_t>(1 + shape_.workers + shape_.ps), 0);
  for (const auto& t : a) p.side[static_cast<std::size_t>(slot(t))] = 1;
  for (const auto& t : b) p.side[static_cast<std::size_t>(slot(t))] = 2;
  p.b_is_rest = b.empty();
  partitions_.push_back(std::move(p));
  return partitions_.back().id;
}

void NetworkModel::remove_partition(int id) {
  partitions_.erase(std::remove_if(partitions_.begin(), partitions_.end(), [id](const Partition& p) { return p.id == id; }),
                    partitions_.end());
}

void NetworkModel::slow_host_link(const TaskId& task, double factor) {
  const auto link = static_cast<std::size_t>(host_link_of(task));
  slowdowns_[link].push_back(factor);
  params_[link].bandwidth_gbps /= factor;
  params_[link].latency = static_cast<Duration>(static_cast<double>(params_[link].latency) * factor);
  if (directed_[2 * link].resource >= 0) set_link_capacity(static_cast<int>(link));
}

void NetworkModel::unslow_host_link(const TaskId& task, double factor) {
  const auto link = static_cast<std::size_t>(host_link_of(task));
  auto& active = slowdowns_[link];
  auto it = std::find(active.begin(), active.end(), factor);
  if (it == active.end()) return;
  active.erase(it);
  // Recompute from the base parameters so that undoing is exact.
  LinkParams p;
  for (auto e : boost::make_iterator_range(boost::edges(topology_.graph())))
    if (topology_.graph()[e].id == static_cast<int>(link)) p = topology_.graph()[e].params;
  for (double f : active) {
    p.bandwidth_gbps /= f;
    p.latency = static_cast<Duration>(static_cast<double>(p.latency) * f);
  }
  params_[link] = p;
  if (directed_[2 * link].resource >= 0) set_link_capacity(static_cast<int>(link));
}

const NetworkModel::LinkStats& NetworkModel::stats_of(std::size_t directed) const {
  const Directed& d = directed_[directed];
  // The flow model's busy time is the link's used capacity, integrated.
  if (d.resource >= 0) d.stats.busy = static_cast<Duration>(fluid_->busy_ns(d.resource));
  return d.stats;
}

// Host links are added host first, so direction 0 leaves the host.
const NetworkModel::LinkStats& NetworkModel::uplink(const TaskId& task) const {
  return stats_of(static_cast<std::size_t>(2 * host_link_of(task)));
}

const NetworkModel::LinkStats& NetworkModel::downlink(const TaskId& task) const {
  return stats_of(static_cast<std::size_t>(2 * host_link_of(task) + 1));
}

}  // namespace twinps::sim
