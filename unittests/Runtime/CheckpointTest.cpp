//===- CheckpointTest.cpp - Chunks checksummed in blocks ------------------===//
//
// writeCheckpoint/readCheckpoint without a communicator: a chunk larger than
// the block size records a CRC-32 per block, and a reader of part of it (a
// ZeRO block of a tensor written whole) reads and checks only the blocks that
// hold its part.
//
//===----------------------------------------------------------------------===//

#include "autopar/runtime/Checkpoint.h"

#include "autopar/runtime/Crc32.h"
#include "autopar/runtime/Error.h"

#include "TestUtil.h"

#include "gtest/gtest.h"
#include <nlohmann/json.hpp>

#include <fstream>
#include <numeric>

using namespace autopar::runtime;
using namespace autopar::runtime::test;
using json = nlohmann::json;

namespace {

constexpr int64_t Rows = 40, Columns = 10; // 1600 bytes of float32.

class CheckpointTest : public ::testing::Test {
protected:
  void SetUp() override {
    values.resize(Rows * Columns);
    std::iota(values.begin(), values.end(), 0.0f);
    info.step = 3;
    info.modelHash = "fnv1a64:0000000000000001";
    info.blockBytes = 128;
  }

  /// The tensor as one rank holds it: the whole of it, or block \p index of
  /// \p count along \p dim.
  CheckpointTensor tensor(void *data, int64_t dim = -1, int64_t count = 1,
                          int64_t index = 0) const {
    CheckpointTensor t;
    t.name = "w";
    t.kind = "param";
    t.shape = {Rows, Columns};
    t.data = data;
    if (dim >= 0) {
      t.blockLevels = {{dim, count}};
      t.blockIndex = index;
    }
    return t;
  }

  std::string save() {
    return writeCheckpoint(dir.path(), info, {tensor(values.data())});
  }

  json metadata(const std::string &step) {
    std::ifstream file(step + "/metadata.json");
    return json::parse(file);
  }

  /// Flips the byte at \p at of the chunk of `w`.
  void flip(const std::string &step, size_t at) {
    json chunk = metadata(step)["tensors"][0]["chunks"][0];
    std::string path = step + "/" + chunk["file"].get<std::string>();
    std::string bytes = readFile(path);
    bytes[chunk["offset_bytes"].get<size_t>() + at] ^= 0x40;
    writeFile(path, bytes);
  }

  TempDir dir;
  std::vector<float> values;
  CheckpointInfo info;
};

TEST_F(CheckpointTest, RecordsACrcPerBlock) {
  std::string step = save();
  json chunk = metadata(step)["tensors"][0]["chunks"][0];
  ASSERT_EQ(chunk["block_bytes"], 128);
  std::vector<uint32_t> blocks = chunk["block_crc32"];
  ASSERT_EQ(blocks.size(), 13u); // 1600 / 128, rounded up.
  const char *bytes = reinterpret_cast<const char *>(values.data());
  for (size_t b = 0; b < blocks.size(); ++b)
    EXPECT_EQ(blocks[b],
              crc32(0, bytes + b * 128, std::min<size_t>(128, 1600 - b * 128)))
        << b;
  EXPECT_EQ(chunk["crc32"], crc32(0, bytes, 1600));
}

TEST_F(CheckpointTest, AChunkOfOneBlockHasNoBlockCrcs) {
  info.blockBytes = 1600;
  json chunk = metadata(save())["tensors"][0]["chunks"][0];
  EXPECT_FALSE(chunk.contains("block_bytes"));
  EXPECT_FALSE(chunk.contains("block_crc32"));
}

TEST_F(CheckpointTest, AReaderOfRowsReadsOnlyTheirBlocks) {
  std::string step = save();
  // Rows 10-19 of 40: bytes [400, 800) of the chunk, in blocks 3-6 (bytes
  // [384, 896)).
  std::vector<float> quarter(Rows / 4 * Columns, -1.0f);
  CheckpointInfo read =
      readCheckpoint(step, info.modelHash, {tensor(quarter.data(), 0, 4, 1)});
  EXPECT_EQ(read.bytesRead, 512u);
  EXPECT_TRUE(std::equal(quarter.begin(), quarter.end(), values.begin() + 100));
  // A flipped byte in a block it does not read goes unseen by this reader;
  // one in a block it reads is an error naming the file, the tensor and
  // the block's bytes.
  flip(step, 1599);
  EXPECT_NO_THROW(
      readCheckpoint(step, info.modelHash, {tensor(quarter.data(), 0, 4, 1)}));
  flip(step, 1599);
  flip(step, 500);
  try {
    readCheckpoint(step, info.modelHash, {tensor(quarter.data(), 0, 4, 1)});
    FAIL() << "a corrupt block was read";
  } catch (const Error &e) {
    std::string message = e.what();
    EXPECT_NE(message.find("rank-00000.bin: tensor 'w' is corrupt"),
              std::string::npos)
        << message;
    EXPECT_NE(message.find("at bytes [384, 512)"), std::string::npos)
        << message;
  }
}

TEST_F(CheckpointTest, AReaderOfColumnsReadsTheBlocksOfEveryRow) {
  std::string step = save();
  // Columns 5-9: half of every 40-byte row, in every block.
  std::vector<float> half(Rows * Columns / 2, -1.0f);
  CheckpointInfo read =
      readCheckpoint(step, info.modelHash, {tensor(half.data(), 1, 2, 1)});
  EXPECT_EQ(read.bytesRead, 1600u);
  for (int64_t r = 0; r < Rows; ++r)
    for (int64_t c = 0; c < Columns / 2; ++c)
      EXPECT_EQ(half[r * Columns / 2 + c], values[r * Columns + 5 + c]);
}

TEST_F(CheckpointTest, AWholeReaderChecksEveryBlock) {
  std::string step = save();
  std::vector<float> whole(values.size());
  EXPECT_EQ(
      readCheckpoint(step, info.modelHash, {tensor(whole.data())}).bytesRead,
      1600u);
  EXPECT_EQ(whole, values);
  flip(step, 1599);
  EXPECT_THROW(readCheckpoint(step, info.modelHash, {tensor(whole.data())}),
               Error);
}

TEST_F(CheckpointTest, AMalformedBlockListIsAnError) {
  std::string step = save();
  json meta = metadata(step);
  meta["tensors"][0]["chunks"][0]["block_crc32"].erase(0);
  std::ofstream(step + "/metadata.json") << meta.dump();
  std::vector<float> whole(values.size());
  try {
    readCheckpoint(step, info.modelHash, {tensor(whole.data())});
    FAIL() << "a short block list was accepted";
  } catch (const Error &e) {
    EXPECT_NE(std::string(e.what()).find(
                  "'block_crc32' holds 12 CRCs, but a chunk of 1600 bytes in "
                  "blocks of 128 has 13"),
              std::string::npos)
        << e.what();
  }
}

} // namespace
