// The file readers: CSV, LibSVM, IDX and TFRecord each parse hand-made files
// correctly and name the file and the record (or line and column) in every
// error.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>

#include "core/checkpoint/crc32c.h"
#include "core/data/csv_reader.h"
#include "core/data/idx_reader.h"
#include "core/data/libsvm_reader.h"
#include "core/data/tfrecord.h"
#include "data/example.pb.h"
#include "tests/core/data_test_util.h"

namespace twinps::data {
namespace {

using testing::contains;
using testing::floats;
using testing::ints;
using testing::read_all;
using testing::ScratchDir;
using testing::strings;
using ::testing::ElementsAre;

Schema make_schema(std::vector<ColumnSpec> columns) { return Schema{std::move(columns)}; }

// ---------------------------------------------------------------- CSV

TEST(CsvReaderTest, ReadsTypedColumnsQuotedFieldsAndLists) {
  ScratchDir dir;
  const auto path = dir.write("a.csv",
                              "id,name,price,unused,tags\n"
                              "1,plain,2.5,x,3 4 5\n"
                              "\r\n"
                              "-2,\"with, comma\",  -1e3 ,y,\n"
                              "+3,\"say \"\"hi\"\"\nand more\",0.25,z,7\r\n");
  auto reader = CsvReader::open(path, 4,
                                make_schema({{"price", ColumnType::kFloat, 1},
                                             {"id", ColumnType::kInt64, 1},
                                             {"name", ColumnType::kString, 1},
                                             {"tags", ColumnType::kInt64, 0}}),
                                CsvOptions());
  ASSERT_TRUE(reader.ok()) << reader.status();
  auto records = read_all(**reader);
  ASSERT_EQ(records.size(), 3u);
  EXPECT_THAT(floats(records[0], 0), ElementsAre(2.5f));
  EXPECT_THAT(ints(records[0], 1), ElementsAre(1));
  EXPECT_THAT(strings(records[0], 2), ElementsAre("plain"));
  EXPECT_THAT(ints(records[0], 3), ElementsAre(3, 4, 5));
  EXPECT_THAT(floats(records[1], 0), ElementsAre(-1000.0f));
  EXPECT_THAT(strings(records[1], 2), ElementsAre("with, comma"));
  EXPECT_TRUE(ints(records[1], 3).empty());
  EXPECT_THAT(ints(records[2], 1), ElementsAre(3));
  EXPECT_THAT(strings(records[2], 2), ElementsAre("say \"hi\"\nand more"));
  // Origins: file index, record number and first line (the blank line 3 is no record).
  EXPECT_EQ(records[1].origin.file, 4);
  EXPECT_EQ(records[1].origin.record, 2);
  EXPECT_EQ(records[1].origin.line, 4);
  EXPECT_EQ(records[2].origin.line, 5);
}

TEST(CsvReaderTest, FixedWidthColumnFromOneFieldOrNumberedFields) {
  ScratchDir dir;
  const Schema schema = make_schema({{"x", ColumnType::kFloat, 3}, {"y", ColumnType::kInt64, 1}});
  const auto one_field = dir.write("one.csv", "y,x\n1,0.5 1.5 2.5\n");
  auto r1 = CsvReader::open(one_field, 0, schema, CsvOptions());
  ASSERT_TRUE(r1.ok()) << r1.status();
  auto a = read_all(**r1);
  ASSERT_EQ(a.size(), 1u);
  EXPECT_THAT(floats(a[0], 0), ElementsAre(0.5f, 1.5f, 2.5f));

  // Numbered columns, in any header order; a tab as delimiter.
  const auto numbered = dir.write("n.tsv", "x_2\ty\tx_0\tx_1\n2.5\t1\t0.5\t1.5\n");
  CsvOptions tsv;
  tsv.set_delimiter("\t");
  auto r2 = CsvReader::open(numbered, 0, schema, tsv);
  ASSERT_TRUE(r2.ok()) << r2.status();
  auto b = read_all(**r2);
  ASSERT_EQ(b.size(), 1u);
  EXPECT_THAT(floats(b[0], 0), ElementsAre(0.5f, 1.5f, 2.5f));
  EXPECT_THAT(ints(b[0], 1), ElementsAre(1));
}

TEST(CsvReaderTest, MissingColumnNamesFileAndColumn) {
  ScratchDir dir;
  const auto path = dir.write("m.csv", "a,b\n1,2\n");
  auto r = CsvReader::open(path, 0, make_schema({{"a", ColumnType::kInt64, 1}, {"age", ColumnType::kInt64, 1}}),
                           CsvOptions());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(contains(r.status(), path)) << r.status();
  EXPECT_TRUE(contains(r.status(), "\"age\" is not in the header")) << r.status();

  auto wide = CsvReader::open(path, 0, make_schema({{"v", ColumnType::kFloat, 2}}), CsvOptions());
  EXPECT_TRUE(contains(wide.status(), "\"v_0\" ... \"v_1\"")) << wide.status();
}

TEST(CsvReaderTest, WrongTypeNamesFileLineAndColumn) {
  ScratchDir dir;
  const auto path = dir.write("t.csv", "a,b\n1,2\n\n3,x7\n4,5\n");
  auto r = CsvReader::open(path, 0, make_schema({{"a", ColumnType::kInt64, 1}, {"b", ColumnType::kFloat, 1}}),
                           CsvOptions());
  ASSERT_TRUE(r.ok());
  Record rec;
  ASSERT_TRUE(*(*r)->next(rec));
  auto bad = (*r)->next(rec);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(contains(bad.status(), path + ":4 (record 2): column \"b\": \"x7\" is not a float")) << bad.status();
  // The reader is past the bad record: the next one reads.
  EXPECT_TRUE((*r)->recoverable());
  auto after = (*r)->next(rec);
  ASSERT_TRUE(after.ok() && *after);
  EXPECT_THAT(ints(rec, 0), ElementsAre(4));
}

TEST(CsvReaderTest, RejectsPartialNumbersWrongArityAndOpenQuotes) {
  ScratchDir dir;
  const Schema schema = make_schema({{"a", ColumnType::kInt64, 1}, {"b", ColumnType::kFloat, 2}});
  struct Case {
    std::string row, error;
  } cases[] = {
      {"1.5,1 2", "column \"a\": \"1.5\" is not an int64"},
      {"12abc,1 2", "\"12abc\" is not an int64"},
      {",1 2", "column \"a\": empty value"},
      {"1,1 2 3", "column \"b\" wants 2 values, the record has 3"},
      {"1,1 2,9", "3 fields, the header has 2"},
      {"1,\"1 2\"x", "text after the closing quote"},
  };
  for (const auto& c : cases) {
    const auto path = dir.write("c.csv", "a,b\n" + c.row + "\n");
    auto r = CsvReader::open(path, 0, schema, CsvOptions());
    ASSERT_TRUE(r.ok());
    Record rec;
    auto got = (*r)->next(rec);
    ASSERT_FALSE(got.ok()) << c.row;
    EXPECT_TRUE(contains(got.status(), c.error)) << c.row << " -> " << got.status();
    EXPECT_TRUE(contains(got.status(), path + ":2")) << got.status();
  }
  const auto open_quote = dir.write("q.csv", "a,b\n1,\"1 2\n3,4\n");
  auto r = CsvReader::open(open_quote, 0, schema, CsvOptions());
  ASSERT_TRUE(r.ok());
  Record rec;
  auto got = (*r)->next(rec);
  EXPECT_EQ(got.status().code(), StatusCode::kDataLoss);
  EXPECT_TRUE(contains(got.status(), open_quote + ":2: a quoted field opened on this line is never closed"))
      << got.status();
  EXPECT_FALSE((*r)->recoverable());
}

TEST(CsvReaderTest, SkipCountsRecordsNotLines) {
  ScratchDir dir;
  const auto path = dir.write("s.csv", "a\n1\n\"2\n2\"\n\n3\n4\n");
  auto r = CsvReader::open(path, 0, make_schema({{"a", ColumnType::kString, 1}}), CsvOptions());
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*(*r)->skip(2), 2);
  Record rec;
  ASSERT_TRUE(*(*r)->next(rec));
  EXPECT_THAT(strings(rec, 0), ElementsAre("3"));
  EXPECT_EQ(rec.origin.record, 3);
  EXPECT_EQ(*(*r)->skip(10), 1);
}

// ---------------------------------------------------------------- LibSVM

TEST(LibSvmReaderTest, ReadsSparseRowsCommentsAndQid) {
  ScratchDir dir;
  const auto path = dir.write("a.svm",
                              "# a comment line\n"
                              "+1 qid:3 1:0.5 7:-2 # trailing comment\n"
                              "\n"
                              "-1 2:1e-3\n"
                              "0.25\n");
  LibSvmOptions options;
  auto r = LibSvmReader::open(path, 0, options);
  ASSERT_TRUE(r.ok());
  ASSERT_EQ((*r)->schema().columns.size(), 3u);
  auto records = read_all(**r);
  ASSERT_EQ(records.size(), 3u);
  EXPECT_THAT(floats(records[0], 0), ElementsAre(1.0f));
  EXPECT_THAT(ints(records[0], 1), ElementsAre(1, 7));
  EXPECT_THAT(floats(records[0], 2), ElementsAre(0.5f, -2.0f));
  EXPECT_EQ(records[0].origin.line, 2);
  EXPECT_THAT(floats(records[1], 0), ElementsAre(-1.0f));
  EXPECT_THAT(ints(records[1], 1), ElementsAre(2));
  EXPECT_EQ(records[1].origin.line, 4);
  EXPECT_TRUE(ints(records[2], 1).empty());

  options.set_qid_column("qid");
  options.set_indices_column("idx");
  auto with_qid = LibSvmReader::open(path, 0, options);
  ASSERT_TRUE(with_qid.ok());
  EXPECT_EQ((*with_qid)->schema().columns[1].name, "qid");
  EXPECT_EQ((*with_qid)->schema().columns[2].name, "idx");
  auto q = read_all(**with_qid);
  ASSERT_EQ(q.size(), 3u);
  EXPECT_THAT(ints(q[0], 1), ElementsAre(3));
  EXPECT_THAT(ints(q[0], 2), ElementsAre(1, 7));
  EXPECT_THAT(ints(q[1], 1), ElementsAre(0));
}

TEST(LibSvmReaderTest, ErrorsNameFileAndLine) {
  ScratchDir dir;
  struct Case {
    std::string line, error;
  } cases[] = {
      {"x 1:2", "label \"x\" is not a number"},
      {"1 1:2 3", "\"3\" is not index:value"},
      {"1 -4:2", "feature index \"-4\" is not a non-negative integer"},
      {"1 4:abc", "value \"abc\" of feature 4 is not a number"},
      {"1 4:1 qid:2", "qid must come before the features"},
      {"1,2 4:1", "label \"1,2\" is not a number"},
  };
  for (const auto& c : cases) {
    const auto path = dir.write("e.svm", "1 1:1\n# c\n" + c.line + "\n");
    auto r = LibSvmReader::open(path, 0, LibSvmOptions());
    ASSERT_TRUE(r.ok());
    Record rec;
    ASSERT_TRUE(*(*r)->next(rec));
    auto got = (*r)->next(rec);
    ASSERT_FALSE(got.ok()) << c.line;
    EXPECT_TRUE(contains(got.status(), path + ":3 (record 2): " + c.error)) << got.status();
  }
}

// ---------------------------------------------------------------- IDX

TEST(IdxReaderTest, PairsImagesWithLabelsGzippedOrNot) {
  ScratchDir dir;
  std::vector<std::uint8_t> pixels;
  for (int i = 0; i < 3 * 2 * 2; ++i) pixels.push_back(static_cast<std::uint8_t>(i * 20));
  for (const std::string suffix : {"", ".gz"}) {
    const auto images = dir.file("img-idx3-ubyte" + suffix), labels = dir.file("lab-idx1-ubyte" + suffix);
    ASSERT_TRUE(write_idx_ubyte(images, {3, 2, 2}, pixels).ok());
    ASSERT_TRUE(write_idx_ubyte(labels, {3}, {7, 0, 9}).ok());
    if (!suffix.empty()) {  // really compressed: starts with gzip's magic
      std::string head = dir.read("img-idx3-ubyte.gz").substr(0, 2);
      EXPECT_EQ(head, "\x1f\x8b");
    }
    IdxOptions options;
    options.set_scale_to_unit(true);
    auto r = IdxReader::open(images, labels, 2, options);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ((*r)->schema().columns[0].width, 4);
    EXPECT_EQ((*r)->schema().columns[1].type, ColumnType::kInt64);
    auto records = read_all(**r);
    ASSERT_EQ(records.size(), 3u);
    EXPECT_THAT(floats(records[1], 0), ElementsAre(80 / 255.0f, 100 / 255.0f, 120 / 255.0f, 140 / 255.0f));
    EXPECT_THAT(ints(records[2], 1), ElementsAre(9));
    EXPECT_EQ(records[2].origin.record, 3);
    EXPECT_EQ(records[2].origin.file, 2);
  }
  // Unscaled, images only, after skipping one.
  auto r = IdxReader::open(dir.file("img-idx3-ubyte"), "", 0, IdxOptions());
  ASSERT_TRUE(r.ok());
  EXPECT_EQ((*r)->schema().columns.size(), 1u);
  EXPECT_EQ(*(*r)->skip(2), 2);
  auto last = read_all(**r);
  ASSERT_EQ(last.size(), 1u);
  EXPECT_THAT(floats(last[0], 0), ElementsAre(160.0f, 180.0f, 200.0f, 220.0f));
}

TEST(IdxReaderTest, BigEndianWiderTypes) {
  ScratchDir dir;
  // int16 images (0x0B): 2 items of 2 values; int32 labels (0x0C).
  std::string img = {0, 0, 0x0B, 2, 0, 0, 0, 2, 0, 0, 0, 2};
  for (int v : {1, -2, 300, -32768}) {
    img += static_cast<char>((v >> 8) & 0xff);
    img += static_cast<char>(v & 0xff);
  }
  std::string lab = {0, 0, 0x0C, 1, 0, 0, 0, 2, 0, 0, 0x01, 0x02, 0x7f, 0, 0, 0};
  auto r = IdxReader::open(dir.write("i", img), dir.write("l", lab), 0, IdxOptions());
  ASSERT_TRUE(r.ok()) << r.status();
  auto records = read_all(**r);
  ASSERT_EQ(records.size(), 2u);
  EXPECT_THAT(floats(records[0], 0), ElementsAre(1.0f, -2.0f));
  EXPECT_THAT(floats(records[1], 0), ElementsAre(300.0f, -32768.0f));
  EXPECT_THAT(ints(records[0], 1), ElementsAre(258));
  EXPECT_THAT(ints(records[1], 1), ElementsAre(0x7f000000));
}

TEST(IdxReaderTest, BadHeadersMismatchedCountsAndTruncation) {
  ScratchDir dir;
  const auto not_idx = dir.write("bad", "PK\x03\x04 not idx");
  EXPECT_TRUE(contains(IdxReader::open(not_idx, "", 0, IdxOptions()).status(), not_idx + ": not an IDX file"));

  const auto images = dir.file("i-ubyte"), labels = dir.file("l-ubyte");
  ASSERT_TRUE(write_idx_ubyte(images, {3, 2}, {1, 2, 3, 4, 5, 6}).ok());
  ASSERT_TRUE(write_idx_ubyte(labels, {2}, {1, 2}).ok());
  auto mismatch = IdxReader::open(images, labels, 0, IdxOptions());
  EXPECT_TRUE(contains(mismatch.status(), "has 3 items but")) << mismatch.status();

  // The header promises 3 items; the file holds 2 and a half.
  std::string cut = dir.read("i-ubyte");
  cut.resize(cut.size() - 1);
  const auto truncated = dir.write("t-ubyte", cut);
  auto r = IdxReader::open(truncated, "", 0, IdxOptions());
  ASSERT_TRUE(r.ok());
  Record rec;
  ASSERT_TRUE(*(*r)->next(rec));
  ASSERT_TRUE(*(*r)->next(rec));
  auto bad = (*r)->next(rec);
  EXPECT_EQ(bad.status().code(), StatusCode::kDataLoss);
  EXPECT_TRUE(contains(bad.status(), truncated + " record 3: truncated")) << bad.status();
  EXPECT_FALSE((*r)->recoverable());
}

// ---------------------------------------------------------------- TFRecord

TEST(TfRecordTest, MaskedCrcMatchesKnownValue) {
  // Standard CRC-32C check value, and a masked CRC published with a
  // third-party TFRecord library's tests.
  EXPECT_EQ(crc32c("123456789"), 0xE3069283u);
  EXPECT_EQ(mask_crc(crc32c("1234567890asdfghjkl")), 4134599430u);
  EXPECT_EQ(unmask_crc(mask_crc(0x12345678u)), 0x12345678u);
}

const Schema& fixture_schema() {
  static const Schema s = make_schema({{"label", ColumnType::kInt64, 1},
                                       {"price", ColumnType::kFloat, 1},
                                       {"ids", ColumnType::kInt64, 0},
                                       {"name", ColumnType::kString, 0}});
  return s;
}

TEST(TfRecordTest, ReadsFileWrittenByAnIndependentGenerator) {
  // tests/core/testdata/examples.tfrecord is written by make_tf_examples.py.
  const auto path = std::string(TWINPS_SOURCE_DIR) + "/tests/core/testdata/examples.tfrecord";
  auto r = TfRecordReader::open(path, 0, fixture_schema());
  ASSERT_TRUE(r.ok()) << r.status();
  auto records = read_all(**r);
  ASSERT_EQ(records.size(), 2u);
  EXPECT_THAT(ints(records[0], 0), ElementsAre(1));
  EXPECT_THAT(floats(records[0], 1), ElementsAre(2.5f));
  EXPECT_THAT(ints(records[0], 2), ElementsAre(3, -7, std::int64_t{1} << 40));
  EXPECT_THAT(strings(records[0], 3), ElementsAre("red shoe"));
  EXPECT_THAT(ints(records[1], 0), ElementsAre(0));
  EXPECT_THAT(floats(records[1], 1), ElementsAre(-0.125f));
  EXPECT_TRUE(ints(records[1], 2).empty());
  EXPECT_THAT(strings(records[1], 3), ElementsAre("", "blue"));

  // Our writer, given the same records, writes an Example that TensorFlow's
  // schema (the generated classes of example.proto) reads back.
  ScratchDir dir;
  auto w = TfRecordWriter::create(dir.file("ours.tfrecord"));
  ASSERT_TRUE(w.ok());
  std::string bytes;
  for (const auto& rec : records) {
    encode_example(fixture_schema(), rec, bytes);
    ASSERT_TRUE((*w)->write(bytes).ok());
  }
  ASSERT_TRUE((*w)->close().ok());
  auto frames = TfRecordFileReader::open(dir.file("ours.tfrecord"));
  ASSERT_TRUE(frames.ok());
  std::string data;
  ASSERT_TRUE(*(*frames)->read(data));
  tfexample::Example parsed;
  ASSERT_TRUE(parsed.ParseFromString(data));
  const auto& f = parsed.features().feature();
  EXPECT_EQ(f.at("label").int64_list().value(0), 1);
  EXPECT_EQ(f.at("price").float_list().value(0), 2.5f);
  EXPECT_EQ(f.at("ids").int64_list().value(1), -7);
  EXPECT_EQ(f.at("name").bytes_list().value(0), "red shoe");
  EXPECT_EQ(f.size(), 4);
}

// Records are read in place in the file's buffer (256 KiB): one larger than
// that grows it, and the records on either side, which straddle the
// buffer's refills, come back whole, plain or gzipped.
TEST(TfRecordTest, RecordsLargerThanTheReadBufferAndAcrossItsRefills) {
  ScratchDir dir;
  std::vector<std::string> written;
  for (std::size_t size : {100u, 300000u, 7u, 262140u, 262150u, 0u, 5000u}) {
    std::string r(size, '\0');
    for (std::size_t i = 0; i < size; ++i) r[i] = static_cast<char>(i * 7 + size);
    written.push_back(std::move(r));
  }
  for (const std::string name : {"big.tfrecord", "big.tfrecord.gz"}) {
    auto w = TfRecordWriter::create(dir.file(name));
    ASSERT_TRUE(w.ok());
    for (const auto& r : written) ASSERT_TRUE((*w)->write(r).ok());
    ASSERT_TRUE((*w)->close().ok());
    auto frames = TfRecordFileReader::open(dir.file(name));
    ASSERT_TRUE(frames.ok());
    std::string data;
    for (std::size_t i = 0; i < written.size(); ++i) {
      auto got = (*frames)->read(data);
      ASSERT_TRUE(got.ok()) << name << " record " << i << ": " << got.status();
      ASSERT_TRUE(*got) << name << " record " << i;
      EXPECT_EQ(data, written[i]) << name << " record " << i;
    }
    auto end = (*frames)->read(data);
    ASSERT_TRUE(end.ok());
    EXPECT_FALSE(*end) << name;
  }
}

TEST(TfRecordTest, DecodesWhatProtobufSerializes) {
  tfexample::Example e;
  auto& f = *e.mutable_features()->mutable_feature();
  f["label"].mutable_int64_list()->add_value(-5);
  f["price"].mutable_float_list()->add_value(3.25f);
  for (int i = 0; i < 300; ++i) f["ids"].mutable_int64_list()->add_value(i * 1000003);
  f["name"].mutable_bytes_list()->add_value(std::string("a\0b", 3));
  f["other"].mutable_bytes_list()->add_value("ignored");
  ExampleDecoder decoder(fixture_schema());
  Record rec;
  ASSERT_TRUE(decoder.decode(e.SerializeAsString(), rec).ok());
  EXPECT_THAT(ints(rec, 0), ElementsAre(-5));
  EXPECT_THAT(floats(rec, 1), ElementsAre(3.25f));
  ASSERT_EQ(ints(rec, 2).size(), 300u);
  EXPECT_EQ(ints(rec, 2)[299], 299 * 1000003);
  EXPECT_THAT(strings(rec, 3), ElementsAre(std::string("a\0b", 3)));

  // And round trip through our encoder.
  std::string ours;
  encode_example(fixture_schema(), rec, ours);
  Record again;
  ASSERT_TRUE(decoder.decode(ours, again).ok());
  EXPECT_EQ(ints(again, 2), ints(rec, 2));
  EXPECT_EQ(strings(again, 3), strings(rec, 3));
}

// One decoder meets records whose features come in other orders (a map's
// entries are in no fixed order), with features it does not read between:
// each record's values land in their columns. Concatenated Examples are one
// Example whose map holds the entries in that order.
TEST(TfRecordTest, FeaturesInAnyOrderFromRecordToRecord) {
  auto feature = [](const std::string& name, std::int64_t v) {
    tfexample::Example e;
    (*e.mutable_features()->mutable_feature())[name].mutable_int64_list()->add_value(v);
    return e.SerializeAsString();
  };
  const Schema schema = make_schema({{"label", ColumnType::kInt64, 1}, {"C26", ColumnType::kInt64, 1}});
  ExampleDecoder decoder(schema);
  const std::vector<std::string> records = {
      feature("label", 1) + feature("I1", 9) + feature("C26", 100),
      feature("C26", 200) + feature("C25", 9) + feature("label", 0),
      feature("I1", 9) + feature("label", 1) + feature("C26", 300) + feature("C2", 9),
      feature("label", 0) + feature("I1", 9) + feature("C26", 400),
  };
  for (std::size_t i = 0; i < records.size(); ++i) {
    Record rec;
    ASSERT_TRUE(decoder.decode(records[i], rec).ok()) << i;
    EXPECT_THAT(ints(rec, 0), ElementsAre(static_cast<std::int64_t>((i + 1) % 2))) << i;
    EXPECT_THAT(ints(rec, 1), ElementsAre(static_cast<std::int64_t>(100 * (i + 1)))) << i;
  }
}

// Map entries protobuf itself would not write, but may read: the value
// before the key, and a key given twice (the last wins). The decoder's fast
// path for the usual layout must leave these to the general one.
TEST(TfRecordTest, MapEntriesInAnyFieldOrder) {
  auto length_delimited = [](int field, const std::string& body) {
    std::string out(1, static_cast<char>(field << 3 | 2));
    for (std::size_t n = body.size(); ; n >>= 7) {
      out += static_cast<char>((n & 0x7f) | (n >= 0x80 ? 0x80 : 0));
      if (n < 0x80) break;
    }
    return out + body;
  };
  auto int_feature = [&](std::int64_t v) {
    tfexample::Feature f;
    f.mutable_int64_list()->add_value(v);
    return f.SerializeAsString();
  };
  const std::string value_first = length_delimited(2, int_feature(7)) + length_delimited(1, "label");
  const std::string key_twice =
      length_delimited(1, "C25") + length_delimited(2, int_feature(9)) + length_delimited(1, "C26");
  const std::string example =
      length_delimited(1, length_delimited(1, value_first) + length_delimited(1, key_twice));
  const Schema schema = make_schema({{"label", ColumnType::kInt64, 1}, {"C26", ColumnType::kInt64, 1}});
  ExampleDecoder decoder(schema);
  Record rec;
  ASSERT_TRUE(decoder.decode(example, rec).ok());
  EXPECT_THAT(ints(rec, 0), ElementsAre(7));
  EXPECT_THAT(ints(rec, 1), ElementsAre(9));
}

TEST(TfRecordTest, SchemaMismatchesNameFileRecordAndFeature) {
  ScratchDir dir;
  auto w = TfRecordWriter::create(dir.file("m.tfrecord"));
  ASSERT_TRUE(w.ok());
  auto write = [&](const tfexample::Example& e) { ASSERT_TRUE((*w)->write(e.SerializeAsString()).ok()); };
  tfexample::Example good;
  auto& gf = *good.mutable_features()->mutable_feature();
  gf["label"].mutable_int64_list()->add_value(1);
  gf["price"].mutable_float_list()->add_value(1);
  gf["ids"].mutable_int64_list();
  gf["name"].mutable_bytes_list();
  write(good);
  tfexample::Example missing = good;
  missing.mutable_features()->mutable_feature()->erase("price");
  write(missing);
  tfexample::Example wrong_type = good;
  (*wrong_type.mutable_features()->mutable_feature())["label"].mutable_float_list()->add_value(1);
  write(wrong_type);
  tfexample::Example wrong_count = good;
  (*wrong_count.mutable_features()->mutable_feature())["price"].mutable_float_list()->add_value(2);
  write(wrong_count);
  write(good);
  ASSERT_TRUE((*w)->close().ok());

  auto r = TfRecordReader::open(dir.file("m.tfrecord"), 0, fixture_schema());
  ASSERT_TRUE(r.ok());
  Record rec;
  ASSERT_TRUE(*(*r)->next(rec));
  const std::string file = dir.file("m.tfrecord");
  for (const std::string expected : {" record 2 (byte ", " record 3 (byte ", " record 4 (byte "}) {
    auto got = (*r)->next(rec);
    ASSERT_FALSE(got.ok());
    EXPECT_EQ(got.status().code(), StatusCode::kInvalidArgument);
    EXPECT_TRUE(contains(got.status(), file + expected)) << got.status();
    EXPECT_TRUE((*r)->recoverable());
    const char* cause = expected == " record 2 (byte " ? "feature \"price\" is missing"
                        : expected == " record 3 (byte " ? "feature \"label\" is a float_list, the schema wants int64"
                                                         : "column \"price\" wants 1 value, the record has 2";
    EXPECT_TRUE(contains(got.status(), cause)) << got.status();
  }
  ASSERT_TRUE(*(*r)->next(rec));
  EXPECT_EQ(rec.origin.record, 5);
}

// Three records of `schema` in a TFRecord file; returns the file's bytes.
std::string three_records(const ScratchDir& dir, const std::string& name) {
  auto w = TfRecordWriter::create(dir.file(name));
  Record rec;
  std::string bytes;
  for (int i = 0; i < 3; ++i) {
    rec.clear(4);
    rec.ints = {i, 10 * i};
    rec.floats = {0.5f * i};
    rec.strings = {"n" + std::to_string(i)};
    rec.spans = {{0, 1}, {0, 1}, {1, 2}, {0, 1}};
    encode_example(fixture_schema(), rec, bytes);
    EXPECT_TRUE((*w)->write(bytes).ok());
  }
  EXPECT_TRUE((*w)->close().ok());
  return dir.read(name);
}

TEST(TfRecordTest, CorruptionIsDataLossNamingRecordAndOffset) {
  ScratchDir dir;
  const std::string clean = three_records(dir, "clean.tfrecord");
  // Record sizes are equal: find the second record's start.
  const std::size_t record_bytes = clean.size() / 3;

  // A flipped bit in record 2's data: that record fails, the third still reads.
  std::string flipped = clean;
  flipped[record_bytes + 12 + 3] ^= 0x10;
  const auto data_bad = dir.write("data.tfrecord", flipped);
  auto r = TfRecordReader::open(data_bad, 0, fixture_schema());
  Record rec;
  ASSERT_TRUE(*(*r)->next(rec));
  auto got = (*r)->next(rec);
  EXPECT_EQ(got.status().code(), StatusCode::kDataLoss);
  EXPECT_TRUE(contains(got.status(), data_bad + " record 2 (byte " + std::to_string(record_bytes) +
                                         "): corrupt record data (checksum mismatch)"))
      << got.status();
  EXPECT_TRUE((*r)->recoverable());
  ASSERT_TRUE(*(*r)->next(rec));
  EXPECT_THAT(ints(rec, 0), ElementsAre(2));

  // A flipped bit in record 2's length: the framing is lost.
  std::string length_bad = clean;
  length_bad[record_bytes + 1] ^= 0x01;
  const auto len_bad = dir.write("len.tfrecord", length_bad);
  r = TfRecordReader::open(len_bad, 0, fixture_schema());
  ASSERT_TRUE(*(*r)->next(rec));
  got = (*r)->next(rec);
  EXPECT_TRUE(contains(got.status(), len_bad + " record 2 (byte " + std::to_string(record_bytes) +
                                         "): corrupt record length"))
      << got.status();
  EXPECT_FALSE((*r)->recoverable());

  // Truncated inside the third record, and inside its header.
  for (std::size_t cut : {2 * record_bytes + 20, 2 * record_bytes + 5}) {
    const auto path = dir.write("cut.tfrecord", clean.substr(0, cut));
    r = TfRecordReader::open(path, 0, fixture_schema());
    EXPECT_EQ(*(*r)->skip(1), 1);
    ASSERT_TRUE(*(*r)->next(rec));
    got = (*r)->next(rec);
    EXPECT_EQ(got.status().code(), StatusCode::kDataLoss);
    EXPECT_TRUE(contains(got.status(), path + " record 3 (byte " + std::to_string(2 * record_bytes) + "): truncated"))
        << got.status();
    EXPECT_FALSE((*r)->recoverable());
  }
}

TEST(TfRecordTest, GzipCompressedFilesReadAsTensorFlowsGzipOption) {
  ScratchDir dir;
  const std::string clean = three_records(dir, "plain.tfrecord");
  three_records(dir, "packed.tfrecord.gz");
  EXPECT_NE(dir.read("packed.tfrecord.gz"), clean);
  auto r = TfRecordReader::open(dir.file("packed.tfrecord.gz"), 0, fixture_schema());
  ASSERT_TRUE(r.ok());
  auto records = read_all(**r);
  ASSERT_EQ(records.size(), 3u);
  EXPECT_THAT(strings(records[2], 3), ElementsAre("n2"));
}

}  // namespace
}  // namespace twinps::data
