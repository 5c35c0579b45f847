// What a task tells its operators: a Prometheus /metrics endpoint whose
// figures match the run's own report and summary, leveled logs (text or
// JSON), and one clear line — not gRPC's internal dump — when a port is
// taken. Real processes on 127.0.0.1; every wait is bounded.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmath>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/write.hpp>
#include <nlohmann/json.hpp>

#include "net/throwaway_pki.h"
#include "tests/tools/local_cluster.h"
#include "tests/tools/process.h"

namespace twinps {
namespace {

using namespace std::chrono_literals;
using testing::LocalCluster;
using testing::Process;
namespace asio = boost::asio;

std::string tf_config(const std::map<TaskId, std::string>& addresses, const TaskId& task) {
  nlohmann::json cluster;
  for (const auto& [t, a] : addresses) cluster[std::string(job_name(t.job))].push_back(a);
  return nlohmann::json{{"cluster", cluster},
                        {"task", {{"type", std::string(job_name(task.job))}, {"index", task.index}}}}
      .dump();
}

// The port a process announced in "metrics on http(s)://HOST:PORT/metrics".
int metrics_port_of(const Process& p) {
  std::smatch m;
  const std::string err = p.err();
  if (!std::regex_search(err, m, std::regex("metrics on https?://[^ ]*:([0-9]+)/metrics"))) return 0;
  return std::stoi(m[1]);
}

// GET `path` from 127.0.0.1:port (over TLS, verified against `ca_pem`, when given); the body, "" on failure.
std::string http_get(int port, const std::string& path, const std::string& ca_pem = "") {
  try {
    asio::io_context io;
    asio::ip::tcp::socket socket(io);
    socket.connect({asio::ip::make_address("127.0.0.1"), static_cast<unsigned short>(port)});
    timeval tv{30, 0};
    ::setsockopt(socket.native_handle(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    const std::string request = "GET " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
    std::string response;
    boost::system::error_code ec;
    auto read_all = [&](auto& stream) {
      asio::write(stream, asio::buffer(request));
      char buf[16384];
      for (;;) {
        const std::size_t n = stream.read_some(asio::buffer(buf), ec);
        response.append(buf, n);
        if (ec) break;
      }
    };
    if (ca_pem.empty()) {
      read_all(socket);
    } else {
      asio::ssl::context ctx(asio::ssl::context::tls_client);
      ctx.add_certificate_authority(asio::buffer(ca_pem));
      asio::ssl::stream<asio::ip::tcp::socket&> tls(socket, ctx);
      tls.set_verify_mode(asio::ssl::verify_peer);
      tls.set_verify_callback(asio::ssl::host_name_verification("127.0.0.1"));
      tls.handshake(asio::ssl::stream_base::client);
      read_all(tls);
    }
    const auto body = response.find("\r\n\r\n");
    if (response.rfind("HTTP/1.1 200", 0) != 0 || body == std::string::npos) return "";
    return response.substr(body + 4);
  } catch (const std::exception&) {
    return "";
  }
}

// Prometheus text format: "name{labels} value" -> value, comments skipped.
// at() on a missing series fails the test naming it.
struct Metrics : std::map<std::string, double> {
  std::string text;
  double at(const std::string& series) const {
    auto it = find(series);
    if (it != end()) return it->second;
    ADD_FAILURE() << "no series " << series << " in:\n" << text;
    return std::nan("");
  }
};
Metrics parse_metrics(const std::string& text) {
  Metrics out;
  out.text = text;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    const auto space = line.rfind(' ');
    out[line.substr(0, space)] = std::stod(line.substr(space + 1));
  }
  return out;
}

nlohmann::json read_json(const std::string& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in);
}

// A row of the summary table train prints ("  closures scheduled   25").
long long summary_row(const std::string& out, const std::string& key) {
  std::smatch m;
  if (!std::regex_search(out, m, std::regex("  " + key + " +([0-9]+)"))) return -1;
  return std::stoll(m[1]);
}

TEST(ObservabilityTest, MetricsScrapedAfterTrainingMatchTheReportAndSummary) {
  const std::string dir = testing::temp_dir("metrics");
  LocalCluster cluster(2, 2, dir);
  std::map<TaskId, Process*> servers;
  for (const auto& t : {TaskId::ps(0), TaskId::ps(1), TaskId::worker(0), TaskId::worker(1)}) {
    ASSERT_TRUE(cluster.start(t, {"--metrics-port", "0"}));
    servers[t] = &cluster.server(t);
    ASSERT_TRUE(servers[t]->wait_for_output("metrics on", 20s)) << servers[t]->err();
  }
  Process train = cluster.train({"--metrics-port", "0", "--metrics-linger", "300", "--report", dir + "/report.json"});
  ASSERT_TRUE(train.wait_for_output("final metrics served", 120s)) << train.err();
  const auto report = read_json(dir + "/report.json");
  const auto chief = parse_metrics(http_get(metrics_port_of(train), "/metrics"));
  ASSERT_FALSE(chief.empty()) << "no metrics from the chief";

  const auto& stats = report["stats"];
  for (const auto& [metric, field] : std::vector<std::pair<std::string, std::string>>{
           {"twinps_closures_scheduled_total", "scheduled"},
           {"twinps_closures_completed_total", "completed"},
           {"twinps_closures_retried_total", "retried"},
           {"twinps_closures_cancelled_total", "cancelled"},
           {"twinps_worker_failures_total", "worker_failures"},
           {"twinps_worker_recoveries_total", "worker_recoveries"},
           {"twinps_errors_raised_total", "errors_raised"}}) {
    EXPECT_EQ(chief.at(metric), stats[field].get<double>()) << metric;
  }
  EXPECT_GT(chief.at("twinps_closures_scheduled_total"), 0);
  EXPECT_EQ(chief.at("twinps_closures_scheduled_total"), summary_row(train.out(), "closures scheduled"));
  EXPECT_EQ(chief.at("twinps_closures_retried_total"), summary_row(train.out(), "closures retried"));
  EXPECT_EQ(chief.at("twinps_training_steps_total"), report["epochs"].back()["iterations"].get<double>());
  EXPECT_EQ(chief.at("twinps_training_examples_total"), 8 * chief.at("twinps_training_steps_total"));
  const double eps = report["examples_per_second"].get<double>();
  EXPECT_NEAR(chief.at("twinps_training_examples_per_second"), eps, 1e-9 * eps);
  EXPECT_EQ(chief.at("twinps_training_epochs_completed"), report["epochs"].size());
  EXPECT_EQ(chief.at("twinps_training_accuracy"), report["epochs"].back()["accuracy"].get<double>());
  EXPECT_EQ(chief.at("twinps_ps_failures_total"), 0);
  EXPECT_EQ(chief.at("twinps_task_info{role=\"chief\",task=\"chief:0\"}"), 1);

  double pushes = 0, gradients_measured = 0;
  for (int i = 0; i < 2; ++i) {
    const auto ps = parse_metrics(http_get(metrics_port_of(*servers[TaskId::ps(i)]), "/metrics"));
    ASSERT_FALSE(ps.empty()) << "no metrics from ps:" << i;
    // Each applied push is one observation of the apply latency.
    EXPECT_EQ(ps.at("twinps_ps_apply_latency_seconds_count"), ps.at("twinps_ps_push_requests_total"));
    EXPECT_EQ(ps.at("twinps_ps_apply_latency_seconds_bucket{le=\"+Inf\"}"), ps.at("twinps_ps_push_requests_total"));
    EXPECT_GT(ps.at("twinps_ps_pull_requests_total"), 0);
    EXPECT_GT(ps.at("twinps_ps_sent_bytes_total"), 0);
    EXPECT_GT(ps.at("twinps_data_plane_received_bytes_total"), 0);
    EXPECT_EQ(ps.count("twinps_data_plane_shared_memory_sent_bytes_total"), 1u);
    pushes += ps.at("twinps_ps_push_requests_total");
    gradients_measured += ps.at("twinps_ps_gradient_staleness_count");
  }
  EXPECT_GT(pushes, 0);
  // The staleness each ps measured is what the chief's report adds up from
  // the closures (none failed after pushing).
  EXPECT_GT(gradients_measured, 0);
  EXPECT_EQ(gradients_measured, report["staleness"]["gradients"].get<double>());
  const auto worker = parse_metrics(http_get(metrics_port_of(*servers[TaskId::worker(0)]), "/metrics"));
  const auto worker1 = parse_metrics(http_get(metrics_port_of(*servers[TaskId::worker(1)]), "/metrics"));
  // Every closure completed ran on one of the two workers.
  EXPECT_GE(worker.at("twinps_worker_closures_run_total") + worker1.at("twinps_worker_closures_run_total"),
            chief.at("twinps_closures_completed_total"));
  EXPECT_EQ(http_get(metrics_port_of(train), "/nothing-here"), "");

  train.kill(SIGTERM);  // ends the linger early
  ASSERT_TRUE(train.wait(30s));
  EXPECT_EQ(train.exit_code(), 0) << train.err();
}

TEST(ObservabilityTest, MetricsAreServedOverTlsWhenTheTaskHasIt) {
  auto ca = net::make_throwaway_ca("metrics test CA");
  ASSERT_TRUE(ca.ok()) << ca.status();
  auto leaf = net::issue_certificate(*ca, {"127.0.0.1"});
  ASSERT_TRUE(leaf.ok()) << leaf.status();
  const std::string dir = testing::temp_dir("metrics-tls");
  for (auto [name, text] : {std::pair<std::string, std::string>{"ca.pem", ca->cert_pem}, {"tls.crt", leaf->cert_pem},
                            {"tls.key", leaf->key_pem}})
    std::ofstream(dir + "/" + name) << text;
  LocalCluster cluster(1, 1);
  ASSERT_TRUE(cluster.start(TaskId::ps(0), {"--metrics-port", "0", "--tls-cert", dir + "/tls.crt", "--tls-key",
                                            dir + "/tls.key", "--tls-ca", dir + "/ca.pem"}));
  Process& ps = cluster.server(TaskId::ps(0));
  ASSERT_TRUE(ps.wait_for_output("metrics on https://", 20s)) << ps.err();
  const int port = metrics_port_of(ps);
  const auto m = parse_metrics(http_get(port, "/metrics", ca->cert_pem));
  EXPECT_EQ(m.at("twinps_task_info{role=\"ps\",task=\"ps:0\"}"), 1);
  EXPECT_EQ(http_get(port, "/metrics"), "") << "served in clear on a TLS task";
}

TEST(ObservabilityTest, APortInUseGivesOneClearLineNotGrpcsInternalLog) {
  // Issue 9, point 14: gRPC printed its multi-line internal error first.
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_ANY);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(::listen(fd, 1), 0);
  socklen_t len = sizeof addr;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  const int taken = ntohs(addr.sin_port);
  const testing::ReservedPort worker_port;  // the ps never calls it; nothing listens there
  std::map<TaskId, std::string> cluster{{TaskId::ps(0), "127.0.0.1:" + std::to_string(taken)},
                                        {TaskId::worker(0), worker_port.address()}};
  Process p = Process::start({testing::twinps_binary(), "serve"}, {"TF_CONFIG=" + tf_config(cluster, TaskId::ps(0))});
  ASSERT_TRUE(p.wait(30s));
  ::close(fd);
  EXPECT_EQ(p.exit_code(), 1) << p.err();
  const std::string err = p.err();
  EXPECT_NE(err.find("error twinps serve: cannot serve ps:0"), std::string::npos) << err;
  EXPECT_NE(err.find("cannot listen on 0.0.0.0:" + std::to_string(taken)), std::string::npos) << err;
  EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << "one line:\n" << err;
  for (const char* internal : {"chttp2", "created_time", "grpc:", ".cc:"})
    EXPECT_EQ(err.find(internal), std::string::npos) << internal << " in:\n" << err;
}

TEST(ObservabilityTest, LogsAreLeveledAndCanBeJson) {
  LocalCluster cluster(1, 1);
  ASSERT_TRUE(cluster.start(TaskId::ps(0), {}, {"TWINPS_LOG_FORMAT=json"}));
  Process& ps = cluster.server(TaskId::ps(0));
  ps.stop();
  std::istringstream lines(ps.err());
  std::string line;
  int parsed = 0;
  while (std::getline(lines, line)) {
    auto j = nlohmann::json::parse(line);  // every line is one JSON object
    EXPECT_TRUE(j.contains("time") && j.contains("level") && j.contains("logger") && j.contains("msg")) << line;
    if (j["msg"].get<std::string>().find("serving on") != std::string::npos) {
      EXPECT_EQ(j["level"], "info");
    }
    ++parsed;
  }
  EXPECT_GE(parsed, 2) << ps.err();  // serving on ..., stopping

  // --log-level warn hides the info lines (the readiness line too: no port
  // to read, and none needed); a bad level names the flag.
  Process quiet = Process::start(
      {testing::twinps_binary(), "serve", "--log-level", "warn", "--metrics-port", "0", "--port", "0"},
      {"TF_CONFIG=" + cluster.tf_config(TaskId::ps(0))});
  Process bad = Process::start({testing::twinps_binary(), "serve", "--log-level", "loud"},
                               {"TF_CONFIG=" + cluster.tf_config(TaskId::ps(0))});
  ASSERT_TRUE(bad.wait(30s));
  EXPECT_EQ(bad.exit_code(), 2);
  EXPECT_NE(bad.err().find("--log-level"), std::string::npos) << bad.err();
  quiet.stop();
  EXPECT_EQ(quiet.err().find("serving on"), std::string::npos) << quiet.err();
}

}  // namespace
}  // namespace twinps
