#include "net/metrics.h"

#include <istream>
#include <limits>
#include <mutex>
#include <thread>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ip/v6_only.hpp>
#include <boost/asio/read_until.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/streambuf.hpp>
#include <boost/asio/write.hpp>
#include <prometheus/text_serializer.h>

#include "net/data_plane.h"

namespace twinps::net {

// ------------------------------------------------------------------ snapshot

prometheus::MetricFamily& MetricsSnapshot::family(const std::string& name, const std::string& help,
                                                  prometheus::MetricType type) {
  for (auto& f : families_)
    if (f.name == name) return f;
  families_.push_back(prometheus::MetricFamily{name, help, type, {}});
  return families_.back();
}

namespace {
std::vector<prometheus::ClientMetric::Label> to_labels(const MetricsSnapshot::Labels& labels) {
  std::vector<prometheus::ClientMetric::Label> out;
  for (const auto& [k, v] : labels) out.push_back({k, v});
  return out;
}
}  // namespace

void MetricsSnapshot::counter(const std::string& name, const std::string& help, double value, const Labels& labels) {
  prometheus::ClientMetric m;
  m.label = to_labels(labels);
  m.counter.value = value;
  family(name, help, prometheus::MetricType::Counter).metric.push_back(std::move(m));
}

void MetricsSnapshot::gauge(const std::string& name, const std::string& help, double value, const Labels& labels) {
  prometheus::ClientMetric m;
  m.label = to_labels(labels);
  m.gauge.value = value;
  family(name, help, prometheus::MetricType::Gauge).metric.push_back(std::move(m));
}

void MetricsSnapshot::histogram(const std::string& name, const std::string& help, const std::vector<double>& bounds,
                                const std::vector<std::uint64_t>& counts, double sum, const Labels& labels) {
  prometheus::ClientMetric m;
  m.label = to_labels(labels);
  std::uint64_t cumulative = 0;
  for (std::size_t i = 0; i < counts.size(); ++i) {
    cumulative += counts[i];
    prometheus::ClientMetric::Bucket b;
    b.cumulative_count = cumulative;
    b.upper_bound = i < bounds.size() ? bounds[i] : std::numeric_limits<double>::infinity();
    m.histogram.bucket.push_back(b);
  }
  m.histogram.sample_count = cumulative;
  m.histogram.sample_sum = sum;
  family(name, help, prometheus::MetricType::Histogram).metric.push_back(std::move(m));
}

// ------------------------------------------------------------------ server

namespace {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;

constexpr std::size_t kMaxRequestBytes = 8 << 10;
constexpr auto kClientTimeout = std::chrono::seconds(10);

std::string http_response(const std::string& status, const std::string& type, const std::string& body) {
  return "HTTP/1.1 " + status + "\r\nContent-Type: " + type + "\r\nContent-Length: " + std::to_string(body.size()) +
         "\r\nConnection: close\r\n\r\n" + body;
}

}  // namespace

struct MetricsServer::Impl {
  asio::io_context io{1};
  tcp::acceptor acceptor{io};
  std::unique_ptr<asio::ssl::context> tls;
  std::thread thread;
  int port = 0;

  std::mutex mu;
  std::vector<prometheus::MetricFamily> families;
  std::mutex refresh_mu;
  std::function<void()> refresh;

  std::string body() {
    {
      std::lock_guard lock(refresh_mu);
      if (refresh) refresh();
    }
    std::lock_guard lock(mu);
    return prometheus::TextSerializer().Serialize(families);
  }

  // One request: (TLS handshake,) read the head, answer, close.
  template <typename Stream>
  struct Session : std::enable_shared_from_this<Session<Stream>> {
    Impl* impl;
    tcp::socket socket;
    Stream stream;
    asio::steady_timer timer;
    asio::streambuf request{kMaxRequestBytes};
    std::string response;

    template <typename... StreamArgs>
    Session(Impl* i, tcp::socket s, StreamArgs&&... args)
        : impl(i), socket(std::move(s)), stream(socket, std::forward<StreamArgs>(args)...), timer(i->io) {}

    void start() {
      timer.expires_after(kClientTimeout);
      timer.async_wait([self = this->shared_from_this()](const boost::system::error_code& ec) {
        if (!ec) {
          boost::system::error_code ig;
          self->socket.close(ig);
        }
      });
      if constexpr (std::is_same_v<Stream, asio::ssl::stream<tcp::socket&>>) {
        stream.async_handshake(asio::ssl::stream_base::server,
                               [self = this->shared_from_this()](const boost::system::error_code& ec) {
                                 if (!ec) return self->read();
                                 self->close();
                               });
      } else {
        read();
      }
    }
    void read() {
      asio::async_read_until(stream, request, "\r\n\r\n",
                             [self = this->shared_from_this()](const boost::system::error_code& ec, std::size_t) {
                               if (!ec) return self->answer();
                               self->close();
                             });
    }
    void close() {
      boost::system::error_code ig;
      socket.shutdown(tcp::socket::shutdown_both, ig);
      socket.close(ig);
      timer.cancel();
    }
    void answer() {
      std::istream in(&request);
      std::string method, target;
      in >> method >> target;
      const bool metrics = method == "GET" && (target == "/metrics" || target.rfind("/metrics?", 0) == 0);
      response = metrics ? http_response("200 OK", "text/plain; version=0.0.4; charset=utf-8", impl->body())
                         : http_response("404 Not Found", "text/plain", "twinps serves /metrics only\n");
      asio::async_write(stream, asio::buffer(response),
                        [self = this->shared_from_this()](const boost::system::error_code&, std::size_t) {
                          self->close();
                        });
    }
  };

  // A plain stream over a socket reference, so both sessions share one shape.
  struct PlainStream {
    tcp::socket& socket;
    explicit PlainStream(tcp::socket& s) : socket(s) {}
    using executor_type = tcp::socket::executor_type;
    executor_type get_executor() { return socket.get_executor(); }
    template <typename Buffers, typename Handler>
    auto async_read_some(const Buffers& b, Handler&& h) {
      return socket.async_read_some(b, std::forward<Handler>(h));
    }
    template <typename Buffers, typename Handler>
    auto async_write_some(const Buffers& b, Handler&& h) {
      return socket.async_write_some(b, std::forward<Handler>(h));
    }
  };

  void accept() {
    acceptor.async_accept([this](const boost::system::error_code& ec, tcp::socket socket) {
      if (ec == asio::error::operation_aborted) return;
      if (!ec) {
        if (tls)
          std::make_shared<Session<asio::ssl::stream<tcp::socket&>>>(this, std::move(socket), *tls)->start();
        else
          std::make_shared<Session<PlainStream>>(this, std::move(socket))->start();
      }
      accept();
    });
  }
};

StatusOr<std::unique_ptr<MetricsServer>> MetricsServer::start(const std::string& host, int port,
                                                              const SecurityOptions& security) {
  auto impl = std::make_unique<Impl>();
  if (security.tls) {
    try {
      impl->tls = std::make_unique<asio::ssl::context>(asio::ssl::context::tls_server);
      impl->tls->set_options(asio::ssl::context::default_workarounds | asio::ssl::context::no_sslv2 |
                             asio::ssl::context::no_sslv3 | asio::ssl::context::no_tlsv1 |
                             asio::ssl::context::no_tlsv1_1);
      impl->tls->use_certificate_chain(asio::buffer(security.cert_pem));
      impl->tls->use_private_key(asio::buffer(security.key_pem), asio::ssl::context::pem);
      impl->tls->add_certificate_authority(asio::buffer(security.ca_pem));
      // With mutual TLS, Prometheus presents a client certificate from the cluster's CA.
      impl->tls->set_verify_mode(security.mutual_tls ? asio::ssl::verify_peer | asio::ssl::verify_fail_if_no_peer_cert
                                                     : asio::ssl::verify_none);
    } catch (const boost::system::system_error& e) {
      return absl::InvalidArgumentError(std::string("the metrics endpoint's TLS material is not usable: ") + e.what());
    }
  }
  const std::string where = (host.empty() ? std::string("every interface") : host) + " port " + std::to_string(port);
  std::vector<tcp::endpoint> candidates;
  boost::system::error_code ec;
  if (is_wildcard_host(host)) {
    if (host != "0.0.0.0") candidates.emplace_back(tcp::v6(), static_cast<unsigned short>(port));
    if (host != "::") candidates.emplace_back(tcp::v4(), static_cast<unsigned short>(port));
  } else {
    tcp::resolver resolver(impl->io);
    auto results = resolver.resolve(host, std::to_string(port), tcp::resolver::passive, ec);
    if (ec || results.empty())
      return absl::UnavailableError("cannot resolve '" + host + "' to serve /metrics: " + ec.message());
    candidates.push_back(results.begin()->endpoint());
  }
  for (const auto& endpoint : candidates) {
    ec.clear();
    impl->acceptor = tcp::acceptor(impl->io);
    impl->acceptor.open(endpoint.protocol(), ec);
    if (!ec && endpoint.protocol() == tcp::v6()) impl->acceptor.set_option(asio::ip::v6_only(false), ec);
    if (!ec) impl->acceptor.set_option(asio::socket_base::reuse_address(true), ec);
    if (!ec) impl->acceptor.bind(endpoint, ec);
    if (!ec) impl->acceptor.listen(asio::socket_base::max_listen_connections, ec);
    if (!ec) break;
  }
  if (ec) return absl::UnavailableError("cannot serve /metrics on " + where + ": " + ec.message());
  impl->port = impl->acceptor.local_endpoint().port();
  impl->accept();
  Impl* raw = impl.get();
  impl->thread = std::thread([raw] { raw->io.run(); });
  return std::unique_ptr<MetricsServer>(new MetricsServer(std::move(impl)));
}

MetricsServer::MetricsServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

MetricsServer::~MetricsServer() {
  asio::post(impl_->io, [impl = impl_.get()] {
    boost::system::error_code ig;
    impl->acceptor.close(ig);
    impl->io.stop();
  });
  impl_->thread.join();
}

int MetricsServer::port() const { return impl_->port; }
bool MetricsServer::https() const { return impl_->tls != nullptr; }

void MetricsServer::set_refresh(std::function<void()> refresh) {
  std::lock_guard lock(impl_->refresh_mu);
  impl_->refresh = std::move(refresh);
}

void MetricsServer::publish(std::vector<prometheus::MetricFamily> families) {
  std::lock_guard lock(impl_->mu);
  impl_->families = std::move(families);
}

}  // namespace twinps::net
