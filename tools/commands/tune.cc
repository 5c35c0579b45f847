// twinps tune: sweep ps count x partitioner kind x shard count for a synthetic
// model by timing-only simulation (sim/tuner.h), print the ranked
// configurations and recommend one, with the reason read from the numbers.
// `--validate` hands over to tools/tune/validate.h.
// Exit 0 when the sweep ran, 2 for bad input (flags, the model or profile
// file, the CSV path), 1 when a prediction failed for another reason.
//
// The wall clock is read here, never in sim/: the sweep's duration is the
// tool's measurement.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "sim/scenario_loader.h"
#include "sim/spec_workload.h"
#include "sim/tuner.h"
#include "tools/cli.h"
#include "tools/data_dir.h"
#include "tools/training_flags.h"
#include "tools/commands/commands.h"
#include "tools/tune/validate.h"

namespace twinps::cli {

namespace {

constexpr char kUsage[] =
    "usage: twinps tune --model FILE --workers N [--ps 1,2,4,8] [--shards 1,2,4,8,16]\n"
    "                   [--partitioners fixed,min_size,max_size] [--placements round_robin,auto]\n"
    "                   [--profile FILE] [--bandwidth-gbps G] [--hosts H] [--cores C]\n"
    "                   [--seed S] [--tolerance F] [--csv FILE] [--top K]\n"
    "                   [--train-data GLOB... [--train-labels GLOB...]]\n"
    "       twinps tune --validate [options]   (twinps tune --validate --help)\n"
    "\n"
    "Predicts, by timing-only simulation of the whole cluster (the same coordinator, workers,\n"
    "parameter servers and step functions as `twinps sim`), the training steps per second of\n"
    "every combination of ps count, partitioner kind and shard count, ranks them, and\n"
    "recommends one: of the configurations within --tolerance of the fastest, the fastest\n"
    "with the fewest ps, with what limits it (a hotspot ps, idle ps, a saturated ps).\n"
    "\n"
    "--model is a model spec (as `twinps train --model` takes) or a synthetic model. A spec is\n"
    "timed from its own variables, shard layout (a layer's own partitioner is kept), FLOPs per\n"
    "step and, for each embedding, batch x ids-per-record lookups per step drawn from its\n"
    "declared access distribution (access { zipf_exponent }).\n"
    "With --train-data (and --train-labels for IDX), as `twinps train` takes them, a spec's\n"
    "step also pays for reading its batch as that data is read (read/<format>: records,\n"
    "fields and bytes, priced by the profile); without it, reading is not priced.\n"
    "\n"
    "Shard counts are of the model's largest variable (in bytes). So that the three\n"
    "partitioner kinds are compared at the same shard counts, the size-based ones get the\n"
    "byte size that yields each count for that variable: min_size is\n"
    "MinSizePartitioner(min_shard_bytes = its bytes / shards, max_shards = shards) and\n"
    "max_size is MaxSizePartitioner(max_shard_bytes = the bytes of ceil(rows / shards)\n"
    "rows, max_shards = shards). Smaller variables then get fewer shards (as TensorFlow\n"
    "would give them), where fixed splits every variable into `shards`. A partitioner in the\n"
    "model file is replaced by each candidate's. Candidates with the same layout are\n"
    "simulated once.\n"
    "\n"
    "Costs come from --profile (a CostProfile text file, as `twinps calibrate` writes it);\n"
    "without it, the defaults documented in sim/scenario.proto (10 Gb/s and 10 us host\n"
    "links, 10 ms steps, 20 us + 0.2 us/KiB per ps request). Each configuration warms up\n"
    "with 2 closures per worker and measures up to 20 per worker, fewer for large\n"
    "clusters (at least 4 per worker), to bound the sweep's time. With a profile whose hosts\n"
    "draw each CPU job's time (hosts.duration_spread, as `twinps calibrate` writes), each is\n"
    "simulated with --seed and the next two seeds and the three runs pooled.\n"
    "\n"
    "Where the tasks run: --hosts dedicated (a host each, the default unless the profile says\n"
    "otherwise), one (every task on one host: this machine, as `tune --validate` predicts it),\n"
    "bin-pack:N (hosts filled N tasks at a time, as Kubernetes bin-packs pods onto nodes) or\n"
    "spread:N (as many hosts as N tasks a host needs, tasks dealt round robin, as its default\n"
    "scoring spreads them). --cores C gives each host C cores (a profile from `twinps calibrate`\n"
    "has this machine's); tasks on one host share its cores.\n"
    "\n"
    "A relative --model or --profile path that does not exist from the current directory is\n"
    "looked up in $TWINPS_DATA_DIR and in share/twinps beside the binary, where the repository's\n"
    "scenarios/models/ and scenarios/profiles/ are installed.";

// "1,2,4" -> {1, 2, 4}; every item a positive integer.
bool parse_list(const std::string& flag, const std::string& text, std::vector<int>& out) {
  out.clear();
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    std::size_t used = 0;
    long v = 0;
    try {
      v = std::stol(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (item.empty() || used != item.size() || v < 1 || v > 100000) {
      std::fprintf(stderr, "twinps tune: --%s: \"%s\" is not a whole number from 1 to 100000 (in \"%s\")\n",
                   flag.c_str(), item.c_str(), text.c_str());
      return false;
    }
    out.push_back(static_cast<int>(v));
  }
  if (out.empty() || text.back() == ',') {
    std::fprintf(stderr, "twinps tune: --%s: give a comma-separated list, e.g. 1,2,4 (got \"%s\")\n", flag.c_str(),
                 text.c_str());
    return false;
  }
  return true;
}

bool parse_placements(const std::string& text, std::vector<scenario::VariablePlacement>& out) {
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    auto p = sim::parse_placement(item);
    if (!p.ok()) {
      std::fprintf(stderr, "twinps tune: --placements: %s\n", std::string(p.status().message()).c_str());
      return false;
    }
    out.push_back(*p);
  }
  if (out.empty()) {
    std::fprintf(stderr, "twinps tune: --placements: name at least one of round_robin, auto\n");
    return false;
  }
  return true;
}

bool parse_kinds(const std::string& text, std::vector<sim::PartitionerKind>& out) {
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    auto k = sim::parse_partitioner_kind(item);
    if (!k.ok()) {
      std::fprintf(stderr, "twinps tune: --partitioners: %s\n", std::string(k.status().message()).c_str());
      return false;
    }
    out.push_back(*k);
  }
  if (out.empty()) {
    std::fprintf(stderr, "twinps tune: --partitioners: name at least one of fixed, min_size, max_size\n");
    return false;
  }
  return true;
}

// "dedicated", "one", "bin-pack:N" or "spread:N" into `hosts`.
bool parse_hosts(const std::string& text, scenario::Hosts& hosts) {
  const auto colon = text.find(':');
  const std::string kind = text.substr(0, colon);
  if (colon == std::string::npos && (kind == "dedicated" || kind == "one")) {
    hosts.set_placement(kind == "one" ? scenario::Hosts::ONE_HOST : scenario::Hosts::ONE_PER_HOST);
    return true;
  }
  if (colon != std::string::npos && (kind == "bin-pack" || kind == "spread")) {
    std::vector<int> per_host;
    if (!parse_list("hosts", text.substr(colon + 1), per_host) || per_host.size() != 1) return false;
    hosts.set_placement(kind == "bin-pack" ? scenario::Hosts::BIN_PACK : scenario::Hosts::SPREAD);
    hosts.set_tasks_per_host(per_host[0]);
    return true;
  }
  std::fprintf(stderr, "twinps tune: --hosts: \"%s\" is not dedicated, one, bin-pack:N or spread:N\n", text.c_str());
  return false;
}

// "every task on one host of 2 cores", for the costs line.
std::string hosts_string(const scenario::Hosts& h) {
  const std::string cores =
      h.cores() > 0 ? format("%g core%s", h.cores(), h.cores() == 1 ? "" : "s") : std::string("a core for every thread");
  switch (h.placement()) {
    case scenario::Hosts::ONE_HOST: return "every task on one host of " + cores;
    case scenario::Hosts::BIN_PACK: return format("hosts bin-packed %d tasks each, ", h.tasks_per_host()) + cores;
    case scenario::Hosts::SPREAD: return format("tasks spread %d to a host, ", h.tasks_per_host()) + cores;
    default: return "a host for every task, " + cores;
  }
}

std::string bytes_string(double b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB"};
  int u = 0;
  while (b >= 1024 && u < 3) {
    b /= 1024;
    ++u;
  }
  return format(u == 0 ? "%.0f %s" : "%.1f %s", b, units[u]);
}

std::string seconds_string(double s) {
  if (s >= 1) return format("%.2f s", s);
  if (s >= 1e-3) return format("%.2f ms", s * 1e3);
  return format("%.0f us", s * 1e6);
}

void print_table(const sim::SweepResult& r, int top) {
  std::printf("%4s  %3s  %-11s  %6s  %-11s  %12s  %10s  %10s  %8s  %s\n", "rank", "ps", "partitioner", "shards",
              "placement", "steps/s", "step p50", "step p99", "max util", "bytes/step of the busiest ps");
  std::size_t hidden = 0;
  for (std::size_t i = 0; i < r.rows.size(); ++i) {
    const auto& row = r.rows[i];
    if (top > 0 && static_cast<int>(i) >= top && !row.recommended) {
      ++hidden;
      continue;
    }
    std::printf("%4d  %3d  %-11s  %6d  %-11s  %12.1f  %10s  %10s  %7.0f%%  %8s (ps %d, %2.0f%%)%s\n", row.rank,
                row.ps, sim::partitioner_name(row.partitioner), row.shards, sim::placement_name(row.placement),
                row.prediction.steps_per_second,
                seconds_string(row.prediction.step_p50_s).c_str(), seconds_string(row.prediction.step_p99_s).c_str(),
                row.max_ps_utilisation * 100, bytes_string(row.bytes_per_step_max_ps).c_str(), row.busiest_ps,
                row.max_ps_bytes_share * 100, row.recommended ? "  <- recommended" : "");
  }
  if (hidden > 0) std::printf("  (%zu more: --top 0 shows all, --csv writes all)\n", hidden);
}

// Automatic placement against round-robin, for the same (ps, partitioner,
// shards): the busiest ps's utilisation and the steps/s of each, for the
// recommended configuration's ps count.
void print_placement_comparison(const sim::SweepResult& r) {
  const auto& chosen = r.rows[static_cast<std::size_t>(r.recommended)];
  const sim::SweepRow* rr = nullptr;
  const sim::SweepRow* aut = nullptr;
  for (const auto& row : r.rows) {
    if (row.ps != chosen.ps || row.partitioner != chosen.partitioner || row.shards != chosen.shards) continue;
    (row.placement == scenario::AUTO ? aut : rr) = &row;
  }
  if (!rr || !aut) return;
  std::printf("  auto placement against round-robin here: busiest ps %.0f%% against %.0f%% busy, %.1f against %.1f "
              "steps/s (%+.1f%%)\n",
              aut->max_ps_utilisation * 100, rr->max_ps_utilisation * 100, aut->prediction.steps_per_second,
              rr->prediction.steps_per_second,
              100 * (aut->prediction.steps_per_second / rr->prediction.steps_per_second - 1));
}

bool write_csv(std::ofstream& csv, const sim::SweepResult& r) {
  csv << "rank,ps,partitioner,shards,steps_per_s,step_p50_s,step_p99_s,max_ps_utilisation,max_ps_bytes_share,"
         "bytes_per_step_max_ps,recommended,placement\n";
  for (const auto& row : r.rows) {
    csv << format("%d,%d,%s,%d,%.6g,%.6g,%.6g,%.6g,%.6g,%.6g,%d,%s\n", row.rank, row.ps,
                  sim::partitioner_name(row.partitioner), row.shards, row.prediction.steps_per_second,
                  row.prediction.step_p50_s, row.prediction.step_p99_s, row.max_ps_utilisation, row.max_ps_bytes_share,
                  row.bytes_per_step_max_ps, row.recommended ? 1 : 0, sim::placement_name(row.placement));
  }
  csv.flush();
  return static_cast<bool>(csv);
}

// With --train-data a spec's timed model also reads its batches as that
// data is read (DataSource::read_kernel), which is checked against the spec
// as `twinps train` checks it. `note` says what reading costs in the sweep.
int price_reading(const std::string& model_path, bool from_spec, std::vector<std::string> train_data,
                  std::vector<std::string> train_labels, scenario::SyntheticModel& timed, std::string& note) {
  if (train_data.empty()) {
    if (!train_labels.empty()) {
      std::fprintf(stderr, "twinps tune: --train-labels needs --train-data (the IDX images they label)\n");
      return kExitBadInput;
    }
    if (from_spec) note = "data: not given (--train-data): reading its batches is not priced\n";
    return kExitOk;
  }
  if (!from_spec) {
    std::fprintf(stderr, "twinps tune: --train-data and --train-labels are a model spec's data; %s is a synthetic "
                 "model\n", model_path.c_str());
    return kExitBadInput;
  }
  auto run = load_spec_and_data(model_path, std::move(train_data), std::move(train_labels));
  if (!run.ok()) {
    print_error("tune", run.status());
    return exit_code_for(run.status());
  }
  auto with_reading = sim::synthetic_model_of(*run->model, run->train->read_kernel);
  if (!with_reading.ok()) {
    print_error("tune", with_reading.status());
    return exit_code_for(with_reading.status());
  }
  timed = std::move(*with_reading);
  note = run->train->read_kernel.empty()
             ? "data: its reader has no price of its own: reading is not priced\n"
             : format("data: read as %s, priced per record, field and byte\n", run->train->read_kernel.c_str());
  return kExitOk;
}

}  // namespace

int run_tune(int argc, char** argv) {
  // `twinps tune --validate` compares predictions with real runs (tools/tune/validate.h).
  for (int i = 1; i < argc; ++i)
    if (std::string(argv[i]) == "--validate") return run_tune_validate(argc, argv);
  std::string model_path, profile_path, ps_list = "1,2,4,8", shard_list = "1,2,4,8,16",
                                        kinds = "fixed,min_size,max_size", placements = "round_robin,auto", csv_path,
                                        hosts;
  std::vector<std::string> train_data, train_labels;
  sim::SweepRequest req;
  double bandwidth_gbps = 0, cores = 0;
  int top = 10;
  po::options_description opts("twinps tune options");
  opts.add_options()("help,h", "show this help")
      ("model", po::value(&model_path),
       "the model (required): a model spec (core/model/model_spec.proto, as `twinps train --model` takes) or a "
       "scenario.SyntheticModel text file, told apart by content")
      ("workers", po::value(&req.workers)->notifier(in_range(1, 100000)), "worker tasks (required)")
      ("ps", po::value(&ps_list)->default_value(ps_list), "ps counts to try, comma-separated")
      ("shards", po::value(&shard_list)->default_value(shard_list),
       "shard counts of the largest variable to try, comma-separated")
      ("partitioners", po::value(&kinds)->default_value(kinds), "partitioner kinds to try: fixed, min_size, max_size")
      ("placements", po::value(&placements)->default_value(placements),
       "placements to try: round_robin (TensorFlow's, in creation order), auto (balanced by expected work per step)")
      ("profile", po::value(&profile_path), "costs: a CostProfile text file; absent: the schema's defaults")
      ("bandwidth-gbps", po::value(&bandwidth_gbps)->notifier(positive()), "host link bandwidth, overriding the profile's")
      ("hosts", po::value(&hosts),
       "where the tasks run: dedicated, one, bin-pack:N or spread:N (tasks per host), overriding the profile's")
      ("cores", po::value(&cores)->notifier(positive()), "cores per host, overriding the profile's")
      ("seed", value_or(&req.seed, req.seed), "seed of every simulated run")
      ("tolerance", value_or(&req.tolerance, req.tolerance)->notifier([](double v) {
         if (!(v >= 0 && v < 1)) throw BadValue("must be in [0, 1) (got " + shown(v) + ")");
       }),
       "prefer fewer ps within this fraction of the fastest")
      ("csv", po::value(&csv_path), "write every configuration to this CSV file")
      ("top", value_or(&top, top)->notifier(at_least(0)), "rows to print (0: all); the recommended one always is")
      ("train-data", po::value(&train_data)->multitoken(),
       "a model spec's training data (globs, as `twinps train --train-data`), or builtin:tutorial: its reading is "
       "priced")
      ("train-labels", po::value(&train_labels)->multitoken(), "IDX: the labels files of --train-data")
      ("validate",
       "instead of a sweep: measure the simulation's fidelity against real runs on this machine (see twinps tune "
       "--validate --help)");
  po::variables_map vm;
  if (int rc = parse(argc, argv, kUsage, opts, vm); rc >= 0) return rc;
  if (model_path.empty() || !vm.count("workers")) {
    std::fprintf(stderr, "twinps tune: --model FILE and --workers N are required (see twinps tune --help)\n");
    return kExitBadInput;
  }
  if (!parse_list("ps", ps_list, req.ps) || !parse_list("shards", shard_list, req.shards) ||
      !parse_kinds(kinds, req.partitioners) || !parse_placements(placements, req.placements))
    return kExitBadInput;

  model_path = find_data(model_path);  // scenarios/models/... also outside the checkout
  auto model = sim::load_timed_model_file(model_path);
  if (!model.ok()) {
    for (const auto& e : model.errors) std::fprintf(stderr, "twinps tune: %s\n", e.to_string().c_str());
    if (!std::filesystem::exists(model_path)) std::fprintf(stderr, "twinps tune: %s\n", data_search_note().c_str());
    return kExitBadInput;
  }
  req.model = model.model;
  std::string data_note;
  if (int rc = price_reading(model_path, model.from_spec, std::move(train_data), std::move(train_labels), req.model,
                             data_note);
      rc != kExitOk)
    return rc;
  std::string costs = "the schema's defaults (no --profile)";
  if (!profile_path.empty()) {
    profile_path = find_data(profile_path);
    auto profile = sim::load_profile_file(profile_path);
    if (!profile.ok()) {
      for (const auto& e : profile.errors) std::fprintf(stderr, "twinps tune: %s\n", e.to_string().c_str());
      return kExitBadInput;
    }
    req.profile = profile.profile;
    costs = profile_path + (req.profile.has_measured_on() ? " (measured on " + req.profile.measured_on() + ")" : "") +
            ", over data plane " + req.profile.data_plane();
  }
  if (vm.count("bandwidth-gbps")) {
    req.profile.mutable_network()->set_host_bandwidth_gbps(bandwidth_gbps);
    costs += format(", host links at %g Gb/s", bandwidth_gbps);
  }
  if (!hosts.empty() && !parse_hosts(hosts, *req.profile.mutable_hosts())) return kExitBadInput;
  if (vm.count("cores")) req.profile.mutable_hosts()->set_cores(cores);
  // Opened before the sweep: a bad path fails at once, not after a minute.
  std::ofstream csv;
  if (!csv_path.empty()) {
    csv.open(csv_path, std::ios::trunc);
    if (!csv) {
      std::fprintf(stderr, "twinps tune: --csv: cannot write %s\n", csv_path.c_str());
      return kExitBadInput;
    }
  }

  std::printf("model: %s (%s%d variables, batch %d); %d workers\n%scosts: %s\nhosts: %s\n\n", model_path.c_str(),
              model.from_spec ? format("model spec, %.3g GFLOP per step, ", req.model.step_gflops()).c_str() : "",
              req.model.variable_size(), req.model.batch_size(), req.workers, data_note.c_str(), costs.c_str(),
              hosts_string(req.profile.hosts()).c_str());
  std::fflush(stdout);
  const bool tty = ::isatty(STDERR_FILENO);
  const auto t0 = std::chrono::steady_clock::now();
  auto result = sim::sweep(req, [&](int done, int total) {
    if (tty) std::fprintf(stderr, "\rsimulating configuration %d/%d ", done, total);
  });
  const double wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (tty) std::fputs("\r\033[K", stderr);
  if (!result.ok()) {
    std::fprintf(stderr, "twinps tune: %s\n", describe(result.status()).c_str());
    return result.status().code() == StatusCode::kInvalidArgument ? kExitBadInput : kExitFailed;
  }
  for (const auto& s : result->skipped) std::printf("skipped %s\n", s.c_str());
  if (!result->skipped.empty()) std::printf("\n");
  print_table(*result, top);
  const auto& chosen = result->rows[static_cast<std::size_t>(result->recommended)];
  std::printf("\nrecommended: %d ps, %s partitioner, %d shards, %s placement: %.1f steps/s\n  why: %s\n", chosen.ps,
              sim::partitioner_name(chosen.partitioner), chosen.shards, sim::placement_name(chosen.placement),
              chosen.prediction.steps_per_second, result->reason.c_str());
  std::printf("  as a model file: partitioner { %s }%s\n", chosen.partitioner_config.ShortDebugString().c_str(),
              chosen.placement == scenario::AUTO ? " placement: AUTO" : "");
  print_placement_comparison(*result);
  int simulated = 0, least = chosen.measured, most = chosen.measured;
  for (const auto& row : result->rows) {
    simulated += row.same_as_earlier ? 0 : 1;
    least = std::min(least, row.measured);
    most = std::max(most, row.measured);
  }
  std::printf("\n%zu configurations (%d simulated, the rest share a layout), %d..%d measured closures each; "
              "%.1f M simulated events in %.1f s wall time\n",
              result->rows.size(), simulated, least, most, static_cast<double>(result->events) / 1e6, wall_s);
  if (csv.is_open() && !write_csv(csv, *result)) {
    std::fprintf(stderr, "twinps tune: --csv: writing %s failed\n", csv_path.c_str());
    return kExitBadInput;
  }
  return kExitOk;
}

}  // namespace twinps::cli
