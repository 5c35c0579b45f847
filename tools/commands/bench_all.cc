// twinps bench all: the standard set of measurements in one run — push/pull
// at 4 KB, 1 MB and 16 MB with 1x1 and 2x2 processes over TCP and over the
// same-host Unix socket, training (the tutorial and the sparse embedding),
// the simulator at 1,000 x 100 — beside the machine's own limits measured in
// the same run (one loopback TCP stream, one Unix socket stream, memcpy), so
// that every ratio it prints compares figures of one sitting. Each push/pull
// figure is held against the streams `bench ps` measured just before and
// just after its windows (their mean): this VM's stream speed moved from 2.4
// to 3.7 GB/s between runs two minutes apart, so a stream measured once at
// the start would not describe a figure taken a minute later.
// Each measurement is the ordinary `twinps bench TARGET` run as a child of
// this binary; its printed table is read back. --report FILE writes the
// results as a Markdown table (the README quotes it).
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "tools/cli.h"
#include "tools/commands/commands.h"
#include "tools/data_dir.h"
#include "tools/subprocess.h"

namespace twinps::cli {
namespace {

struct Row {
  std::string figure;      // what was measured
  std::string value;       // the measurement, with its unit
  std::string comparison;  // what it is held against ("" if nothing)
  std::string ratio;       // value / comparison ("" if none)
};

// The first number in the value column of the line of `table` whose label is
// `label` (the tables `twinps bench` prints: two spaces, label, value).
std::optional<double> table_value(const std::string& table, const std::string& label) {
  std::istringstream in(table);
  for (std::string line; std::getline(in, line);) {
    const auto at = line.find(label);
    if (at == std::string::npos || line.find_first_not_of(' ') != at) continue;
    const std::string rest = line.substr(at + label.size());
    const auto digit = rest.find_first_of("0123456789");
    if (digit == std::string::npos) continue;
    try {
      return std::stod(rest.substr(digit));
    } catch (const std::exception&) {
      return std::nullopt;
    }
  }
  return std::nullopt;
}

// Runs `twinps ARGS...`; its stdout, or nullopt after printing why it failed.
std::optional<std::string> run_child(const std::vector<std::string>& args, const std::string& dir,
                                     const std::string& name) {
  std::vector<std::string> argv{self_binary()};
  argv.insert(argv.end(), args.begin(), args.end());
  std::string shown;
  for (const auto& a : args) shown += " " + a;
  std::fprintf(stderr, "twinps bench all: twinps%s ...\n", shown.c_str());
  Child c = Child::start(argv, {}, dir, name);
  if (!c.wait(std::chrono::hours(1)) || c.exit_code() != 0) {
    std::fprintf(stderr, "twinps bench all: twinps%s failed (exit %d): %s\n", shown.c_str(), c.exit_code(),
                 c.err().c_str());
    return std::nullopt;
  }
  return c.out();
}

// memcpy between two buffers of `bytes`, bytes per second (median of `repeats`).
double memcpy_bytes_per_s(std::size_t bytes, int repeats) {
  std::vector<char> from(bytes, 'x'), to(bytes, 0);
  std::vector<double> rates;
  for (int r = 0; r < repeats + 1; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    std::memcpy(to.data(), from.data(), bytes);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (r > 0) rates.push_back(static_cast<double>(bytes) / s);  // the first touches the pages
    from[static_cast<std::size_t>(r) % bytes] = to[bytes - 1];  // keeps the copies from being elided
  }
  std::sort(rates.begin(), rates.end());
  return rates[rates.size() / 2];
}

struct Plan {
  bool quick = false;
  int repeats = 3;
  double window = 1.5;
  std::string data_dir;
  std::string dir;  // children's output and generated data
};

std::string gbps(double bytes_per_s) { return format("%.2f GB/s", bytes_per_s / 1e9); }
std::string times(double r) { return format("%.2fx", r); }

// The machine's limits for one connection, measured in the same run.
struct Streams {
  double tcp = 0;   // one loopback TCP stream
  double unix = 0;  // one Unix socket stream (the data plane between tasks of one host)
};

Streams measure_streams(int repeats) {
  Streams s;
  s.tcp = loopback_stream_bytes_per_s(std::size_t{64} << 20, repeats);
  s.unix = unix_stream_bytes_per_s(std::size_t{64} << 20, repeats);
  return s;
}

// Push/pull at each size and cluster, over each plane the data plane has
// between processes of one host: the Unix socket with the tensors in shared
// memory (the default), the Unix socket alone (`--data-plane tcp-unix`) and
// TCP (`--data-plane tcp-only`, what tasks on different hosts use). Goodput
// is ps-lite's figure (one way); the bytes both ways are held against one
// stream of the same kind (a Unix socket stream for both same-host planes)
// and against one TCP stream.
bool measure_ps(const Plan& p, std::vector<Row>& rows) {
  struct Size {
    const char* name;
    const char* values;
  };
  struct Plane {
    const char* flag;
    const char* name;
    bool unix_socket;  // held against a Unix socket stream (and a TCP one), else a TCP stream
  };
  const std::vector<Size> sizes = p.quick ? std::vector<Size>{{"4 KB", "1024"}}
                                          : std::vector<Size>{{"4 KB", "1024"}, {"1 MB", "262144"}, {"16 MB", "4194304"}};
  const std::vector<int> clusters = p.quick ? std::vector<int>{1} : std::vector<int>{1, 2};
  const std::vector<Plane> planes = {
      {"tcp-only", "TCP", false}, {"tcp-unix", "Unix socket", true}, {"tcp", "shared memory", true}};
  const char* tcp_name = "one loopback TCP stream just before and after:";
  const char* unix_name = "one Unix socket stream just before and after:";
  // A second of warmup even when quick: the generators must have started and
  // connected before the first window (under ThreadSanitizer on a loaded
  // machine 0.2 s was not enough and the window saw no pair at all).
  for (const Plane& plane : planes)
    for (int n : clusters)
      for (const Size& s : sizes) {
        const std::string tag = format("ps-%s-%dx%d-%s", plane.flag, n, n, s.values);
        auto out = run_child({"bench", "ps", "--servers", std::to_string(n), "--workers", std::to_string(n),
                              "--values-per-key", s.values, "--repeats", std::to_string(p.repeats), "--window",
                              format("%g", p.window), "--warmup", "1", "--data-plane", plane.flag},
                             p.dir, tag);
        if (!out) return false;
        const auto pairs = table_value(*out, "push->pull pairs/s");
        const auto wire = table_value(*out, "GB/s (push+pull bytes)");
        const auto goodput = table_value(*out, "goodput GB/s");
        // The streams bench ps measured just before and after its windows.
        Streams stream;
        stream.tcp = table_value(*out, "one loopback TCP stream GB/s").value_or(0) * 1e9;
        stream.unix = table_value(*out, "one Unix socket stream GB/s").value_or(0) * 1e9;
        if (!pairs || !wire || !goodput || stream.tcp <= 0 || (plane.unix_socket && stream.unix <= 0)) {
          std::fprintf(stderr, "twinps bench all: unreadable bench ps output:\n%s\n", out->c_str());
          return false;
        }
        const std::string where = format("push->pull %s, %d ps x %d workers, %s", s.name, n, n, plane.name);
        rows.push_back({where + ": pairs/s", format("%.0f", *pairs), "", ""});
        rows.push_back({where + ": goodput (one way)", format("%.2f GB/s", *goodput), "", ""});
        if (plane.unix_socket)
          rows.push_back({where + ": bytes both ways", format("%.2f GB/s", *wire),
                          std::string(unix_name) + " " + gbps(stream.unix), times(*wire * 1e9 / stream.unix)});
        rows.push_back({where + ": bytes both ways", format("%.2f GB/s", *wire),
                        std::string(tcp_name) + " " + gbps(stream.tcp), times(*wire * 1e9 / stream.tcp)});
      }
  return true;
}

// The tutorial at 10 steps per closure, in one process and as processes.
bool measure_tutorial(const Plan& p, std::vector<Row>& rows) {
  std::vector<std::string> args{"bench", "train", "--steps-per-execution", "10", "--repeats",
                                std::to_string(p.quick ? 1 : p.repeats)};
  if (p.quick) args.insert(args.end(), {"--epochs", "2", "--steps-per-epoch", "50", "--where", "in-process"});
  auto out = run_child(args, p.dir, "train-tutorial");
  if (!out) return false;
  for (const char* where : {"in-process", "processes"}) {
    if (p.quick && std::string(where) == "processes") continue;
    const auto v = table_value(*out, std::string(where) + ", steps-per-execution 10");
    if (!v) {
      std::fprintf(stderr, "twinps bench all: unreadable bench train output:\n%s\n", out->c_str());
      return false;
    }
    rows.push_back({std::string("tutorial, 2 ps x 3 workers, batch 8, ") + where, format("%.0f examples/s", *v),
                    "PyTorch RPC, measured by others on this machine kind: 4,300 examples/s",
                    times(*v / 4300)});
  }
  return true;
}

// The 1M x 64 embedding on uniform ids (examples/sparse_embedding), on a
// click log generated here.
bool measure_sparse(const Plan& p, std::vector<Row>& rows) {
  const std::string spec = find_data("examples/sparse_embedding/model.textproto", p.data_dir);
  if (!std::filesystem::exists(spec)) {
    rows.push_back({"sparse embedding 1M x 64, batch 512", "NOT MEASURED: examples/sparse_embedding/model.textproto "
                    "not found (run from the repository root or give --data-dir)", "", ""});
    return true;
  }
  const std::string data = p.dir + "/ids";
  if (!run_child({"datagen", "ctr", "--out", data, "--zipf-exponent", "0", "--examples", "400000", "--train-files",
                  "4"},
                 p.dir, "datagen"))
    return false;
  auto out = run_child({"bench", "train", "--model", spec, "--train-data", data + "/train-*", "--steps-per-execution",
                        "10", "--repeats", std::to_string(p.repeats), "--where", "processes"},
                       p.dir, "train-sparse");
  if (!out) return false;
  const auto v = table_value(*out, "processes, steps-per-execution 10");
  if (!v) return false;
  rows.push_back({"sparse embedding 1M x 64, batch 512, 2 ps x 3 workers, processes", format("%.0f examples/s", *v),
                  "PyTorch RPC (TensorPipe), measured by others: 141,000 examples/s", times(*v / 141000)});
  return true;
}

// The simulator: 1,000 workers x 100 ps timing-only, default steps and 10 s steps.
bool measure_sim(const Plan& p, std::vector<Row>& rows) {
  struct Case {
    const char* name;
    std::vector<std::string> args;
  };
  const std::vector<Case> cases =
      p.quick ? std::vector<Case>{{"50 workers x 5 ps, 2 s simulated", {"--workers", "50", "--ps", "5", "--seconds", "2"}}}
              : std::vector<Case>{{"1,000 workers x 100 ps, default steps", {"--workers", "1000", "--ps", "100"}},
                                  {"1,000 workers x 100 ps, 10 s steps",
                                   {"--workers", "1000", "--ps", "100", "--step-time", "10", "--seconds", "600"}}};
  for (const Case& c : cases) {
    std::vector<std::string> args{"bench", "sim"};
    args.insert(args.end(), c.args.begin(), c.args.end());
    auto out = run_child(args, p.dir, "sim");
    if (!out) return false;
    const auto ratio = table_value(*out, "simulated / wall time");
    const auto events = table_value(*out, "events per second");
    if (!ratio || !events) {
      std::fprintf(stderr, "twinps bench all: unreadable bench sim output:\n%s\n", out->c_str());
      return false;
    }
    rows.push_back({std::string("simulator, ") + c.name + ": simulated / wall time", format("%.1fx", *ratio), "", ""});
    rows.push_back({std::string("simulator, ") + c.name + ": events per second", format("%.2f M", *events), "", ""});
  }
  return true;
}

std::string markdown(const std::vector<Row>& rows, const std::string& when) {
  std::string out = "| figure | value | held against | ratio |\n|---|---|---|---|\n";
  for (const Row& r : rows) out += "| " + r.figure + " | " + r.value + " | " + r.comparison + " | " + r.ratio + " |\n";
  return out + "\n" + when + "\n";
}

}  // namespace

int run_bench_all(int argc, char** argv) {
  Plan p;
  std::string report;
  po::options_description opts("twinps bench all options");
  opts.add_options()("help,h", "show this help")
      ("report", po::value(&report), "also write the results as a Markdown table to this file")
      ("repeats", value_or(&p.repeats, 3)->notifier(in_range(1, 100)), "measurement windows or runs per figure")
      ("window", value_or(&p.window, 1.5)->notifier(in_range(0.05, 600.0)), "seconds per push/pull window")
      ("data-dir", po::value(&p.data_dir), "where examples/ is (default: the current directory, then $TWINPS_DATA_DIR)")
      ("quick", "a shortened set (4 KB push/pull 1x1, a short tutorial run, a small simulation): for tests");
  po::variables_map vm;
  if (int rc = parse(argc, argv, "usage: twinps bench all [--report FILE] [--repeats N] [--quick]", opts, vm); rc >= 0)
    return rc;
  p.quick = vm.count("quick") > 0;
  if (!report.empty() && !can_write(report)) {
    std::fprintf(stderr, "twinps bench all: --report: cannot write %s\n", report.c_str());
    return kExitBadInput;
  }
  p.dir = make_temp_dir("bench-all");
  const std::string load_before = load_average();

  std::vector<Row> rows;
  const Streams stream = measure_streams(p.repeats);
  const double copy = memcpy_bytes_per_s(std::size_t{256} << 20, 5);
  rows.push_back({"machine: one loopback TCP stream, 64 MiB", gbps(stream.tcp), "", ""});
  rows.push_back({"machine: one Unix socket stream, 64 MiB", gbps(stream.unix), "", ""});
  rows.push_back({"machine: memcpy, 256 MiB", gbps(copy), "", ""});
  bool ok = measure_ps(p, rows) && measure_tutorial(p, rows) && (p.quick || measure_sparse(p, rows)) &&
            measure_sim(p, rows);
  std::error_code ec;
  std::filesystem::remove_all(p.dir, ec);
  if (!ok) return kExitFailed;

  const std::string when = format("Measured %s by `twinps bench all%s`, load average %s -> %s.", utc_now().c_str(),
                                  p.quick ? " --quick" : "", load_before.c_str(), load_average().c_str());
  Table t;
  for (const Row& r : rows)
    t.row(r.figure, r.value + (r.ratio.empty() ? "" : "  (" + r.ratio + " " + r.comparison + ")"));
  t.print();
  std::printf("%s\n", when.c_str());
  if (!report.empty()) {
    std::ofstream out(report, std::ios::trunc);
    out << markdown(rows, when);
    if (!out) {
      std::fprintf(stderr, "twinps bench all: cannot write %s\n", report.c_str());
      return kExitFailed;
    }
  }
  return kExitOk;
}

}  // namespace twinps::cli
