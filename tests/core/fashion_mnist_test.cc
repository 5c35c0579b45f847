// The real Fashion-MNIST IDX files of Debian's dataset-fashion-mnist package
// read through the file dataset: 60,000 + 10,000 28x28 images, balanced
// labels, pixels scaled to [0, 1]. Skipped, saying so, when the package is
// not installed (tools/run installs it for the examples that need it).
#include <gtest/gtest.h>

#include <filesystem>

#include "core/data/file_dataset.h"

namespace twinps::data {
namespace {

constexpr char kDir[] = "/usr/share/datasets/fashion-mnist";

FileDatasetSpec fashion_spec(const std::string& split) {
  FileDatasetSpec spec;
  spec.add_patterns(std::string(kDir) + "/" + split + "-images-idx3-ubyte*");
  spec.mutable_idx()->add_labels_patterns(std::string(kDir) + "/" + split + "-labels-idx1-ubyte*");
  spec.mutable_idx()->set_scale_to_unit(true);
  spec.set_batch_size(1000);
  return spec;
}

TEST(FashionMnistTest, ReadsTheDebianPackagesIdxFiles) {
  if (!std::filesystem::exists(std::string(kDir) + "/train-images-idx3-ubyte.gz") &&
      !std::filesystem::exists(std::string(kDir) + "/train-images-idx3-ubyte"))
    GTEST_SKIP() << "Debian's dataset-fashion-mnist is not installed (" << kDir
                 << " is missing): apt-get install dataset-fashion-mnist to run this test";
  for (const auto& [split, n] : {std::pair<std::string, std::int64_t>{"train", 60000}, {"t10k", 10000}}) {
    // Three workers: one pair of files, so each reads a third of the records.
    std::vector<std::int64_t> per_class(10, 0);
    std::int64_t total = 0;
    double pixel_sum = 0;
    for (int w = 0; w < 3; ++w) {
      auto ds = FileDataset::create(fashion_spec(split), w, 3);
      ASSERT_TRUE(ds.ok()) << ds.status();
      ASSERT_EQ((*ds)->schema().columns[0].width, 784);
      EXPECT_EQ((*ds)->plan().records, n * (w + 1) / 3 - n * w / 3);
      auto it = (*ds)->make_iterator(RandomStream(1));
      for (int guard = 0; guard < 100; ++guard) {
        auto b = it->next();
        if (!b.ok()) {
          ASSERT_EQ(b.status().code(), StatusCode::kOutOfRange) << b.status();
          break;
        }
        total += b->size;
        for (float p : b->columns[0].floats) {
          ASSERT_GE(p, 0.0f);
          ASSERT_LE(p, 1.0f);
          pixel_sum += p;
        }
        for (std::int64_t label : b->columns[1].ints) {
          ASSERT_GE(label, 0);
          ASSERT_LT(label, 10);
          ++per_class[static_cast<std::size_t>(label)];
        }
      }
    }
    EXPECT_EQ(total, n) << split;
    for (auto c : per_class) EXPECT_EQ(c, n / 10) << split << ": Fashion-MNIST is balanced";
    // The mean pixel of Fashion-MNIST is about 0.286.
    EXPECT_NEAR(pixel_sum / (static_cast<double>(n) * 784), 0.286, 0.01) << split;
  }
}

}  // namespace
}  // namespace twinps::data
