// How fast the file readers deliver records: examples/s of a whole epoch
// through FileDataset (reader + batching, optionally the shuffle buffer),
// with no training. Fashion-MNIST is read from Debian's dataset-fashion-mnist
// when installed; the other formats from files written here first.
//   build/bin/twinps_data_bench [--benchmark_filter=...]
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "core/checkpoint/crc32c.h"
#include "core/data/ctr_generator.h"
#include "core/data/file_dataset.h"

namespace twinps::data {
namespace {

const std::string kFashion = "/usr/share/datasets/fashion-mnist";

std::int64_t read_epoch(const FileDatasetSpec& spec, benchmark::State& state) {
  auto ds = FileDataset::create(spec, 0, 1);
  if (!ds.ok()) {
    state.SkipWithError(std::string(ds.status().message()).c_str());
    return 0;
  }
  auto it = (*ds)->make_iterator(RandomStream(1));
  std::int64_t n = 0;
  for (;;) {
    auto b = it->next();
    if (!b.ok()) break;
    n += b->size;
    benchmark::DoNotOptimize(b->columns.data());
  }
  return n;
}

void fashion_mnist(benchmark::State& state, std::int64_t shuffle_buffer) {
  if (!std::filesystem::exists(kFashion + "/train-images-idx3-ubyte.gz")) {
    state.SkipWithError("dataset-fashion-mnist is not installed");
    return;
  }
  FileDatasetSpec spec;
  spec.add_patterns(kFashion + "/train-images-idx3-ubyte.gz");
  spec.mutable_idx()->add_labels_patterns(kFashion + "/train-labels-idx1-ubyte.gz");
  spec.mutable_idx()->set_scale_to_unit(true);
  spec.set_batch_size(64);
  spec.set_shuffle_buffer(shuffle_buffer);
  std::int64_t n = 0;
  for (auto _ : state) n += read_epoch(spec, state);
  state.SetItemsProcessed(n);
}
void BM_FashionMnistTrainEpoch(benchmark::State& state) { fashion_mnist(state, 0); }
void BM_FashionMnistTrainEpochShuffled10k(benchmark::State& state) { fashion_mnist(state, 10000); }
BENCHMARK(BM_FashionMnistTrainEpoch)->Unit(benchmark::kMillisecond)->MeasureProcessCPUTime()->UseRealTime();
BENCHMARK(BM_FashionMnistTrainEpochShuffled10k)->Unit(benchmark::kMillisecond)->MeasureProcessCPUTime()->UseRealTime();

std::string scratch() {
  static const std::string dir = [] {
    auto d = std::filesystem::temp_directory_path() / ("twinps_data_bench_" + std::to_string(::getpid()));
    std::filesystem::create_directories(d);
    return d.string();
  }();
  return dir;
}

// A 50,000-example click log (ctr generator) in scratch(), written once.
bool ctr_log_written() {
  static const bool made = [] {
    CtrOptions o;
    o.examples = 50000;
    o.test_fraction = 0.02;
    o.train_files = 1;
    return generate_ctr(scratch(), o).ok();
  }();
  return made;
}

// The click log read with its 40 columns.
void BM_CtrTfRecordEpoch(benchmark::State& state) {
  if (!ctr_log_written()) {
    state.SkipWithError("cannot write the click log");
    return;
  }
  FileDatasetSpec spec;
  spec.add_patterns(scratch() + "/train-*.tfrecord");
  set_columns(ctr_schema(), spec);
  spec.set_batch_size(256);
  std::int64_t n = 0;
  for (auto _ : state) n += read_epoch(spec, state);
  state.SetItemsProcessed(n);
}
BENCHMARK(BM_CtrTfRecordEpoch)->Unit(benchmark::kMillisecond)->MeasureProcessCPUTime()->UseRealTime();

// The same log read as the sparse embedding reads it: its label and one id
// column of the 40 (examples/sparse_embedding), so 38 features a record are
// passed over by name.
void BM_CtrTfRecordEpochTwoColumns(benchmark::State& state) {
  if (!ctr_log_written()) {
    state.SkipWithError("cannot write the click log");
    return;
  }
  Schema read;
  for (const ColumnSpec& c : ctr_schema().columns)
    if (c.name == "label" || c.name == "C26") read.columns.push_back(c);
  FileDatasetSpec spec;
  spec.add_patterns(scratch() + "/train-*.tfrecord");
  set_columns(read, spec);
  spec.set_batch_size(512);
  std::int64_t n = 0;
  for (auto _ : state) n += read_epoch(spec, state);
  state.SetItemsProcessed(n);
}
BENCHMARK(BM_CtrTfRecordEpochTwoColumns)->Unit(benchmark::kMillisecond)->MeasureProcessCPUTime()->UseRealTime();

// The checksum every TFRecord frame (and checkpoint file) is read through:
// 12-byte headers, a click-log record (564 bytes), a page, a large tensor.
// Bytes/s against the portable table, which is what a processor without
// SSE 4.2 runs.
void crc_bench(benchmark::State& state, std::uint32_t (*crc)(std::uint32_t, const void*, std::size_t)) {
  std::string bytes(static_cast<std::size_t>(state.range(0)), '\0');
  for (std::size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<char>(i * 131 + 7);
  std::uint32_t c = 0;
  for (auto _ : state) benchmark::DoNotOptimize(c = crc(c, bytes.data(), bytes.size()));
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) * state.range(0));
}
void BM_Crc32c(benchmark::State& state) { crc_bench(state, &crc32c_extend); }
void BM_Crc32cTable(benchmark::State& state) { crc_bench(state, &twinps::detail::crc32c_extend_bytewise); }
BENCHMARK(BM_Crc32c)->Arg(12)->Arg(564)->Arg(4096)->Arg(1 << 20);
BENCHMARK(BM_Crc32cTable)->Arg(564)->Arg(1 << 20);

// The same click log as CSV: 13 floats and 26 ids per line.
void BM_CtrCsvEpoch(benchmark::State& state) {
  static const bool made = [] {
    std::ofstream out(scratch() + "/ctr.csv");
    out << "label";
    for (int j = 1; j <= 13; ++j) out << ",I" << j;
    for (int k = 1; k <= 26; ++k) out << ",C" << k;
    out << "\n";
    RandomStream r(1);
    for (int i = 0; i < 50000; ++i) {
      out << r.below(2);
      for (int j = 0; j < 13; ++j) out << "," << static_cast<float>(r.uniform(0, 8));
      for (int k = 0; k < 26; ++k) out << "," << r.below(1000000);
      out << "\n";
    }
    return true;
  }();
  (void)made;
  FileDatasetSpec spec;
  spec.add_patterns(scratch() + "/ctr.csv");
  set_columns(ctr_schema(), spec);
  spec.set_batch_size(256);
  std::int64_t n = 0;
  for (auto _ : state) n += read_epoch(spec, state);
  state.SetItemsProcessed(n);
}
BENCHMARK(BM_CtrCsvEpoch)->Unit(benchmark::kMillisecond)->MeasureProcessCPUTime()->UseRealTime();

// LibSVM rows of 40 index:value pairs.
void BM_LibSvmEpoch(benchmark::State& state) {
  static const bool made = [] {
    std::ofstream out(scratch() + "/rows.svm");
    RandomStream r(2);
    for (int i = 0; i < 50000; ++i) {
      out << r.below(2);
      for (int k = 0; k < 40; ++k) out << " " << (k * 1000 + r.below(1000)) << ":" << static_cast<float>(r.uniform());
      out << "\n";
    }
    return true;
  }();
  (void)made;
  FileDatasetSpec spec;
  spec.add_patterns(scratch() + "/rows.svm");
  spec.set_batch_size(256);
  std::int64_t n = 0;
  for (auto _ : state) n += read_epoch(spec, state);
  state.SetItemsProcessed(n);
}
BENCHMARK(BM_LibSvmEpoch)->Unit(benchmark::kMillisecond)->MeasureProcessCPUTime()->UseRealTime();

}  // namespace
}  // namespace twinps::data

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  std::error_code ec;
  std::filesystem::remove_all(twinps::data::scratch(), ec);
  return 0;
}
