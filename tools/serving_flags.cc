#include "tools/serving_flags.h"

#include "net/data_plane.h"

namespace twinps::cli {

void ServingFlags::add_to(po::options_description& options) {
  options.add_options()
      ("bind", po::value(&bind),
       "listen on this local address (IP literal or name) instead of every interface; the port is always the "
       "task's TF_CONFIG port")
      ("data-port", po::value(&data_port)->default_value(0),
       "port of the data plane (Pull/Push), on the same interfaces (0: the OS picks one; callers learn it over gRPC)");
}

StatusOr<std::string> ServingFlags::listen_address(const std::string& configured) const {
  std::string host;
  int port = 0;
  if (!net::split_host_port(configured, &host, &port))
    return absl::InvalidArgumentError("cannot tell the port of the task's address '" + configured + "'");
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
