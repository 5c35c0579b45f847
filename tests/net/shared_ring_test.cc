#include "net/shared_ring.h"

#include <cstring>
#include <string>
#include <unistd.h>

#include <gtest/gtest.h>

namespace twinps::net {
namespace {

struct Ends {
  std::unique_ptr<RingWriter> writer;
  std::unique_ptr<RingReader> reader;
};

Ends open_ring(std::size_t capacity) {
  Ends e;
  auto w = RingWriter::create(capacity);
  EXPECT_TRUE(w.ok()) << w.status();
  if (!w.ok()) return e;
  e.writer = std::move(*w);
  // As a peer would: through /proc, by pid and descriptor number.
  auto r = RingReader::open(::getpid(), e.writer->fd(), capacity);
  EXPECT_TRUE(r.ok()) << r.status();
  if (r.ok()) e.reader = std::move(*r);
  return e;
}

// Sends `text` through the ring; false if it had no room.
bool send_text(Ends& e, const std::string& text) {
  const auto offset = e.writer->reserve(text.size());
  if (!offset) return false;
  std::memcpy(e.writer->at(*offset), text.data(), text.size());
  const char* got = e.reader->next(*offset, text.size());
  EXPECT_NE(got, nullptr) << "offset " << *offset;
  if (!got) return false;
  EXPECT_EQ(std::string(got, text.size()), text);
  e.reader->release();
  return true;
}

// With everything released, the next region goes to the front: a writer
// and a reader taking turns touch one message's pages, again and again.
TEST(SharedRingTest, WithNothingInFlightEachRegionStartsAtTheFront) {
  Ends e = open_ring(100);
  ASSERT_TRUE(e.reader);
  for (const std::size_t bytes : {40u, 40u, 95u, 7u, 100u}) {
    EXPECT_EQ(e.writer->reserve(bytes), 0u) << bytes;
    ASSERT_NE(e.reader->next(0, bytes), nullptr) << bytes;
    EXPECT_EQ(e.reader->next(0, bytes), e.reader->next(0, bytes)) << "the same region until released";
    e.reader->release();
  }
  for (int i = 0; i < 50; ++i) ASSERT_TRUE(send_text(e, std::string(static_cast<std::size_t>(7 + i % 90), 'a' + i % 26)));
}

// Regions in flight follow each other; one that would run past the end goes
// to the front (the end is skipped), and the reader, told only the offset,
// follows.
TEST(SharedRingTest, RegionsInFlightFollowEachOtherAndWrapToTheFront) {
  Ends e = open_ring(100);
  ASSERT_TRUE(e.reader);
  EXPECT_EQ(e.writer->reserve(40), 0u);
  EXPECT_EQ(e.writer->reserve(40), 40u);
  ASSERT_NE(e.reader->next(0, 40), nullptr);
  e.reader->release();
  EXPECT_EQ(e.writer->reserve(30), 0u) << "80 + 30 > 100: to the front, which is released";
  const char* second = e.reader->next(40, 40);
  ASSERT_NE(second, nullptr);
  e.reader->release();
  const char* third = e.reader->next(0, 30);
  EXPECT_EQ(third, second - 40);
}

// The writer never overwrites what the reader has not released: without
// room it says so (the data plane then uses the socket), and the room comes
// back when the reader releases.
TEST(SharedRingTest, NoRoomUntilTheReaderReleases) {
  Ends e = open_ring(100);
  ASSERT_TRUE(e.reader);
  EXPECT_EQ(e.writer->reserve(30), 0u);
  const auto first = e.writer->reserve(30);
  ASSERT_EQ(first, 30u);
  EXPECT_FALSE(e.writer->reserve(60)) << "would wrap onto the unreleased regions";
  EXPECT_FALSE(e.writer->reserve(101)) << "larger than the ring";
  EXPECT_FALSE(e.writer->reserve(0));
  EXPECT_EQ(e.writer->reserve(40), 60u) << "fits before the end";
  ASSERT_NE(e.reader->next(0, 30), nullptr);
  e.reader->release();
  EXPECT_EQ(e.writer->reserve(30), 0u) << "the front is free again";
  EXPECT_FALSE(e.writer->reserve(1)) << "all 100 bytes in flight";
}

// A peer that names a region where the ring cannot have put it is caught.
TEST(SharedRingTest, AReaderRefusesRegionsTheWriterCannotHavePlaced) {
  Ends e = open_ring(100);
  ASSERT_TRUE(e.reader);
  EXPECT_EQ(e.reader->next(0, 101), nullptr) << "larger than the ring";
  EXPECT_EQ(e.reader->next(90, 20), nullptr) << "past the end";
  EXPECT_EQ(e.reader->next(0, 0), nullptr) << "empty";
  EXPECT_EQ(e.reader->next(10, 20), nullptr) << "neither where the last region ended nor at the front";
  ASSERT_NE(e.reader->next(0, 50), nullptr);
  e.reader->release();
  EXPECT_EQ(e.reader->next(60, 20), nullptr);
  EXPECT_NE(e.reader->next(50, 20), nullptr);
}

TEST(SharedRingTest, OpeningWhatIsNotAPeersRingFails) {
  auto w = RingWriter::create(4096);
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_FALSE(RingReader::open(::getpid(), (*w)->fd(), 8192).ok()) << "not of the size offered";
  EXPECT_FALSE(RingReader::open(::getpid(), 100000, 4096).ok()) << "no such descriptor";
  EXPECT_FALSE(RingReader::open(0, (*w)->fd(), 4096).ok()) << "no peer pid";
  EXPECT_FALSE(RingWriter::create(0).ok());
}

}  // namespace
}  // namespace twinps::net
