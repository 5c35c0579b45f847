// The tutorial run's configuration as checkpoint metadata: what `twinps
// train` records is read back exactly by `twinps eval`, and a checkpoint
// without it (or with a damaged entry) is refused naming the key.
#include <gtest/gtest.h>

#include "core/models/tutorial/run_metadata.h"

namespace twinps::tutorial {
namespace {

TEST(RunMetadataTest, RoundTripsEveryField) {
  Config c;
  c.num_examples = 123;
  c.batch_size = 17;
  c.shuffle_buffer = 50;
  c.epochs = 10;
  c.steps_per_epoch = 7;
  c.steps_per_execution = 3;
  c.learning_rate = 0.1;  // not exactly representable: must come back bit for bit
  c.embedding_dim = 12;
  c.num_shards = 4;
  c.mask_token = true;
  c.data_seed = 18446744073709551615ull;
  c.init_seed = 9;
  c.eval_examples = 32;
  c.eval_steps = 4;
  const auto metadata = run_metadata(c);
  EXPECT_EQ(metadata.at("model"), "tutorial");
  EXPECT_EQ(metadata.at("tutorial.learning_rate"), "0.1");
  auto back = config_from_metadata(metadata);
  ASSERT_TRUE(back.ok()) << describe(back.status());
  EXPECT_EQ(back->num_examples, 123);
  EXPECT_EQ(back->batch_size, 17);
  EXPECT_EQ(back->shuffle_buffer, 50);
  EXPECT_EQ(back->epochs, 10);
  EXPECT_EQ(back->steps_per_epoch, 7);
  EXPECT_EQ(back->steps_per_execution, 3);
  EXPECT_EQ(back->learning_rate, 0.1);
  EXPECT_EQ(back->embedding_dim, 12);
  EXPECT_EQ(back->num_shards, 4);
  EXPECT_TRUE(back->mask_token);
  EXPECT_EQ(back->data_seed, 18446744073709551615ull);
  EXPECT_EQ(back->init_seed, 9u);
  EXPECT_EQ(back->eval_examples, 32);
  EXPECT_EQ(back->eval_steps, 4);
}

TEST(RunMetadataTest, MissingOrMalformedEntriesAreNamed) {
  auto none = config_from_metadata({});
  EXPECT_EQ(none.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(none.status().message().find("records no training configuration"), std::string::npos);

  auto metadata = run_metadata(Config{});
  metadata.erase("tutorial.epochs");
  auto missing = config_from_metadata(metadata);
  EXPECT_NE(missing.status().message().find("\"tutorial.epochs\" is missing"), std::string::npos)
      << describe(missing.status());

  metadata = run_metadata(Config{});
  metadata["tutorial.data_seed"] = "-1";
  auto malformed = config_from_metadata(metadata);
  EXPECT_NE(malformed.status().message().find("\"tutorial.data_seed\" is malformed: \"-1\""), std::string::npos)
      << describe(malformed.status());

  metadata = run_metadata(Config{});
  metadata["model"] = "resnet";
  EXPECT_EQ(config_from_metadata(metadata).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace twinps::tutorial
