// A test fixture for engine tests on the real model ../shared/models/stories260K.bin.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "model/formats/loader.hpp"
#include "tests/shared_models.hpp"

namespace conveyor::testing {

// Tests on ../shared/models/stories260K.bin, loaded once per test suite
// (model_); each test skips when the file is missing.
class StoriesTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const std::string path = test::shared_model_path("stories260K.bin");
    if (!std::filesystem::exists(path)) return;
    auto m = load_model(path);
    ASSERT_TRUE(m.has_value()) << m.error().message;
    model_ = new LoadedModel(std::move(m).value());
  }
  static void TearDownTestSuite() {
    delete model_;
    model_ = nullptr;
  }
  void SetUp() override {
    if (model_ == nullptr) GTEST_SKIP() << "../shared/models/stories260K.bin not found";
  }

  static inline LoadedModel* model_ = nullptr;
};

}  // namespace conveyor::testing
