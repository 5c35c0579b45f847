#pragma once
// The readiness line `twinps serve` logs once it serves (tools/commands/serve.cc):
//
//   TASK serving on HOST:PORT (listening on ADDRESS, data plane port N, incarnation X)
//
// HOST is the task's TF_CONFIG host, PORT the gRPC port it listens on. A
// launcher that starts a task with `--port 0` (the OS picks the port, so none
// is guessed) learns it here: tools/process_cluster.h and the integration
// tests' clusters (tests/tools/local_cluster.h) read it with these.
#include <regex>
#include <string>

namespace twinps::cli {

// The gRPC port on the readiness line in `log`; 0 if there is none.
inline int serving_port(const std::string& log) {
  static const std::regex kServing(R"(serving on [^ ]*:([0-9]+))");
  std::smatch m;
  return std::regex_search(log, m, kServing) ? std::stoi(m[1]) : 0;
}

// The data-plane port on the readiness line in `log` (callers learn it over
// gRPC; tests that speak the data plane by hand need it); 0 if there is none.
inline int data_plane_port(const std::string& log) {
  static const std::regex kDataPlane(R"(data plane port ([0-9]+))");
  std::smatch m;
  return std::regex_search(log, m, kDataPlane) ? std::stoi(m[1]) : 0;
}

}  // namespace twinps::cli
