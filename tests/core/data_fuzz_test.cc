// Damaged data files never crash a reader: random truncations and bit flips
// of a valid file of each format (gzipped too) end in records, a clean end,
// or an error naming the file — with bad records skipped when asked. For
// TFRecord, whose records carry checksums, every record that does come out
// is one of the originals: damage is never delivered as data.
#include <gtest/gtest.h>

#include <set>

#include "core/data/file_dataset.h"
#include "core/data/idx_reader.h"
#include "core/data/tfrecord.h"
#include "tests/core/data_test_util.h"

namespace twinps::data {
namespace {

using testing::ScratchDir;

struct Outcome {
  std::vector<std::vector<std::int64_t>> records;  // the int64 column(s) of each record read
  std::int64_t skipped = 0;
};

// Reads the whole dataset; every error must name the file. Bounded.
Outcome read_damaged(const FileDatasetSpec& spec, const std::string& file) {
  Outcome out;
  auto ds = FileDataset::create(spec, 0, 1);
  if (!ds.ok()) {
    EXPECT_NE(std::string(ds.status().message()).find(file), std::string::npos) << ds.status();
    return out;
  }
  auto it = (*ds)->make_iterator(RandomStream(1));
  for (int guard = 0; guard < 10000; ++guard) {
    auto b = it->next();
    if (!b.ok()) {
      const auto code = b.status().code();
      EXPECT_TRUE(code == StatusCode::kOutOfRange || code == StatusCode::kDataLoss ||
                  code == StatusCode::kInvalidArgument)
          << b.status();
      if (code != StatusCode::kOutOfRange) {
        EXPECT_NE(std::string(b.status().message()).find(file), std::string::npos) << b.status();
      }
      break;
    }
    for (std::int64_t i = 0; i < b->size; ++i) {
      std::vector<std::int64_t> ints;
      for (const Column& c : b->columns)
        if (c.type == ColumnType::kInt64)
          for (auto k = c.offsets[static_cast<std::size_t>(i)]; k < c.offsets[static_cast<std::size_t>(i + 1)]; ++k)
            ints.push_back(c.ints[static_cast<std::size_t>(k)]);
      out.records.push_back(ints);
    }
  }
  const ReadStats stats = it->stats();
  out.skipped = stats.records_skipped;
  for (const auto& e : stats.first_errors) EXPECT_NE(e.find(file), std::string::npos) << e;
  return out;
}

std::string damage(std::string bytes, RandomStream& random) {
  const auto mode = random.below(3);
  if (mode != 1 && !bytes.empty()) bytes.resize(random.below(bytes.size()));  // truncate
  if (mode != 0 && !bytes.empty()) {
    const auto flips = 1 + random.below(3);
    for (std::uint64_t f = 0; f < flips; ++f)
      bytes[random.below(bytes.size())] ^= static_cast<char>(1u << random.below(8));
  }
  return bytes;
}

// Runs `rounds` damaged copies of `clean` (named `name`) with and without skipping.
template <typename Check>
void fuzz(const ScratchDir& dir, const std::string& name, const std::string& clean, FileDatasetSpec spec,
          int rounds, Check check) {
  RandomStream random(12345);
  const std::string path = dir.file(name);
  spec.clear_patterns();
  spec.add_patterns(path);
  for (int round = 0; round < rounds; ++round) {
    dir.write(name, damage(clean, random));
    for (bool skip : {false, true}) {
      spec.set_skip_bad_records(skip);
      check(read_damaged(spec, path));
    }
  }
}

TEST(DataFuzzTest, TfRecordNeverDeliversDamagedRecords) {
  ScratchDir dir;
  const Schema schema{{{"a", ColumnType::kInt64, 1}, {"b", ColumnType::kInt64, 0}, {"s", ColumnType::kString, 1}}};
  std::set<std::vector<std::int64_t>> originals;
  {
    auto w = TfRecordWriter::create(dir.file("clean.tfrecord"));
    Record r;
    std::string bytes;
    for (int i = 0; i < 20; ++i) {
      r.clear(3);
      r.ints = {i, i * 7, i * 11, i * 13};
      r.strings = {"s" + std::to_string(i)};
      r.spans = {{0, 1}, {1, 4}, {0, 1}};
      encode_example(schema, r, bytes);
      ASSERT_TRUE((*w)->write(bytes).ok());
      originals.insert(r.ints);
    }
    ASSERT_TRUE((*w)->close().ok());
  }
  FileDatasetSpec spec;
  spec.set_batch_size(3);
  for (const auto& c : schema.columns) {
    auto* col = spec.add_columns();
    col->set_name(c.name);
    col->set_type(c.type == ColumnType::kInt64 ? ColumnProto::INT64 : ColumnProto::STRING);
    col->set_width(c.width);
  }
  fuzz(dir, "damaged.tfrecord", dir.read("clean.tfrecord"), spec, 150, [&](const Outcome& o) {
    EXPECT_LE(static_cast<std::int64_t>(o.records.size()) + o.skipped, 20);
    for (const auto& r : o.records) EXPECT_TRUE(originals.count(r)) << "a damaged record was delivered";
  });
}

TEST(DataFuzzTest, IdxPlainAndGzippedSurviveDamage) {
  ScratchDir dir;
  std::vector<std::uint8_t> pixels(30 * 16), labels(30);
  for (std::size_t i = 0; i < pixels.size(); ++i) pixels[i] = static_cast<std::uint8_t>(i * 7);
  for (std::size_t i = 0; i < labels.size(); ++i) labels[i] = static_cast<std::uint8_t>(i % 10);
  ASSERT_TRUE(write_idx_ubyte(dir.file("clean-images-idx3-ubyte"), {30, 4, 4}, pixels).ok());
  ASSERT_TRUE(write_idx_ubyte(dir.file("clean-images-idx3-ubyte.gz"), {30, 4, 4}, pixels).ok());
  ASSERT_TRUE(write_idx_ubyte(dir.file("labels-idx1-ubyte"), {30}, labels).ok());
  FileDatasetSpec spec;
  spec.set_batch_size(4);
  spec.mutable_idx()->add_labels_patterns(dir.file("labels-idx1-ubyte"));
  for (const std::string suffix : {"", ".gz"}) {
    fuzz(dir, "damaged-images-idx3-ubyte" + suffix, dir.read("clean-images-idx3-ubyte" + suffix), spec, 100,
         [&](const Outcome& o) { EXPECT_LE(static_cast<std::int64_t>(o.records.size()) + o.skipped, 30); });
  }
}

TEST(DataFuzzTest, CsvAndLibSvmSurviveDamage) {
  ScratchDir dir;
  std::string csv = "id,name,v\n", svm;
  for (int i = 0; i < 40; ++i) {
    csv += std::to_string(i) + ",\"n, " + std::to_string(i) + "\"," + std::to_string(i * 0.5) + " 1\n";
    svm += std::to_string(i % 2) + " qid:" + std::to_string(i) + " 1:" + std::to_string(i) + " 9:0.5 # c\n";
  }
  FileDatasetSpec csv_spec;
  csv_spec.set_batch_size(5);
  auto* id = csv_spec.add_columns();
  id->set_name("id");
  id->set_type(ColumnProto::INT64);
  auto* name = csv_spec.add_columns();
  name->set_name("name");
  name->set_type(ColumnProto::STRING);
  auto* v = csv_spec.add_columns();
  v->set_name("v");
  v->set_width(2);
  fuzz(dir, "damaged.csv", csv, csv_spec, 150, [](const Outcome&) {});
  fuzz(dir, "damaged.csv.gz", csv, csv_spec, 20, [](const Outcome&) {});  // not gzip at all: read as text
  FileDatasetSpec svm_spec;
  svm_spec.set_batch_size(5);
  svm_spec.mutable_libsvm()->set_qid_column("qid");
  fuzz(dir, "damaged.svm", svm, svm_spec, 150, [](const Outcome&) {});
}

}  // namespace
}  // namespace twinps::data
