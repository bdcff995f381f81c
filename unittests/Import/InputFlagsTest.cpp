//===- InputFlagsTest.cpp - --input-shape / --const-input parsing ---------===//

#include "autopar/Import/OnnxImporter.h"

#include "gtest/gtest.h"

using namespace autopar;

TEST(InputShapeFlag, ParsesDims) {
  ImportOptions options;
  std::string error;
  ASSERT_TRUE(succeeded(parseInputShapeFlag("idx=8x128", options, error)));
  ASSERT_EQ(options.inputShapes.count("idx"), 1u);
  EXPECT_EQ(options.inputShapes["idx"], (llvm::SmallVector<int64_t>{8, 128}));
}

TEST(InputShapeFlag, NameMayContainEquals) {
  // ONNX names are free-form; the dims follow the last '='.
  ImportOptions options;
  std::string error;
  ASSERT_TRUE(succeeded(parseInputShapeFlag("a=b=3", options, error)));
  EXPECT_EQ(options.inputShapes["a=b"], (llvm::SmallVector<int64_t>{3}));
}

TEST(InputShapeFlag, ScalarAndEmpty) {
  ImportOptions options;
  std::string error;
  ASSERT_TRUE(succeeded(parseInputShapeFlag("s=scalar", options, error)));
  EXPECT_TRUE(options.inputShapes["s"].empty());
}

TEST(InputShapeFlag, RejectsMalformed) {
  ImportOptions options;
  std::string error;
  EXPECT_TRUE(failed(parseInputShapeFlag("idx", options, error)));
  EXPECT_NE(error.find("NAME=D0xD1"), std::string::npos) << error;
  EXPECT_TRUE(failed(parseInputShapeFlag("idx=8xfoo", options, error)));
  EXPECT_NE(error.find("'foo'"), std::string::npos) << error;
  EXPECT_TRUE(failed(parseInputShapeFlag("idx=-1x3", options, error)));
}

TEST(ConstInputFlag, ParsesAndRejects) {
  ImportOptions options;
  std::string error;
  ASSERT_TRUE(
      succeeded(parseConstInputFlag("shape=/tmp/s.npy", options, error)));
  EXPECT_EQ(options.constantInputs["shape"], "/tmp/s.npy");
  EXPECT_TRUE(failed(parseConstInputFlag("shape", options, error)));
  EXPECT_NE(error.find("NAME=FILE.npy"), std::string::npos) << error;
}
