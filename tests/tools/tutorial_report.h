#pragma once
// What a real-mode test of the tutorial checks in its report: that the model
// learned the task.
//
// Real training is asynchronous, so which gradients are stale, and by how
// much, depends on how the tasks' threads interleave. The tutorial reaches
// accuracy 1.0 by its third epoch in almost every run, but its last epoch's
// training accuracy (a running metric over that epoch's batches) was below
// 1.0 in 1 of 150 runs on an idle machine (0.925) and more often while other
// tests loaded it (0.9). The evaluation after training, of the final
// weights on 16 examples, was 1.0 in all 150. So both get a floor with room
// for a loaded machine, not an exact value: 0.8 for the training metric, 0.9
// (15 of 16) for the evaluation. (Accuracies are float32: 0.9 reads back as
// 0.8999999761.)
#include <gtest/gtest.h>

#include <string>

#include <nlohmann/json.hpp>

namespace twinps::testing {

inline void expect_tutorial_learned(const nlohmann::json& report, const std::string& output) {
  ASSERT_TRUE(report.contains("epochs") && !report["epochs"].empty()) << output;
  EXPECT_GE(report["epochs"].back()["accuracy"].get<double>(), 0.8) << "last epoch's training accuracy\n" << output;
  ASSERT_TRUE(report.contains("eval")) << "no evaluation after training\n" << output;
  EXPECT_GE(report["eval"]["accuracy"].get<double>(), 0.9) << "the evaluation after training\n" << output;
}

}  // namespace twinps::testing
