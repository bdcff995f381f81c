//===- TensorLayoutTest.cpp - Blocks and strided views --------------------===//

#include "autopar/runtime/TensorLayout.h"
#include "autopar/runtime/Error.h"

#include "gtest/gtest.h"

#include <numeric>
#include <vector>

using namespace autopar::runtime;

namespace {

std::vector<int> iota(size_t count) {
  std::vector<int> values(count);
  std::iota(values.begin(), values.end(), 0);
  return values;
}

TEST(TensorLayoutTest, BlocksOfTheFirstDimensionAreContiguous) {
  std::vector<int> whole = iota(12); // [4, 3]
  BlockSplit split({4, 3}, 0, 2, sizeof(int), "t");
  EXPECT_TRUE(split.blocksAreContiguous());
  EXPECT_EQ(split.blockBytes(), 6 * sizeof(int));
  std::vector<int> block(6);
  split.pack(whole.data(), 1, block.data());
  EXPECT_EQ(block, (std::vector<int>{6, 7, 8, 9, 10, 11}));
}

TEST(TensorLayoutTest, PacksAndUnpacksInnerDimensions) {
  // [2, 4, 3] cut into 2 blocks along dim 1: block 1 is [:, 2:4, :].
  std::vector<int> whole = iota(24);
  BlockSplit split({2, 4, 3}, 1, 2, sizeof(int), "t");
  EXPECT_FALSE(split.blocksAreContiguous());
  std::vector<int> block(12);
  split.pack(whole.data(), 1, block.data());
  EXPECT_EQ(block,
            (std::vector<int>{6, 7, 8, 9, 10, 11, 18, 19, 20, 21, 22, 23}));
  std::vector<int> back(24, -1);
  for (int64_t i = 0; i < 2; ++i) {
    split.pack(whole.data(), i, block.data());
    split.unpack(block.data(), i, back.data());
  }
  EXPECT_EQ(back, whole);

  // The last dimension: [2, 4] in 4 blocks of one column.
  BlockSplit columns({2, 4}, 1, 4, sizeof(int), "t");
  std::vector<int> column(2);
  columns.pack(whole.data(), 3, column.data());
  EXPECT_EQ(column, (std::vector<int>{3, 7}));
}

TEST(TensorLayoutTest, RejectsUnevenOrMissingDimensions) {
  try {
    BlockSplit({4, 3}, 1, 2, 4, "input 'x'");
    ADD_FAILURE();
  } catch (const Error &error) {
    EXPECT_STREQ(error.what(), "input 'x': dimension 1 of shape [4, 3] does "
                               "not split into 2 equal blocks");
  }
  EXPECT_THROW(BlockSplit({4}, 1, 1, 4, "t"), Error);
  EXPECT_THROW(BlockSplit({}, 0, 1, 4, "t"), Error);
}

TEST(TensorLayoutTest, NestedCutsGiveABoxOfABlock) {
  // [4, 6] cut over tp (2) along dim 1, then each tp block's dim 0 over dp
  // (2): the rank at tp 1, dp 0 holds rows 0-1 of columns 3-5.
  std::vector<int> whole = iota(24);
  TensorBox box = cutBox({4, 6}, {{1, 2, 1}, {0, 2, 0}}, "t");
  EXPECT_EQ(box.offsets, (Shape{0, 3}));
  EXPECT_EQ(box.sizes, (Shape{2, 3}));
  std::vector<int> block(6);
  packBox(whole.data(), {4, 6}, box, sizeof(int), block.data());
  EXPECT_EQ(block, (std::vector<int>{3, 4, 5, 9, 10, 11}));
  // Every (tp, dp) block, unpacked, tiles the whole.
  std::vector<int> back(24, -1);
  for (int64_t tp = 0; tp < 2; ++tp)
    for (int64_t dp = 0; dp < 2; ++dp) {
      TensorBox b = cutBox({4, 6}, {{1, 2, tp}, {0, 2, dp}}, "t");
      packBox(whole.data(), {4, 6}, b, sizeof(int), block.data());
      unpackBox(block.data(), b, {4, 6}, sizeof(int), back.data());
    }
  EXPECT_EQ(back, whole);
  // Two cuts of one dim: tp's block 1 of [8], then dp's block 0 of that.
  TensorBox same = cutBox({8}, {{0, 2, 1}, {0, 2, 0}}, "t");
  EXPECT_EQ(same.offsets, (Shape{4}));
  EXPECT_EQ(same.sizes, (Shape{2}));
  // No cuts: the whole.
  EXPECT_EQ(cutBox({3, 2}, {}, "t").sizes, (Shape{3, 2}));
}

TEST(TensorLayoutTest, NestedCutsRejectWhatDoesNotDivide) {
  try {
    cutBox({4, 6}, {{1, 2, 0}, {1, 2, 0}}, "parameter 'w'");
    ADD_FAILURE();
  } catch (const Error &error) {
    EXPECT_STREQ(error.what(), "parameter 'w': dimension 1 of the block "
                               "[4, 3] of [4, 6] does not split into 2 equal "
                               "blocks");
  }
  EXPECT_THROW(cutBox({4}, {{1, 2, 0}}, "t"), Error);
  EXPECT_THROW(cutBox({4}, {{0, 2, 2}}, "t"), Error);
}

TEST(TensorLayoutTest, CopiesStridedViews) {
  // The transpose of a [2, 3] matrix as a [3, 2] view.
  std::vector<int> matrix = iota(6);
  int64_t sizes[] = {3, 2}, strides[] = {1, 3};
  EXPECT_FALSE(isDenseRowMajor(sizes, strides, 2));
  std::vector<int> dense(6);
  copyStridedToDense(matrix.data(), sizes, strides, 2, sizeof(int),
                     dense.data());
  EXPECT_EQ(dense, (std::vector<int>{0, 3, 1, 4, 2, 5}));
  std::vector<int> back(6, -1);
  copyDenseToStrided(dense.data(), sizes, strides, 2, sizeof(int), back.data());
  EXPECT_EQ(back, matrix);

  int64_t rowMajor[] = {2, 1}, unitSizes[] = {1, 2}, anyStride[] = {99, 1};
  EXPECT_TRUE(isDenseRowMajor(sizes, rowMajor, 2));
  EXPECT_TRUE(isDenseRowMajor(unitSizes, anyStride, 2));
  int scalar = 7, copy = 0;
  copyStridedToDense(&scalar, nullptr, nullptr, 0, sizeof(int), &copy);
  EXPECT_EQ(copy, 7);
}

} // namespace
