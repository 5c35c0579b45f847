#include "tools/serving_flags.h"

#include <cstdlib>

#include "net/data_plane.h"

namespace twinps::cli {

void ServingFlags::add_to(po::options_description& options) {
  options.add_options()
      ("bind", po::value(&bind),
       "listen on this local address (IP literal or name) instead of every interface, on the task's "
       "TF_CONFIG port (or --port)")
      ("port", po::value(&port)->default_value(-1),
       "listen on this gRPC port instead of the task's TF_CONFIG port; 0: the OS picks a free one, which the "
       "\"serving on HOST:PORT\" line reports (a launcher starts tasks this way, reads the port, and restarts a "
       "killed task on it)")
      ("data-port", po::value(&data_port)->default_value(0),
       "port of the data plane (Pull/Push), on the same interfaces (0: the OS picks one; callers learn it over gRPC)");
}

void SecurityFlags::add_to(po::options_description& options) {
  options.add_options()
      ("token-file", po::value(&token_file),
       "file holding the cluster token every task shares (default: $TWINPS_TOKEN_FILE, or the token in "
       "$TWINPS_TOKEN); peers without it are refused with UNAUTHENTICATED")
      ("tls-cert", po::value(&tls_cert), "this task's TLS certificate chain, PEM (default: $TWINPS_TLS_CERT); "
       "with --tls-key and --tls-ca, every port speaks TLS")
      ("tls-key", po::value(&tls_key), "its private key, PEM (default: $TWINPS_TLS_KEY)")
      ("tls-ca", po::value(&tls_ca), "the CA certificate that signs the cluster's certificates, PEM "
       "(default: $TWINPS_TLS_CA)")
      ("tls-mutual", po::bool_switch(&tls_mutual), "mutual TLS: servers require a client certificate from the CA "
       "(default: $TWINPS_TLS_MUTUAL=1)")
      ("data-plane-tls", po::value(&data_plane_tls)->default_value("on"),
       "on: Pull/Push over TLS too; off: the data plane in clear, each connection still authenticated by the "
       "token handshake (faster; gRPC keeps TLS)");
}

namespace {
std::string from_flag_or_env(const std::string& flag, const char* env) {
  if (!flag.empty()) return flag;
  const char* v = std::getenv(env);
  return v ? v : "";
}
}  // namespace

StatusOr<net::SecurityOptions> SecurityFlags::security() const {
  net::SecurityOptions out;
  const std::string file = from_flag_or_env(token_file, "TWINPS_TOKEN_FILE");
  if (!file.empty()) {
    auto text = net::read_secret_file(file, "--token-file");
    if (!text.ok()) return text.status();
    out.token = *text;
  } else if (const char* t = std::getenv("TWINPS_TOKEN")) {
    out.token = t;
  }
  // A Secret mounted as a file usually ends with a newline: not part of the token.
  while (!out.token.empty() && (out.token.back() == '\n' || out.token.back() == '\r' || out.token.back() == ' '))
    out.token.pop_back();
  const std::string where = file.empty() ? "$TWINPS_TOKEN" : "--token-file '" + file + "'";
  if ((!file.empty() || std::getenv("TWINPS_TOKEN")) && out.token.size() < 16)
    return absl::InvalidArgumentError(where + ": the cluster token must be at least 16 bytes (e.g. `openssl rand "
                                      "-hex 32`)");

  const std::string cert = from_flag_or_env(tls_cert, "TWINPS_TLS_CERT");
  const std::string key = from_flag_or_env(tls_key, "TWINPS_TLS_KEY");
  const std::string ca = from_flag_or_env(tls_ca, "TWINPS_TLS_CA");
  const bool any = !cert.empty() || !key.empty() || !ca.empty();
  if (any && (cert.empty() || key.empty() || ca.empty()))
    return absl::InvalidArgumentError("TLS needs all of --tls-cert, --tls-key and --tls-ca (missing: " +
                                      std::string(cert.empty() ? "--tls-cert " : "") +
                                      (key.empty() ? "--tls-key " : "") + (ca.empty() ? "--tls-ca" : "") + ")");
  const char* mutual_env = std::getenv("TWINPS_TLS_MUTUAL");
  out.mutual_tls = tls_mutual || (mutual_env && std::string(mutual_env) == "1");
  if (out.mutual_tls && !any) return absl::InvalidArgumentError("--tls-mutual needs --tls-cert, --tls-key and --tls-ca");
  if (data_plane_tls != "on" && data_plane_tls != "off")
    return absl::InvalidArgumentError("--data-plane-tls must be on or off, not '" + data_plane_tls + "'");
  out.data_plane_tls = data_plane_tls == "on";
  if (!any) return out;
  out.tls = true;
  for (auto [path, flag, dst] : {std::tuple{cert, "--tls-cert", &out.cert_pem}, std::tuple{key, "--tls-key", &out.key_pem},
                                 std::tuple{ca, "--tls-ca", &out.ca_pem}}) {
    auto text = net::read_secret_file(path, flag);
    if (!text.ok()) return text.status();
    *dst = *text;
  }
  TWINPS_RETURN_IF_ERROR(net::check_tls_material(out));
  return out;
}

StatusOr<std::string> ServingFlags::listen_address(const std::string& configured) const {
  std::string host;
  int port = 0;
  if (!net::split_host_port(configured, &host, &port))
    return absl::InvalidArgumentError("cannot tell the port of the task's address '" + configured + "'");
  if (this->port < -1 || this->port > 65535)
    return absl::InvalidArgumentError("--port must be from 0 to 65535, not " + std::to_string(this->port));
  if (this->port >= 0) port = this->port;
  if (data_port < 0 || data_port > 65535)
    return absl::InvalidArgumentError("--data-port must be from 0 to 65535, not " + std::to_string(data_port));
  if (data_port != 0 && data_port == port)
    return absl::InvalidArgumentError("--data-port " + std::to_string(data_port) +
                                      " is the task's gRPC port (TF_CONFIG); pick another");
  std::string where = bind.empty() ? "0.0.0.0" : bind;
  if (where.front() == '[' && where.back() == ']') where = where.substr(1, where.size() - 2);
  for (char c : where)
    if (c == '/' || static_cast<unsigned char>(c) <= ' ')
      return absl::InvalidArgumentError("--bind '" + bind + "' is not an address (give an IP literal or a host name)");
  const bool v6 = where.find(':') != std::string::npos;
  return (v6 ? "[" + where + "]" : where) + ":" + std::to_string(port);
}

}  // namespace twinps::cli

namespace twinps::cli {

std::vector<std::string> SecurityFlags::to_args() const {
  std::vector<std::string> out;
  for (auto [flag, value] : {std::pair<const char*, const std::string*>{"--token-file", &token_file},
                             {"--tls-cert", &tls_cert}, {"--tls-key", &tls_key}, {"--tls-ca", &tls_ca}})
    if (!value->empty()) out.insert(out.end(), {flag, *value});
  if (tls_mutual) out.push_back("--tls-mutual");
  out.insert(out.end(), {"--data-plane-tls", data_plane_tls});
  return out;
}

}  // namespace twinps::cli
