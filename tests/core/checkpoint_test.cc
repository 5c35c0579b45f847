// Checkpoints: CRC-32C, the file framing, both storages, and the manager's
// save / keep-N / restore with resharding (values and optimizer slots) and
// refusal of damaged files.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "core/checkpoint/checkpoint_file.h"
#include "core/checkpoint/checkpoint_manager.h"
#include "core/checkpoint/crc32c.h"
#include "core/checkpoint/storage.h"
#include "core/ps/parameter_store.h"

namespace twinps {
namespace {

namespace fs = std::filesystem;

bool contains(const Status& s, const std::string& text) {
  return std::string(s.message()).find(text) != std::string::npos;
}

// ---------------------------------------------------------------- CRC-32C

TEST(Crc32cTest, MatchesTheStandardCheckValueAndExtends) {
  EXPECT_EQ(crc32c("123456789"), 0xE3069283u);
  EXPECT_EQ(crc32c(""), 0u);
  EXPECT_EQ(crc32c_extend(crc32c("12345"), "6789", 4), 0xE3069283u);
  EXPECT_NE(crc32c("123456780"), 0xE3069283u);
  EXPECT_EQ(detail::crc32c_extend_bytewise(0, "123456789", 9), 0xE3069283u);
}

TEST(Crc32cTest, FastPathAgreesWithTheTableAtEveryLengthAndAlignment) {
  std::string bytes(300, '\0');
  std::uint64_t x = 0x9e3779b97f4a7c15ull;
  for (char& c : bytes) c = static_cast<char>((x = x * 6364136223846793005ull + 1442695040888963407ull) >> 56);
  for (std::size_t offset = 0; offset < 8; ++offset)
    for (std::size_t size = 0; size + offset <= bytes.size(); size += (size < 24 ? 1 : 37)) {
      const char* p = bytes.data() + offset;
      ASSERT_EQ(crc32c(p, size), detail::crc32c_extend_bytewise(0, p, size)) << offset << " " << size;
      ASSERT_EQ(crc32c_extend(0x12345678u, p, size), detail::crc32c_extend_bytewise(0x12345678u, p, size));
    }
}

// The fast path runs data of three lanes (3 x 128 and 3 x 2048 bytes) as
// three independent streams and joins them: every size around those
// boundaries, and a mix of long lanes, short lanes and a tail.
TEST(Crc32cTest, InterleavedLanesAgreeWithTheTableAroundEveryBoundary) {
  std::string bytes(20000, '\0');
  std::uint64_t x = 0x2545f4914f6cdd1dull;
  for (char& c : bytes) c = static_cast<char>((x = x * 6364136223846793005ull + 1442695040888963407ull) >> 56);
  for (std::size_t base : {384u, 768u, 6144u, 6144u + 384u, 12288u + 768u})
    for (std::size_t size = base - 9; size <= base + 9; ++size)
      for (std::size_t offset : {0u, 3u}) {
        const char* p = bytes.data() + offset;
        ASSERT_EQ(crc32c(p, size), detail::crc32c_extend_bytewise(0, p, size)) << offset << " " << size;
        ASSERT_EQ(crc32c_extend(0xdeadbeefu, p, size), detail::crc32c_extend_bytewise(0xdeadbeefu, p, size));
      }
  EXPECT_EQ(crc32c_extend(crc32c(bytes.data(), 7000), bytes.data() + 7000, 13000), crc32c(bytes));
}

// ---------------------------------------------------------------- framing

TEST(CheckpointFileTest, RoundTrips) {
  const std::string framed = frame_checkpoint("payload bytes");
  EXPECT_EQ(framed.size(), kCheckpointHeaderSize + 13);
  auto payload = unframe_checkpoint(framed, "f");
  ASSERT_TRUE(payload.ok()) << payload.status();
  EXPECT_EQ(*payload, "payload bytes");
  EXPECT_TRUE(unframe_checkpoint(frame_checkpoint(""), "f").ok());
}

TEST(CheckpointFileTest, EveryTruncationIsDataLossNamingTheFile) {
  const std::string framed = frame_checkpoint("some payload");
  for (std::size_t n = 0; n < framed.size(); ++n) {
    auto r = unframe_checkpoint(std::string_view(framed).substr(0, n), "/ckpt/model-7");
    ASSERT_FALSE(r.ok()) << n;
    EXPECT_EQ(r.status().code(), StatusCode::kDataLoss) << n;
    EXPECT_TRUE(contains(r.status(), "'/ckpt/model-7'")) << r.status();
    EXPECT_TRUE(contains(r.status(), "truncated")) << r.status();
  }
  auto longer = unframe_checkpoint(framed + "x", "f");
  EXPECT_EQ(longer.status().code(), StatusCode::kDataLoss);
  EXPECT_TRUE(contains(longer.status(), "beyond")) << longer.status();
}

TEST(CheckpointFileTest, WrongMagicIsDataLoss) {
  std::string framed = frame_checkpoint("p");
  framed[0] = 'X';
  auto r = unframe_checkpoint(framed, "f");
  EXPECT_EQ(r.status().code(), StatusCode::kDataLoss);
  EXPECT_TRUE(contains(r.status(), "wrong magic")) << r.status();
  EXPECT_EQ(unframe_checkpoint("{\"not\": \"a checkpoint\"}", "f").status().code(), StatusCode::kDataLoss);
}

TEST(CheckpointFileTest, AFlippedBitAnywhereIsDataLoss) {
  const std::string framed = frame_checkpoint("a small payload to corrupt");
  for (std::size_t i = 0; i < framed.size(); ++i) {
    for (int bit : {0, 7}) {
      std::string bad = framed;
      bad[i] = static_cast<char>(bad[i] ^ (1 << bit));
      auto r = unframe_checkpoint(bad, "f");
      ASSERT_FALSE(r.ok()) << "byte " << i << " bit " << bit;
      EXPECT_EQ(r.status().code(), StatusCode::kDataLoss) << "byte " << i << ": " << r.status();
    }
  }
}

TEST(CheckpointFileTest, AnotherFormatVersionIsFailedPrecondition) {
  std::string framed = frame_checkpoint("p");
  framed[8] = 2;  // version 2, then fix the checksum so only the version differs
  const std::uint32_t crc = crc32c_extend(crc32c(framed.data() + 8, 12), "p", 1);
  for (int i = 0; i < 4; ++i) framed[20 + i] = static_cast<char>((crc >> (8 * i)) & 0xff);
  auto r = unframe_checkpoint(framed, "f");
  EXPECT_EQ(r.status().code(), StatusCode::kFailedPrecondition) << r.status();
  EXPECT_TRUE(contains(r.status(), "version 2")) << r.status();
}

// ---------------------------------------------------------------- storage

class TempDir {
 public:
  TempDir() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    path_ = fs::path(::testing::TempDir()) /
            ("twinps_" + std::string(info->test_suite_name()) + "_" + info->name() + "_" + std::to_string(::getpid()));
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  std::string str() const { return path_.string(); }
  fs::path path() const { return path_; }

 private:
  fs::path path_;
};

void exercise_storage(CheckpointStorage& s) {
  ASSERT_TRUE(s.write_atomic("b", "second").ok());
  ASSERT_TRUE(s.write_atomic("a", "first").ok());
  ASSERT_TRUE(s.write_atomic("a", "first, replaced").ok());
  EXPECT_EQ(*s.read("a"), "first, replaced");
  EXPECT_EQ(*s.list(), (std::vector<std::string>{"a", "b"}));
  ASSERT_TRUE(s.remove("b").ok());
  EXPECT_EQ(s.read("b").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(s.remove("b").code(), StatusCode::kNotFound);
  EXPECT_EQ(*s.list(), (std::vector<std::string>{"a"}));
  for (const char* bad : {"", "x/y", ".hidden"}) EXPECT_EQ(s.write_atomic(bad, "z").code(), StatusCode::kInvalidArgument);
}

TEST(StorageTest, InMemoryWritesReadsListsAndRemoves) {
  InMemoryStorage s;
  exercise_storage(s);
}

TEST(StorageTest, LocalDiskWritesReadsListsAndRemoves) {
  TempDir dir;
  auto s = LocalDiskStorage::open(dir.str());
  ASSERT_TRUE(s.ok()) << s.status();
  exercise_storage(**s);
  EXPECT_EQ((*s)->describe("a"), dir.str() + "/a");
}

TEST(StorageTest, LocalDiskOpenCreatesTheDirectory) {
  TempDir dir;
  auto s = LocalDiskStorage::open(dir.str() + "/nested/deeper");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_TRUE(fs::is_directory(dir.path() / "nested" / "deeper"));
}

TEST(StorageTest, LocalDiskErrorsNameTheMissingOrUnusablePath) {
  TempDir dir;
  const std::string missing = dir.str() + "/does-not-exist";
  auto opened = LocalDiskStorage::open(missing, /*create=*/false);
  EXPECT_EQ(opened.status().code(), StatusCode::kNotFound);
  EXPECT_TRUE(contains(opened.status(), missing)) << opened.status();

  LocalDiskStorage s(missing);
  Status w = s.write_atomic("ckpt-1", "x");
  EXPECT_EQ(w.code(), StatusCode::kNotFound);
  EXPECT_TRUE(contains(w, missing)) << w;
  EXPECT_EQ(s.list().status().code(), StatusCode::kNotFound);
  auto r = s.read("ckpt-1");
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
  EXPECT_TRUE(contains(r.status(), missing + "/ckpt-1")) << r.status();

  const std::string file = dir.str() + "/a-file";
  std::ofstream(file) << "not a directory";
  auto not_dir = LocalDiskStorage::open(file, false);
  EXPECT_EQ(not_dir.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_TRUE(contains(not_dir.status(), file)) << not_dir.status();
  EXPECT_FALSE(LocalDiskStorage::open(file + "/sub", true).ok());
}

TEST(StorageTest, AnInterruptedWriteLeavesNoPartialFileUnderTheFinalName) {
  TempDir dir;
  LocalDiskStorage s(dir.str());
  const std::string old_content(1000, 'o');
  ASSERT_TRUE(s.write_atomic("ckpt-1", old_content).ok());

  s.fail_next_write_after_for_testing(100);
  Status failed = s.write_atomic("ckpt-1", std::string(5000, 'n'));
  EXPECT_FALSE(failed.ok());
  EXPECT_EQ(*s.read("ckpt-1"), old_content) << "the old version is intact";

  s.fail_next_write_after_for_testing(10);
  EXPECT_FALSE(s.write_atomic("ckpt-2", std::string(5000, 'n')).ok());
  EXPECT_EQ(s.read("ckpt-2").status().code(), StatusCode::kNotFound);
  EXPECT_FALSE(fs::exists(dir.path() / "ckpt-2"));
  // The partial temporary file is left behind (as after a crash) but never listed.
  EXPECT_TRUE(fs::exists(dir.path() / ".ckpt-2.tmp"));
  EXPECT_EQ(*s.list(), (std::vector<std::string>{"ckpt-1"}));

  ASSERT_TRUE(s.write_atomic("ckpt-2", "complete").ok());
  EXPECT_EQ(*s.read("ckpt-2"), "complete");
  EXPECT_FALSE(fs::exists(dir.path() / ".ckpt-2.tmp"));
}

// ---------------------------------------------------------------- manager helpers

// A layout whose shards hold `rows_per_shard` rows each, with ids from `first_id`.
VariableLayout layout(std::string name, Shape shape, VariableKind kind, std::vector<std::int64_t> rows_per_shard,
                      ShardId first_id) {
  VariableLayout l;
  l.name = std::move(name);
  l.shape = std::move(shape);
  l.kind = kind;
  std::int64_t offset = 0;
  for (std::size_t i = 0; i < rows_per_shard.size(); ++i) {
    l.shards.push_back(ShardPlacement{first_id + static_cast<ShardId>(i), static_cast<int>(i % 2), offset,
                                      rows_per_shard[i]});
    offset += rows_per_shard[i];
  }
  return l;
}

// Cuts a full value (and full slots) into the states of `l`'s shards.
std::vector<ShardState> states(const VariableLayout& l, const Matrix& full, const std::vector<Matrix>& full_slots = {},
                               std::vector<std::int64_t> steps = {}) {
  std::vector<ShardState> out;
  for (std::size_t i = 0; i < l.shards.size(); ++i) {
    const auto& p = l.shards[i];
    ShardState s;
    s.spec = ShardSpec{p.id, l.shard_name(i), l.kind, p.rows, l.cols()};
    s.value = full.middleRows(p.row_offset, p.rows);
    for (const auto& slot : full_slots) s.slots.push_back(slot.middleRows(p.row_offset, p.rows));
    s.step = steps.empty() ? 0 : steps[i];
    out.push_back(std::move(s));
  }
  return out;
}

Matrix column(std::initializer_list<float> v) {
  Matrix m(static_cast<Eigen::Index>(v.size()), 1);
  Eigen::Index i = 0;
  for (float x : v) m(i++, 0) = x;
  return m;
}

OptimizerConfig adam() {
  OptimizerConfig c;
  c.kind = OptimizerConfig::Kind::kAdam;
  c.learning_rate = LearningRateSchedule::constant(0.1);
  return c;
}

template <typename T>
std::vector<T> concat(std::vector<T> a, const std::vector<T>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// ---------------------------------------------------------------- manager

TEST(CheckpointManagerTest, SavesAndRestoresEveryKindOfVariable) {
  InMemoryStorage storage;
  CheckpointManager manager(storage, 3, "model");
  const auto emb = layout("emb", {4, 2}, VariableKind::kTrainable, {2, 2}, 1);
  const auto loss = layout("loss_sum", {}, VariableKind::kAccumulator, {1}, 3);
  const auto iters = layout("iterations", {}, VariableKind::kCounter, {1}, 4);
  Matrix value(4, 2);
  value << 1, 2, 3, 4, 5, 6, 7, 8;
  std::vector<ShardState> saved = concat(states(emb, value, {value * 10, value * 100}, {3, 5}),
                                         states(loss, column({2.5f})));
  ShardState counter;
  counter.spec = ShardSpec{4, "iterations", VariableKind::kCounter, 1, 1};
  counter.counter = 17;
  saved.push_back(counter);

  auto name = manager.save(17, {emb, loss, iters}, saved, adam(), {{"epoch", "3"}});
  ASSERT_TRUE(name.ok()) << name.status();
  EXPECT_EQ(*name, "model-17");

  auto r = manager.restore_latest({emb, loss, iters}, adam());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->name, "model-17");
  EXPECT_EQ(r->step, 17);
  EXPECT_EQ(r->metadata.at("epoch"), "3");
  EXPECT_TRUE(r->refused.empty());
  ASSERT_EQ(r->shards.size(), saved.size());
  for (std::size_t i = 0; i < saved.size(); ++i) {
    SCOPED_TRACE(saved[i].spec.name);
    EXPECT_EQ(r->shards[i].spec.id, saved[i].spec.id);
    EXPECT_EQ(r->shards[i].spec.name, saved[i].spec.name);
    EXPECT_EQ(r->shards[i].spec.kind, saved[i].spec.kind);
    EXPECT_EQ(r->shards[i].value, saved[i].value);
    EXPECT_EQ(r->shards[i].slots, saved[i].slots);
    EXPECT_EQ(r->shards[i].step, saved[i].step);
    EXPECT_EQ(r->shards[i].counter, saved[i].counter);
  }
}

// Spec P9: [1,2,3,4] saved with 2 shards restores with 4 shards as [1],[2],[3],[4];
// unlike TensorFlow (L9) the optimizer slots follow.
TEST(CheckpointManagerTest, RestoresIntoADifferentShardCountIncludingSlots) {
  InMemoryStorage storage;
  CheckpointManager manager(storage, 1);
  const auto two = layout("v", {4}, VariableKind::kTrainable, {2, 2}, 10);
  const Matrix full = column({1, 2, 3, 4});
  ASSERT_TRUE(manager.save(5, {two}, states(two, full, {full * 10, full * 100}, {3, 5}), adam()).ok());

  const auto four = layout("v", {4}, VariableKind::kTrainable, {1, 1, 1, 1}, 20);
  auto r = manager.restore_latest({four}, adam());
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->shards.size(), 4u);
  for (int i = 0; i < 4; ++i) {
    const ShardState& s = r->shards[static_cast<std::size_t>(i)];
    EXPECT_EQ(s.spec.id, 20u + static_cast<ShardId>(i));
    EXPECT_EQ(s.spec.name, "v/part_" + std::to_string(i));
    EXPECT_EQ(s.spec.rows, 1);
    EXPECT_EQ(s.value, column({float(i + 1)}));
    ASSERT_EQ(s.slots.size(), 2u);
    EXPECT_EQ(s.slots[0], column({float(10 * (i + 1))}));
    EXPECT_EQ(s.slots[1], column({float(100 * (i + 1))}));
    EXPECT_EQ(s.step, i < 2 ? 3 : 5);
  }

  // And uneven cuts: 5x2 saved as [3,2], restored as [2,2,1]. The middle shard
  // takes rows from both slices, and the larger of their steps.
  InMemoryStorage storage2;
  CheckpointManager m2(storage2, 1);
  const auto saved_layout = layout("w", {5, 2}, VariableKind::kTrainable, {3, 2}, 1);
  Matrix w(5, 2);
  w << 0, 1, 2, 3, 4, 5, 6, 7, 8, 9;
  ASSERT_TRUE(m2.save(1, {saved_layout}, states(saved_layout, w, {-w, w * 2}, {7, 4}), adam()).ok());
  const auto target = layout("w", {5, 2}, VariableKind::kTrainable, {2, 2, 1}, 1);
  auto r2 = m2.restore_latest({target}, adam());
  ASSERT_TRUE(r2.ok()) << r2.status();
  ASSERT_EQ(r2->shards.size(), 3u);
  EXPECT_EQ(r2->shards[1].value, w.middleRows(2, 2));
  EXPECT_EQ(r2->shards[1].slots[0], Matrix(-w.middleRows(2, 2)));
  EXPECT_EQ(r2->shards[2].slots[1], Matrix(w.middleRows(4, 1) * 2));
  EXPECT_EQ(r2->shards[0].step, 7);
  EXPECT_EQ(r2->shards[1].step, 7);
  EXPECT_EQ(r2->shards[2].step, 4);
}

// Resharding mid-training changes nothing: 2 steps on 2 shards, checkpoint,
// restore into 4 shards, a 3rd step == 3 steps on one unsharded variable.
TEST(CheckpointManagerTest, TrainingResumesIdenticallyAfterResharding) {
  Matrix init(4, 2);
  init << 1, -1, 2, -2, 3, -3, 4, -4;
  std::vector<Matrix> grads;
  for (int k = 0; k < 3; ++k) grads.push_back(Matrix::Constant(4, 2, 0.1f * float(k + 1)) + init * 0.01f);

  auto create = [](ParameterStore& store, const VariableLayout& l, std::vector<ShardState> shards) {
    CreateShardsRequest req;
    req.optimizer = adam();
    req.replace_existing = true;
    req.shards = std::move(shards);
    ASSERT_TRUE(store.create_shards(req).ok());
    (void)l;
  };
  auto step = [](ParameterStore& store, const VariableLayout& l, const Matrix& g) {
    PushRequest p;
    for (const auto& s : l.shards) {
      Update u;
      u.shard = s.id;
      u.values = g.middleRows(s.row_offset, s.rows);
      p.updates.push_back(u);
    }
    ASSERT_TRUE(store.push(p).ok());
  };

  const auto one = layout("w", {4, 2}, VariableKind::kTrainable, {4}, 1);
  ParameterStore reference;
  create(reference, one, states(one, init));
  for (const auto& g : grads) step(reference, one, g);

  const auto two = layout("w", {4, 2}, VariableKind::kTrainable, {2, 2}, 1);
  ParameterStore before;
  create(before, two, states(two, init));
  step(before, two, grads[0]);
  step(before, two, grads[1]);
  InMemoryStorage storage;
  CheckpointManager manager(storage, 2);
  ASSERT_TRUE(manager.save(2, {two}, before.export_shards({})->shards, adam()).ok());

  const auto four = layout("w", {4, 2}, VariableKind::kTrainable, {1, 1, 1, 1}, 11);
  auto restored = manager.restore_latest({four}, adam());
  ASSERT_TRUE(restored.ok()) << restored.status();
  ParameterStore after;
  create(after, four, restored->shards);
  step(after, four, grads[2]);

  const Matrix want = reference.export_shards({})->shards[0].value;
  auto got = after.export_shards({});
  for (std::size_t i = 0; i < 4; ++i)
    for (Eigen::Index c = 0; c < 2; ++c)
      EXPECT_FLOAT_EQ(got->shards[i].value(0, c), want(static_cast<Eigen::Index>(i), c));
}

TEST(CheckpointManagerTest, KeepsTheNewestNAndListsByStep) {
  InMemoryStorage storage;
  CheckpointManager manager(storage, 2, "ckpt");
  const auto v = layout("v", {2}, VariableKind::kAccumulator, {2}, 1);
  ASSERT_TRUE(storage.write_atomic("notes.txt", "x").ok());
  ASSERT_TRUE(storage.write_atomic("ckpt-latest", "x").ok());
  ASSERT_TRUE(storage.write_atomic("other-5", "x").ok());
  for (std::int64_t step : {9, 10, 2, 11})
    ASSERT_TRUE(manager.save(step, {v}, states(v, column({1, 2})), OptimizerConfig{}).ok()) << step;
  auto list = manager.list();
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->size(), 2u);
  EXPECT_EQ((*list)[0].name, "ckpt-10");  // numeric order: 10 after 9, and 2 was removed
  EXPECT_EQ((*list)[1].name, "ckpt-11");
  EXPECT_EQ((*list)[1].step, 11);
  EXPECT_EQ(storage.list()->size(), 5u) << "files of other names are left alone";

  CheckpointManager keep_all(storage, 0, "all");
  for (std::int64_t step : {1, 2, 3}) ASSERT_TRUE(keep_all.save(step, {v}, states(v, column({1, 2})), {}).ok());
  EXPECT_EQ(keep_all.list()->size(), 3u);
}

void flip_byte(std::string& bytes) { bytes[bytes.size() / 2] ^= 0x10; }
void truncate(std::string& bytes) { bytes.resize(bytes.size() - 7); }
void wrong_magic(std::string& bytes) { bytes.replace(0, 4, "JUNK"); }

TEST(CheckpointManagerTest, ACorruptNewestCheckpointIsRefusedAndThePreviousUsed) {
  const auto v = layout("v", {3}, VariableKind::kTrainable, {3}, 1);
  struct Case {
    const char* what;
    void (*damage)(std::string&);
    const char* reason;
  };
  for (const Case& c : {Case{"flipped byte", flip_byte, "checksum"}, Case{"truncated", truncate, "truncated"},
                        Case{"wrong magic", wrong_magic, "wrong magic"}}) {
    SCOPED_TRACE(c.what);
    InMemoryStorage storage;
    CheckpointManager manager(storage, 5);
    ASSERT_TRUE(manager.save(1, {v}, states(v, column({1, 1, 1})), OptimizerConfig{}).ok());
    ASSERT_TRUE(manager.save(2, {v}, states(v, column({2, 2, 2})), OptimizerConfig{}).ok());
    c.damage(*storage.mutable_bytes("ckpt-2"));

    auto direct = manager.restore("ckpt-2", {v}, OptimizerConfig{});
    EXPECT_EQ(direct.status().code(), StatusCode::kDataLoss);

    auto r = manager.restore_latest({v}, OptimizerConfig{});
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->name, "ckpt-1");
    EXPECT_EQ(r->shards[0].value, column({1, 1, 1}));
    ASSERT_EQ(r->refused.size(), 1u);
    EXPECT_EQ(r->refused[0].name, "ckpt-2");
    EXPECT_EQ(r->refused[0].reason.code(), StatusCode::kDataLoss);
    EXPECT_TRUE(contains(r->refused[0].reason, "memory:ckpt-2")) << r->refused[0].reason;
    EXPECT_TRUE(contains(r->refused[0].reason, c.reason)) << r->refused[0].reason;
  }
}

TEST(CheckpointManagerTest, NoCheckpointIsNotFoundAndAllCorruptIsDataLoss) {
  InMemoryStorage storage;
  CheckpointManager manager(storage, 5);
  const auto v = layout("v", {1}, VariableKind::kTrainable, {1}, 1);
  EXPECT_EQ(manager.restore_latest({v}, OptimizerConfig{}).status().code(), StatusCode::kNotFound);

  ASSERT_TRUE(manager.save(1, {v}, states(v, column({1})), OptimizerConfig{}).ok());
  ASSERT_TRUE(manager.save(2, {v}, states(v, column({2})), OptimizerConfig{}).ok());
  flip_byte(*storage.mutable_bytes("ckpt-1"));
  truncate(*storage.mutable_bytes("ckpt-2"));
  auto r = manager.restore_latest({v}, OptimizerConfig{});
  EXPECT_EQ(r.status().code(), StatusCode::kDataLoss);
  EXPECT_TRUE(contains(r.status(), "ckpt-1") && contains(r.status(), "ckpt-2")) << r.status();
}

TEST(CheckpointManagerTest, ACheckpointThatDoesNotFitTheTargetIsFailedPreconditionNamingTheVariable) {
  InMemoryStorage storage;
  CheckpointManager manager(storage, 5);
  const auto emb = layout("emb", {4, 2}, VariableKind::kTrainable, {2, 2}, 1);
  const auto bias = layout("bias", {2}, VariableKind::kTrainable, {2}, 3);
  Matrix e = Matrix::Ones(4, 2);
  ASSERT_TRUE(manager
                  .save(1, {emb, bias},
                        concat(states(emb, e, {e, e}), states(bias, column({1, 1}), {column({0, 0}), column({0, 0})})),
                        adam())
                  .ok());

  auto expect_mismatch = [&](std::vector<VariableLayout> targets, const OptimizerConfig& opt, const std::string& name,
                             const std::string& why) {
    auto r = manager.restore_latest(targets, opt);
    EXPECT_EQ(r.status().code(), StatusCode::kFailedPrecondition) << why;
    EXPECT_TRUE(contains(r.status(), "'" + name + "'")) << r.status();
    EXPECT_TRUE(contains(r.status(), why)) << r.status();
  };
  expect_mismatch({emb, layout("kernel", {2}, VariableKind::kTrainable, {2}, 5)}, adam(), "kernel", "no such variable");
  expect_mismatch({layout("emb", {4, 3}, VariableKind::kTrainable, {4}, 1)}, adam(), "emb", "(4,2)");
  OptimizerConfig momentum;
  momentum.momentum = 0.9;
  expect_mismatch({bias}, momentum, "bias", "2 optimizer slots (m, v)");
  expect_mismatch({layout("bias", {2}, VariableKind::kAccumulator, {2}, 3)}, adam(), "bias", "kind");

  // A subset of the saved variables restores; the rest are reported unused.
  auto r = manager.restore_latest({bias}, adam());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->unused_variables, (std::vector<std::string>{"emb"}));
}

TEST(CheckpointManagerTest, SaveRefusesIncompleteStateAndWritesNothing) {
  InMemoryStorage storage;
  CheckpointManager manager(storage, 5);
  const auto emb = layout("emb", {4, 2}, VariableKind::kTrainable, {2, 2}, 1);
  auto shards = states(emb, Matrix::Ones(4, 2), {Matrix::Ones(4, 2), Matrix::Ones(4, 2)});

  auto missing = manager.save(1, {emb}, {shards[0]}, adam());
  EXPECT_EQ(missing.status().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(contains(missing.status(), "'emb' shard 1 (id 2)")) << missing.status();

  auto no_slots = manager.save(1, {emb}, states(emb, Matrix::Ones(4, 2)), adam());
  EXPECT_EQ(no_slots.status().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(contains(no_slots.status(), "optimizer slots")) << no_slots.status();

  EXPECT_EQ(manager.save(-1, {emb}, shards, adam()).status().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(storage.list()->empty());

  storage.fail_next_writes(absl::UnavailableError("disk gone"));
  EXPECT_EQ(manager.save(1, {emb}, shards, adam()).status().code(), StatusCode::kUnavailable);
  EXPECT_TRUE(storage.list()->empty());
}

TEST(CheckpointManagerTest, OnDiskATruncatedNewestFileFallsBackToThePrevious) {
  TempDir dir;
  auto storage = LocalDiskStorage::open(dir.str());
  ASSERT_TRUE(storage.ok()) << storage.status();
  CheckpointManager manager(**storage, 3);
  const auto v = layout("v", {2, 2}, VariableKind::kTrainable, {1, 1}, 1);
  ASSERT_TRUE(manager.save(100, {v}, states(v, Matrix::Constant(2, 2, 1)), OptimizerConfig{}).ok());
  ASSERT_TRUE(manager.save(200, {v}, states(v, Matrix::Constant(2, 2, 2)), OptimizerConfig{}).ok());
  fs::resize_file(dir.path() / "ckpt-200", fs::file_size(dir.path() / "ckpt-200") / 2);
  std::ofstream(dir.path() / ".ckpt-300.tmp") << "a write that never finished";

  auto r = manager.restore_latest({v}, OptimizerConfig{});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->step, 100);
  EXPECT_EQ(r->shards[1].value, Matrix::Constant(1, 2, 1));
  ASSERT_EQ(r->refused.size(), 1u);
  EXPECT_TRUE(contains(r->refused[0].reason, dir.str() + "/ckpt-200")) << r->refused[0].reason;
  EXPECT_TRUE(contains(r->refused[0].reason, "truncated")) << r->refused[0].reason;
}

// A copied or renamed file must not pass for the newest checkpoint: the step
// recorded inside a verified file decides, and keep-N neither counts nor
// removes a file whose name disagrees with its content (issue 9, point 2).
TEST(CheckpointManagerTest, ANameThatDisagreesWithItsContentIsRefusedAndNeverCountedForKeepN) {
  TempDir dir;
  auto storage = LocalDiskStorage::open(dir.str());
  ASSERT_TRUE(storage.ok()) << storage.status();
  CheckpointManager manager(**storage, 3);
  const auto v = layout("v", {2}, VariableKind::kTrainable, {2}, 1);
  for (std::int64_t step : {20, 40, 60})
    ASSERT_TRUE(manager.save(step, {v}, states(v, column({float(step), 0})), OptimizerConfig{}).ok()) << step;
  fs::copy_file(dir.path() / "ckpt-60", dir.path() / "ckpt-9223372036854775807");
  fs::copy_file(dir.path() / "ckpt-40", dir.path() / "ckpt-80");

  auto r = manager.restore_latest({v}, OptimizerConfig{});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->name, "ckpt-60");
  EXPECT_EQ(r->step, 60);
  ASSERT_EQ(r->refused.size(), 2u);
  EXPECT_EQ(r->refused[0].name, "ckpt-9223372036854775807");
  EXPECT_EQ(r->refused[0].reason.code(), StatusCode::kDataLoss);
  EXPECT_TRUE(contains(r->refused[0].reason, "named for step 9223372036854775807 but records step 60"))
      << r->refused[0].reason;
  EXPECT_EQ(r->refused[1].name, "ckpt-80");
  EXPECT_TRUE(contains(r->refused[1].reason, "named for step 80 but records step 40")) << r->refused[1].reason;
  EXPECT_EQ(manager.restore("ckpt-80", {v}, OptimizerConfig{}).status().code(), StatusCode::kDataLoss);
  EXPECT_EQ(manager.verified_step("ckpt-60").value_or(-1), 60);

  // keep 3: the real 20 goes, the real 40 and 60 stay; the misnamed files are
  // not counted (they would have pushed out 20, 40 and 60) and are left alone.
  ASSERT_TRUE(manager.save(70, {v}, states(v, column({70, 0})), OptimizerConfig{}).ok());
  for (const char* kept : {"ckpt-40", "ckpt-60", "ckpt-70", "ckpt-80", "ckpt-9223372036854775807"})
    EXPECT_TRUE(fs::exists(dir.path() / kept)) << kept;
  EXPECT_FALSE(fs::exists(dir.path() / "ckpt-20"));
  auto latest = manager.restore_latest({v}, OptimizerConfig{});
  ASSERT_TRUE(latest.ok()) << latest.status();
  EXPECT_EQ(latest->name, "ckpt-70");
  EXPECT_EQ(latest->shards[0].value, column({70, 0}));
}

}  // namespace
}  // namespace twinps
