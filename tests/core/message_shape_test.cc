// What the simulator prices a data-plane message by: its items, and of them
// those that name rows by id (core/messages/messages.h, MessageShape).
#include <gtest/gtest.h>

#include "core/messages/messages.h"

namespace twinps {
namespace {

PullItem by_id(ShardId shard, RowIds rows) { return PullItem{shard, false, std::move(rows)}; }

TEST(MessageShapeTest, APullCountsItsItemsByIdAndItsReplyCarriesThem) {
  PullRequest pull;
  pull.items = {PullItem{1, true, {}}, by_id(2, {0, 3}), by_id(3, {5})};
  const MessageShape request = message_shape(Request(pull));
  EXPECT_EQ(request.items, 3);
  EXPECT_EQ(request.items_by_id, 2);
  EXPECT_EQ(request.rows, 3);

  PullResponse answer;
  answer.items.resize(3);
  const MessageShape reply = message_shape(Response(answer), request);
  EXPECT_EQ(reply.items, 3);
  EXPECT_EQ(reply.items_by_id, 2) << "the reply carries the rows of both lookups";
  EXPECT_EQ(reply.rows, 3);
}

TEST(MessageShapeTest, APushCountsItsSparseGradientsAndTheReadsItCarries) {
  PushRequest push;
  Update dense;
  dense.shard = 1;
  Update sparse;
  sparse.shard = 2;
  sparse.sparse = true;
  sparse.rows = {4, 7};
  push.updates = {dense, sparse};
  push.then_pull.items = {by_id(3, {1})};
  const MessageShape request = message_shape(Request(push));
  EXPECT_EQ(request.items, 3);
  EXPECT_EQ(request.items_by_id, 2) << "the sparse gradient and the lookup read after it";
  EXPECT_EQ(request.items_by_id_read, 1);
  EXPECT_EQ(request.items_pushed_by_id(), 1) << "one sparse gradient pushed";

  PushResponse answer;
  answer.pulled.items.resize(1);
  EXPECT_EQ(message_shape(Response(answer), request).items_by_id, 1);
}

}  // namespace
}  // namespace twinps
