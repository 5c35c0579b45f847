// File datasets: globs, format inference, sharding over workers (every record
// exactly once per epoch), tf.data's buffer shuffle (deterministic given the
// random stream), batch / drop_remainder / repeat, bad records failing or
// skipped and counted, and the per-worker resource path through the
// coordinator, rebuilt after a worker restart.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "core/coordinator/cluster_coordinator.h"
#include "core/data/dataset.h"
#include "core/data/file_dataset.h"
#include "core/data/idx_reader.h"
#include "inmemory/in_memory_cluster.h"
#include "core/worker/step_context.h"
#include "tests/core/data_test_util.h"

namespace twinps::data {
namespace {

using testing::contains;
using testing::ScratchDir;

// `files` CSV files holding ids 0..records-1 in order, spread as evenly as
// integer division spreads them; returns the glob.
std::string write_id_files(const ScratchDir& dir, int files, int records) {
  for (int f = 0; f < files; ++f) {
    std::string text = "id,twice\n";
    for (int id = records * f / files; id < records * (f + 1) / files; ++id)
      text += std::to_string(id) + "," + std::to_string(2 * id) + "\n";
    char name[32];
    std::snprintf(name, sizeof name, "part-%03d.csv", f);
    dir.write(name, text);
  }
  return dir.file("part-*.csv");
}

FileDatasetSpec id_spec(const std::string& pattern) {
  FileDatasetSpec spec;
  spec.add_patterns(pattern);
  auto* id = spec.add_columns();
  id->set_name("id");
  id->set_type(ColumnProto::INT64);
  auto* twice = spec.add_columns();
  twice->set_name("twice");
  twice->set_type(ColumnProto::FLOAT);
  spec.set_shuffle_files(false);
  return spec;
}

// Every id the iterator gives, in order, until OUT_OF_RANGE (bounded).
std::vector<std::int64_t> drain(RecordIteratorResource& it, std::vector<std::int64_t>* batch_sizes = nullptr) {
  std::vector<std::int64_t> ids;
  for (int guard = 0; guard < 100000; ++guard) {
    auto b = it.next();
    if (!b.ok()) {
      EXPECT_EQ(b.status().code(), StatusCode::kOutOfRange) << b.status();
      break;
    }
    if (batch_sizes) batch_sizes->push_back(b->size);
    EXPECT_EQ(b->columns[0].offsets.size(), static_cast<std::size_t>(b->size + 1));
    for (std::int64_t i = 0; i < b->size; ++i) {
      ids.push_back(b->columns[0].ints[static_cast<std::size_t>(i)]);
      EXPECT_EQ(b->columns[1].floats[static_cast<std::size_t>(i)], 2.0f * static_cast<float>(ids.back()));
    }
  }
  return ids;
}

std::vector<std::int64_t> read_shard(const FileDatasetSpec& spec, int worker, int workers, std::uint64_t seed = 1,
                                     std::string* description = nullptr) {
  auto ds = FileDataset::create(spec, worker, workers);
  EXPECT_TRUE(ds.ok()) << ds.status();
  if (!ds.ok()) return {};
  if (description) *description = (*ds)->plan().description;
  return drain(*(*ds)->make_iterator(RandomStream(seed)));
}

TEST(FileDatasetTest, ShardsCoverEveryRecordExactlyOncePerEpoch) {
  ScratchDir dir;
  constexpr int kRecords = 101;
  for (int files : {1, 2, 3, 5, 8}) {
    std::filesystem::remove_all(dir.path());
    std::filesystem::create_directories(dir.path());
    const std::string pattern = write_id_files(dir, files, kRecords);
    for (int workers : {1, 2, 3, 4, 7}) {
      for (auto sharding : {FileDatasetSpec::AUTO, FileDatasetSpec::BY_FILE, FileDatasetSpec::BY_RECORD}) {
        if (sharding == FileDatasetSpec::BY_FILE && files < workers) continue;
        FileDatasetSpec spec = id_spec(pattern);
        spec.set_sharding(sharding);
        spec.set_batch_size(4);
        spec.set_shuffle_buffer(16);
        spec.set_shuffle_files(true);
        std::map<std::int64_t, int> seen;
        for (int w = 0; w < workers; ++w)
          for (auto id : read_shard(spec, w, workers, 100 + static_cast<std::uint64_t>(w))) ++seen[id];
        ASSERT_EQ(seen.size(), static_cast<std::size_t>(kRecords))
            << files << " files, " << workers << " workers, sharding " << sharding;
        for (const auto& [id, n] : seen) ASSERT_EQ(n, 1) << "id " << id;
      }
    }
  }
}

TEST(FileDatasetTest, AutoShardsByFileWhenThereAreEnoughFilesElseByRecord) {
  ScratchDir dir;
  const std::string pattern = write_id_files(dir, 3, 30);
  std::string description;
  auto ids = read_shard(id_spec(pattern), 1, 2, 1, &description);
  EXPECT_EQ(description, "by file: files 2 of 3 (auto: 3 files >= 2 workers)");
  EXPECT_EQ(ids.size(), 10u);
  ids = read_shard(id_spec(pattern), 3, 4, 1, &description);
  EXPECT_EQ(description, "by record: records 23..30 of 30 in 3 files (auto: 3 files < 4 workers)");
  EXPECT_EQ(ids, (std::vector<std::int64_t>{22, 23, 24, 25, 26, 27, 28, 29}));

  FileDatasetSpec by_file = id_spec(pattern);
  by_file.set_sharding(FileDatasetSpec::BY_FILE);
  auto refused = FileDataset::create(by_file, 0, 4);
  EXPECT_TRUE(contains(refused.status(), "BY_FILE needs at least as many files as workers: 3 files, 4 workers"))
      << refused.status();

  FileDatasetSpec none = id_spec(pattern);
  none.set_sharding(FileDatasetSpec::NONE);
  EXPECT_EQ(read_shard(none, 2, 3).size(), 30u);
}

TEST(FileDatasetTest, BatchDropRemainderAndRepeat) {
  ScratchDir dir;
  FileDatasetSpec spec = id_spec(write_id_files(dir, 2, 10));
  spec.set_batch_size(4);
  spec.set_repeat(2);
  auto ds = FileDataset::create(spec, 0, 1);
  ASSERT_TRUE(ds.ok()) << ds.status();
  std::vector<std::int64_t> sizes;
  auto it = (*ds)->make_iterator(RandomStream(1));
  auto ids = drain(*it, &sizes);
  EXPECT_EQ(sizes, (std::vector<std::int64_t>{4, 4, 2, 4, 4, 2}));
  EXPECT_EQ(ids.size(), 20u);
  EXPECT_EQ(it->stats().passes_completed, 2);
  EXPECT_EQ(it->stats().records_read, 20);
  // OUT_OF_RANGE stays.
  EXPECT_EQ(it->next().status().code(), StatusCode::kOutOfRange);

  spec.set_drop_remainder(true);
  sizes.clear();
  drain(*(*FileDataset::create(spec, 0, 1))->make_iterator(RandomStream(1)), &sizes);
  EXPECT_EQ(sizes, (std::vector<std::int64_t>{4, 4, 4, 4}));

  // Forever, yet bounded when a pass cannot fill a batch.
  spec.set_repeat(-1);
  spec.set_batch_size(11);
  auto starved = (*FileDataset::create(spec, 0, 1))->make_iterator(RandomStream(1));
  auto r = starved->next();
  EXPECT_EQ(r.status().code(), StatusCode::kOutOfRange);
  EXPECT_TRUE(contains(r.status(), "fewer records than a batch")) << r.status();

  // An empty shard: BY_RECORD over 2 records and 3 workers leaves worker 0 none.
  ScratchDir small("small");
  FileDatasetSpec tiny = id_spec(write_id_files(small, 1, 2));
  tiny.set_repeat(-1);
  auto empty = (*FileDataset::create(tiny, 0, 3))->make_iterator(RandomStream(1));
  EXPECT_TRUE(contains(empty->next().status(), "the shard has no records"));
}

TEST(FileDatasetTest, ShuffleIsTfDatasBufferShuffleAndDeterministic) {
  ScratchDir dir;
  constexpr int kRecords = 50;
  FileDatasetSpec spec = id_spec(write_id_files(dir, 1, kRecords));
  spec.set_shuffle_buffer(8);
  spec.set_batch_size(7);
  spec.set_repeat(2);
  auto ds = FileDataset::create(spec, 0, 1);
  ASSERT_TRUE(ds.ok());
  const auto a = drain(*(*ds)->make_iterator(RandomStream(42)));
  const auto b = drain(*(*ds)->make_iterator(RandomStream(42)));
  const auto c = drain(*(*ds)->make_iterator(RandomStream(43)));
  ASSERT_EQ(a.size(), 2u * kRecords);
  EXPECT_EQ(a, b) << "same stream, same order";
  EXPECT_NE(a, c) << "another stream shuffles differently (R6)";

  // The order of pass 0 is exactly shuffle_order's (the in-memory datasets').
  RandomStream records = RandomStream(42).fork("pass", 0).fork("records");
  const auto expected = shuffle_order(kRecords, 8, records);
  for (int i = 0; i < kRecords; ++i) ASSERT_EQ(a[static_cast<std::size_t>(i)], static_cast<std::int64_t>(expected[static_cast<std::size_t>(i)]));
  // A buffer of 8 only mixes neighbours: no record moves earlier than 8 places before its turn.
  for (int i = 0; i < kRecords; ++i) EXPECT_LE(a[static_cast<std::size_t>(i)], i + 8);

  // Each pass reshuffles, unless told not to.
  const std::vector<std::int64_t> pass0(a.begin(), a.begin() + kRecords), pass1(a.begin() + kRecords, a.end());
  EXPECT_NE(pass0, pass1);
  EXPECT_EQ(std::multiset<std::int64_t>(pass0.begin(), pass0.end()), std::multiset<std::int64_t>(pass1.begin(), pass1.end()));
  spec.set_reshuffle_each_iteration(false);
  const auto same = drain(*(*FileDataset::create(spec, 0, 1))->make_iterator(RandomStream(42)));
  EXPECT_EQ(std::vector<std::int64_t>(same.begin(), same.begin() + kRecords),
            std::vector<std::int64_t>(same.begin() + kRecords, same.end()));
}

TEST(FileDatasetTest, FileOrderIsShuffledPerPassWhenAsked) {
  ScratchDir dir;
  FileDatasetSpec spec = id_spec(write_id_files(dir, 6, 60));
  spec.set_shuffle_files(true);
  spec.set_batch_size(10);
  spec.set_repeat(3);
  const auto ids = drain(*(*FileDataset::create(spec, 0, 1))->make_iterator(RandomStream(7)));
  ASSERT_EQ(ids.size(), 180u);
  // Files are read whole: each batch of 10 is one file, in order within it.
  std::vector<std::int64_t> file_order;
  for (std::size_t b = 0; b < ids.size(); b += 10) {
    EXPECT_EQ(ids[b] % 10, 0);
    file_order.push_back(ids[b] / 10);
  }
  const std::vector<std::int64_t> p0(file_order.begin(), file_order.begin() + 6),
      p1(file_order.begin() + 6, file_order.begin() + 12);
  EXPECT_NE(p0, (std::vector<std::int64_t>{0, 1, 2, 3, 4, 5})) << "shuffled (seed-dependent; fixed seed)";
  EXPECT_NE(p0, p1);
}

TEST(FileDatasetTest, BatchesCarryColumnsOffsetsAndOrigins) {
  ScratchDir dir;
  dir.write("a.libsvm", "1 1:0.5 3:1\n0\n# c\n1 2:2\n");
  FileDatasetSpec spec;
  spec.add_patterns(dir.file("*.libsvm"));
  spec.set_batch_size(3);
  auto ds = FileDataset::create(spec, 0, 1);
  ASSERT_TRUE(ds.ok()) << ds.status();
  EXPECT_EQ((*ds)->format(), FileDatasetSpec::LIBSVM);
  auto batch = (*ds)->make_iterator(RandomStream(1))->next();
  ASSERT_TRUE(batch.ok());
  ASSERT_EQ(batch->columns.size(), 3u);
  EXPECT_EQ(batch->columns[0].floats, (std::vector<float>{1, 0, 1}));
  EXPECT_EQ(batch->columns[1].ints, (std::vector<std::int64_t>{1, 3, 2}));
  EXPECT_EQ(batch->columns[1].offsets, (std::vector<std::int64_t>{0, 2, 2, 3}));
  EXPECT_EQ(batch->columns[2].floats, (std::vector<float>{0.5f, 1, 2}));
  EXPECT_EQ(batch->columns[2].offsets, (std::vector<std::int64_t>{0, 2, 2, 3}));
  EXPECT_EQ(batch->describe_record(2), dir.file("a.libsvm") + ":4 (record 3)");
}

TEST(FileDatasetTest, BadRecordsFailNamingFileAndLineOrAreSkippedAndCounted) {
  ScratchDir dir;
  dir.write("a.csv", "id,twice\n0,0\n1,two\n2,4\n3,6\n");
  FileDatasetSpec spec = id_spec(dir.file("a.csv"));
  spec.set_batch_size(2);
  auto it = (*FileDataset::create(spec, 0, 1))->make_iterator(RandomStream(1));
  auto bad = it->next();
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(contains(bad.status(), dir.file("a.csv") + ":3 (record 2): column \"twice\": \"two\" is not a float"))
      << bad.status();
  EXPECT_EQ(it->next().status(), bad.status()) << "the failure stays";

  spec.set_skip_bad_records(true);
  auto skipping = (*FileDataset::create(spec, 0, 1))->make_iterator(RandomStream(1));
  EXPECT_EQ(drain(*skipping), (std::vector<std::int64_t>{0, 2, 3}));
  EXPECT_EQ(skipping->stats().records_skipped, 1);
  EXPECT_EQ(skipping->stats().records_read, 3);
  ASSERT_EQ(skipping->stats().first_errors.size(), 1u);
  EXPECT_TRUE(skipping->stats().first_errors[0].find(":3 (record 2)") != std::string::npos);

  // A schema that does not fit the file is no bad record: it fails even when skipping.
  FileDatasetSpec wrong = spec;
  wrong.mutable_columns(0)->set_name("identifier");
  auto refused = FileDataset::create(wrong, 0, 1);
  EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(contains(refused.status(), dir.file("a.csv") + ": column \"identifier\" is not in the header"))
      << refused.status();
}

TEST(FileDatasetTest, SpecErrorsNameTheirCause) {
  ScratchDir dir;
  write_id_files(dir, 1, 3);
  auto no_match = FileDataset::create(id_spec(dir.file("nothing-*.csv")), 0, 1);
  EXPECT_EQ(no_match.status().code(), StatusCode::kNotFound);
  EXPECT_TRUE(contains(no_match.status(), "no files match \"" + dir.file("nothing-*.csv") + "\""));

  dir.write("data.bin", "x");
  auto unknown = FileDataset::create(id_spec(dir.file("data.bin")), 0, 1);
  EXPECT_TRUE(contains(unknown.status(), "the file name does not say its format")) << unknown.status();

  dir.write("b.svm", "1 1:1\n");
  FileDatasetSpec mixed = id_spec(dir.file("part-*.csv"));
  mixed.add_patterns(dir.file("b.svm"));
  EXPECT_TRUE(contains(FileDataset::create(mixed, 0, 1).status(), "one dataset reads one format"));

  FileDatasetSpec bad = id_spec(dir.file("part-*.csv"));
  bad.set_batch_size(0);
  EXPECT_TRUE(contains(FileDataset::create(bad, 0, 1).status(), "batch_size must be positive"));
  bad = id_spec(dir.file("part-*.csv"));
  bad.set_repeat(0);
  EXPECT_TRUE(contains(FileDataset::create(bad, 0, 1).status(), "repeat must be -1"));
  bad = id_spec(dir.file("part-*.csv"));
  bad.mutable_columns(1)->set_name("id");
  EXPECT_TRUE(contains(FileDataset::create(bad, 0, 1).status(), "column \"id\" is declared twice"));
  bad = id_spec(dir.file("part-*.csv"));
  bad.clear_columns();
  EXPECT_TRUE(contains(FileDataset::create(bad, 0, 1).status(), "CSV datasets need columns"));
}

TEST(FileDatasetTest, IdxPairsFromGlobs) {
  ScratchDir dir;
  std::vector<std::uint8_t> pixels(5 * 4);
  for (std::size_t i = 0; i < pixels.size(); ++i) pixels[i] = static_cast<std::uint8_t>(i);
  ASSERT_TRUE(write_idx_ubyte(dir.file("train-images-idx3-ubyte.gz"), {5, 2, 2}, pixels).ok());
  ASSERT_TRUE(write_idx_ubyte(dir.file("train-labels-idx1-ubyte.gz"), {5}, {0, 1, 2, 3, 4}).ok());
  FileDatasetSpec spec;
  spec.add_patterns(dir.file("train-images-*"));
  spec.mutable_idx()->add_labels_patterns(dir.file("train-labels-*"));
  spec.set_batch_size(5);
  std::vector<std::int64_t> labels;
  for (int w = 0; w < 2; ++w) {
    auto ds = FileDataset::create(spec, w, 2);
    ASSERT_TRUE(ds.ok()) << ds.status();
    EXPECT_EQ((*ds)->plan().sharding, FileDatasetSpec::BY_RECORD);
    auto b = (*ds)->make_iterator(RandomStream(1))->next();
    ASSERT_TRUE(b.ok());
    EXPECT_EQ((*ds)->schema().columns[0].width, 4);
    for (std::int64_t i = 0; i < b->size; ++i) {
      const auto label = b->columns[1].ints[static_cast<std::size_t>(i)];
      labels.push_back(label);
      EXPECT_EQ(b->columns[0].floats[static_cast<std::size_t>(4 * i)], static_cast<float>(4 * label));
    }
  }
  EXPECT_EQ(labels, (std::vector<std::int64_t>{0, 1, 2, 3, 4}));
}

// A cost model prices reading a batch by its format, compression included:
// the simulator charges a run on this data what calibrate measured reading it.
TEST(FileDatasetTest, AnIteratorNamesTheKernelItsReadingIsPricedBy) {
  ScratchDir dir;
  auto kind_of = [&](const FileDatasetSpec& spec) {
    auto ds = FileDataset::create(spec, 0, 1);
    EXPECT_TRUE(ds.ok()) << ds.status();
    return ds.ok() ? std::string((*ds)->make_iterator(RandomStream(1))->read_kernel()) : std::string();
  };
  EXPECT_EQ(kind_of(id_spec(write_id_files(dir, 2, 10))), "read/csv");
  ASSERT_TRUE(write_idx_ubyte(dir.file("t-images-idx3-ubyte.gz"), {2, 1, 1}, {7, 8}).ok());
  ASSERT_TRUE(write_idx_ubyte(dir.file("t-labels-idx1-ubyte.gz"), {2}, {0, 1}).ok());
  FileDatasetSpec idx;
  idx.add_patterns(dir.file("t-images-*"));
  idx.mutable_idx()->add_labels_patterns(dir.file("t-labels-*"));
  EXPECT_EQ(kind_of(idx), "read/idx.gz");
  EXPECT_EQ(read_kernel(FileDatasetSpec::TFRECORD, "/data/train-00000.tfrecord"), "read/tfrecord");
  EXPECT_EQ(read_kernel(FileDatasetSpec::LIBSVM, "a.svm.gz"), "read/libsvm.gz");
}

// ---------------------------------------------------------------- through the coordinator

struct ClusterHarness {
  FunctionRegistry registry;
  std::unique_ptr<InMemoryCluster> cluster;

  explicit ClusterHarness(int workers) {
    register_file_dataset_functions(registry);
    // args: [iterator]; returns [worker index, ids of the next batch...].
    registry.add_step("ids", [](StepContext& ctx) -> Task<StatusOr<Value>> {
      auto it = ctx.resource<RecordIteratorResource>(0);
      if (!it.ok()) co_return it.status();
      auto batch = (*it)->next();
      if (!batch.ok()) co_return batch.status();
      Matrix out(1, batch->size + 1);
      out(0, 0) = static_cast<float>(ctx.worker_index());
      for (std::int64_t i = 0; i < batch->size; ++i)
        out(0, i + 1) = static_cast<float>(batch->columns[0].ints[static_cast<std::size_t>(i)]);
      co_return Value(out);
    });
    InMemoryClusterOptions o;
    o.shape = ClusterShape{workers, 1};
    cluster = std::make_unique<InMemoryCluster>(registry, o);
    VariableLayout iterations{"iterations", {}, VariableKind::kCounter, {ShardPlacement{0, 0, 0, 1}}};
    ShardState it;
    it.spec = ShardSpec{0, "iterations", VariableKind::kCounter, 1, 1};
    auto started = cluster->run(cluster->coordinator().start({iterations}, OptimizerConfig{}, {it}));
    EXPECT_TRUE(started && started->ok());
  }

  // Runs `ids` once and returns [worker, ids...].
  std::vector<float> next(const PerWorkerValues& it) {
    auto rv = cluster->run(cluster->coordinator().schedule("ids", {it}));
    EXPECT_TRUE(rv && rv->ok());
    auto joined = cluster->run(cluster->coordinator().join());
    EXPECT_TRUE(joined && joined->ok()) << (joined ? describe(*joined) : "");
    const auto value = (*rv)->peek().value();
    if (!value.ok()) {
      ADD_FAILURE() << value.status();
      return {};
    }
    const Matrix m = std::get<Matrix>(*value);
    return std::vector<float>(m.data(), m.data() + m.size());
  }
};

TEST(FileDatasetTest, PerWorkerResourceIsItsShardAndIsRebuiltAfterARestart) {
  ScratchDir dir;
  FileDatasetSpec spec = id_spec(write_id_files(dir, 1, 40));
  spec.set_batch_size(4);
  spec.set_repeat(-1);
  spec.set_shuffle_buffer(10);
  ClusterHarness h(2);
  auto& c = h.cluster->coordinator();
  PerWorkerDataset ds = c.create_per_worker_dataset(kFileDatasetFunction, file_dataset_args(spec, 2));
  PerWorkerValues it = c.create_per_worker_iterator(ds);
  std::map<int, std::vector<std::vector<float>>> by_worker;
  for (int i = 0; i < 12; ++i) {
    auto got = h.next(it);
    ASSERT_EQ(got.size(), 5u);
    const int w = static_cast<int>(got[0]);
    by_worker[w].push_back({got.begin() + 1, got.end()});
    // BY_RECORD over one file: worker 0 reads ids 0..19, worker 1 ids 20..39.
    for (std::size_t k = 1; k < got.size(); ++k) EXPECT_EQ(static_cast<int>(got[k]) / 20, w);
  }
  ASSERT_FALSE(by_worker[0].empty());
  // A restarted worker rebuilds its dataset and iterator from the same
  // arguments: the same shard, read from the start again (R10). With worker
  // 1 down, worker 0 runs every closure: 5 batches are one whole epoch of
  // its 20 records, however far its old iterator had got.
  h.cluster->kill(TaskId::worker(1));
  h.cluster->kill(TaskId::worker(0));
  h.cluster->restart(TaskId::worker(0));
  h.cluster->run_until_time(h.cluster->coordinator_executor().now() + 5 * kSecond);
  std::multiset<int> epoch;
  for (int i = 0; i < 5; ++i) {
    auto got = h.next(it);
    ASSERT_EQ(static_cast<int>(got[0]), 0);
    for (std::size_t k = 1; k < got.size(); ++k) epoch.insert(static_cast<int>(got[k]));
  }
  std::multiset<int> expected;
  for (int id = 0; id < 20; ++id) expected.insert(id);
  EXPECT_EQ(epoch, expected);
}

TEST(FileDatasetTest, ShuffleSeedGivesTheSameOrderOnEveryBuild) {
  ScratchDir dir;
  FileDatasetSpec spec = id_spec(write_id_files(dir, 1, 30));
  spec.set_shuffle_buffer(30);
  spec.set_batch_size(30);
  spec.set_shuffle_seed(5);
  const auto a = read_shard(spec, 0, 1, /*seed=*/1), b = read_shard(spec, 0, 1, /*seed=*/2);
  EXPECT_EQ(a, b) << "the worker's stream is not used";
  spec.set_shuffle_seed(6);
  EXPECT_NE(read_shard(spec, 0, 1, 1), a);
}

}  // namespace
}  // namespace twinps::data
