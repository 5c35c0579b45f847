#include "net/log.h"

#include <cstdlib>
#include <mutex>

#include <grpc/support/log.h>
#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/stdout_sinks.h>

namespace twinps::log {
namespace {

// %j: the message escaped for a JSON string.
class JsonEscapedMessage final : public spdlog::custom_flag_formatter {
 public:
  void format(const spdlog::details::log_msg& msg, const std::tm&, spdlog::memory_buf_t& dest) override {
    static constexpr char kHex[] = "0123456789abcdef";
    for (char c : msg.payload) {
      const auto u = static_cast<unsigned char>(c);
      if (c == '"' || c == '\\') {
        dest.push_back('\\');
        dest.push_back(c);
      } else if (u < 0x20) {
        const char esc[] = {'\\', 'u', '0', '0', kHex[u >> 4], kHex[u & 15]};
        dest.append(esc, esc + sizeof esc);
      } else {
        dest.push_back(c);
      }
    }
  }
  std::unique_ptr<custom_flag_formatter> clone() const override { return std::make_unique<JsonEscapedMessage>(); }
};

bool json_format() {
  const char* f = std::getenv("TWINPS_LOG_FORMAT");
  return f && std::string(f) == "json";
}

std::unique_ptr<spdlog::formatter> make_formatter() {
  auto f = std::make_unique<spdlog::pattern_formatter>();
  if (json_format()) {
    f->add_flag<JsonEscapedMessage>('j').set_pattern(
        R"({"time":"%Y-%m-%dT%H:%M:%S.%f%z","level":"%l","logger":"%n","pid":%P,"msg":"%j"})");
  } else {
    f->set_pattern("%Y-%m-%dT%H:%M:%S.%e %l %n: %v");
  }
  return f;
}

std::shared_ptr<spdlog::logger> make_logger(const std::string& name) {
  auto sink = std::make_shared<spdlog::sinks::stderr_sink_mt>();
  auto logger = std::make_shared<spdlog::logger>(name, sink);
  logger->set_formatter(make_formatter());
  logger->flush_on(spdlog::level::trace);  // tests and operators read stderr as it is written
  return logger;
}

std::shared_ptr<spdlog::logger>& grpc_logger() {
  static std::shared_ptr<spdlog::logger> logger = make_logger("grpc");
  return logger;
}

void from_grpc(gpr_log_func_args* args) {
  // One line: gRPC's statuses print their children over several lines.
  std::string text = args->message ? args->message : "";
  for (char& c : text)
    if (c == '\n' || c == '\r') c = ' ';
  const char* severity = args->severity == GPR_LOG_SEVERITY_ERROR ? "E"
                         : args->severity == GPR_LOG_SEVERITY_INFO ? "I"
                                                                   : "D";
  grpc_logger()->debug("{} {}:{}] {}", severity, args->file ? args->file : "?", args->line, text);
}

void apply_grpc_verbosity(spdlog::level::level_enum level) {
  // gRPC filters by its own verbosity before calling us: let everything
  // through when debug output is wanted, only errors otherwise.
  gpr_set_log_verbosity(level <= spdlog::level::debug ? GPR_LOG_SEVERITY_DEBUG : GPR_LOG_SEVERITY_ERROR);
}

}  // namespace

void init(const std::string& name) {
  static std::once_flag routed;
  std::call_once(routed, [] { gpr_set_log_function(&from_grpc); });
  auto logger = make_logger(name);
  spdlog::set_default_logger(logger);
  const char* level = std::getenv("TWINPS_LOG_LEVEL");
  if (!level || !set_level(level)) set_level("info");
}

bool set_level(const std::string& level) {
  const auto parsed = spdlog::level::from_str(level);
  // from_str answers "off" for anything it does not know.
  if (parsed == spdlog::level::off && level != "off") return false;
  spdlog::default_logger()->set_level(parsed);
  grpc_logger()->set_level(parsed);
  apply_grpc_verbosity(parsed);
  return true;
}

}  // namespace twinps::log
