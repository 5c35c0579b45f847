// twinps datagen KIND: writes synthetic datasets for the examples.
//   ctr   a Criteo-shaped click log in TFRecord with a hidden model's AUC
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>

#include "core/data/ctr_generator.h"
#include "tools/cli.h"
#include "tools/commands/commands.h"

namespace twinps::cli {

namespace {

int run_datagen_ctr(int argc, char** argv) {
  data::CtrOptions o;
  std::string out;
  po::options_description opts("twinps datagen ctr options");
  opts.add_options()("help,h", "show this help")
      ("out", po::value(&out)->required(), "directory to write into (created if missing)")
      ("examples", po::value(&o.examples)->default_value(o.examples), "examples in all (train + test)")
      ("seed", po::value(&o.seed)->default_value(o.seed), "seed: the same seed writes the same bytes")
      ("test-fraction", po::value(&o.test_fraction)->default_value(o.test_fraction), "share of examples in the test split")
      ("train-files", po::value(&o.train_files)->default_value(o.train_files), "train split files (shards)")
      ("max-vocabulary", po::value(&o.max_vocabulary)->default_value(o.max_vocabulary),
       "largest vocabulary of C1..C26 (sizes are log-spaced from 10)")
      ("zipf-exponent", po::value(&o.zipf_exponent)->default_value(o.zipf_exponent), "exponent of the ids' Zipf law (0: uniform ids)")
      ("rank-scale", po::value(&o.rank_scale)->default_value(o.rank_scale),
       "ids rarer than this rank carry shrinking hidden weights")
      ("gzip", po::bool_switch(&o.gzip), "write .tfrecord.gz (TensorFlow's GZIP compression)");
  po::variables_map vm;
  if (int rc = parse(argc, argv, "usage: twinps datagen ctr --out DIR [--examples N] [--seed S]", opts, vm); rc >= 0)
    return rc;
  std::error_code ec;
  std::filesystem::create_directories(out, ec);
  if (ec) {
    std::fprintf(stderr, "twinps datagen ctr: cannot create %s: %s\n", out.c_str(), ec.message().c_str());
    return kExitBadInput;
  }
  const auto t0 = std::chrono::steady_clock::now();
  auto summary = data::generate_ctr(out, o);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (!summary.ok()) {
    std::fprintf(stderr, "twinps datagen ctr: %s\n", describe(summary.status()).c_str());
    return summary.status().code() == StatusCode::kInvalidArgument ? kExitBadInput : kExitFailed;
  }
  Table t;
  t.row("directory", out);
  t.row("train", format("%lld examples in %d files, %.3f clicked", static_cast<long long>(summary->train_examples),
                        o.train_files, summary->train_positive_rate));
  t.row("test", format("%lld examples, %.3f clicked", static_cast<long long>(summary->test_examples),
                       summary->test_positive_rate));
  t.row("vocabularies", format("C1..C26 from %lld to %lld ids, Zipf exponent %.2f",
                               static_cast<long long>(summary->vocabulary_sizes.front()),
                               static_cast<long long>(summary->vocabulary_sizes.back()), o.zipf_exponent));
  t.row("hidden model", format("test log loss %.4f (written to hidden_model.json)", summary->hidden_test_log_loss));
  t.row("generated in", format("%.1f s (%.0f examples/s)", seconds, static_cast<double>(o.examples) / seconds));
  t.print();
  std::printf("hidden model test auc: %.4f\n", summary->hidden_test_auc);
  return kExitOk;
}

struct Kind {
  const char* name;
  const char* summary;
  int (*run)(int argc, char** argv);
};

const Kind kKinds[] = {
    {"ctr", "a click log in TFRecord (13 dense, 26 Zipf categorical features) and its hidden model's test AUC",
     run_datagen_ctr},
};

void usage(std::FILE* out) {
  std::fprintf(out, "usage: twinps datagen KIND [options]   (twinps datagen KIND --help for its options)\n\nkinds:\n");
  for (const auto& k : kKinds) std::fprintf(out, "  %-6s %s\n", k.name, k.summary);
}

}  // namespace

int run_datagen(int argc, char** argv) {
  if (argc < 2 || std::strcmp(argv[1], "--help") == 0 || std::strcmp(argv[1], "-h") == 0) {
    usage(argc < 2 ? stderr : stdout);
    return argc < 2 ? kExitBadInput : kExitOk;
  }
  for (const auto& k : kKinds)
    if (argv[1] == std::string(k.name)) return k.run(argc - 1, argv + 1);
  std::fprintf(stderr, "twinps datagen: unknown kind '%s'\n\n", argv[1]);
  usage(stderr);
  return kExitBadInput;
}

}  // namespace twinps::cli
