//===- DataLoaderTest.cpp - Training data order and mapping ---------------===//
//
// The shuffle order against golden values that python/tests/test_data.py
// checks too (the Python twin, python/autopar/data.py), and the loader on
// .npy files: every problem listed before step 1, batches in order and
// shuffled, epochs wrapping.
//
//===----------------------------------------------------------------------===//

#include "autopar/runtime/DataLoader.h"
#include "autopar/runtime/Error.h"
#include "autopar/runtime/Npy.h"

#include "TestUtil.h"

#include "gtest/gtest.h"

#include <algorithm>
#include <numeric>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

using namespace autopar::runtime;
using namespace autopar::runtime::test;

namespace {

TEST(DataLoaderTest, SplitMix64MatchesTheReference) {
  // Vigna's splitmix64.c seeded with 1234567.
  SplitMix64 rng(1234567);
  EXPECT_EQ(rng.next(), 6457827717110365317ull);
  EXPECT_EQ(rng.next(), 3203168211198807973ull);
  EXPECT_EQ(rng.next(), 9817491932198370423ull);
}

TEST(DataLoaderTest, EpochPermutationGoldenValues) {
  using V = std::vector<int64_t>;
  EXPECT_EQ(epochPermutation(0, 0, 10), (V{6, 3, 2, 9, 8, 1, 4, 7, 0, 5}));
  EXPECT_EQ(epochPermutation(42, 1, 10), (V{2, 3, 9, 7, 5, 8, 6, 4, 0, 1}));
  EXPECT_EQ(epochPermutation(~0ull, 3, 7), (V{4, 6, 3, 0, 5, 2, 1}));
  EXPECT_EQ(epochPermutation(7, 0, 1), (V{0}));
  EXPECT_EQ(epochPermutation(7, 0, 0), V{});
}

TEST(DataLoaderTest, EpochPermutationIsAPermutationPerEpoch) {
  std::vector<int64_t> a = epochPermutation(3, 0, 1000);
  std::vector<int64_t> b = epochPermutation(3, 1, 1000);
  EXPECT_NE(a, b);
  std::sort(a.begin(), a.end());
  std::vector<int64_t> identity(1000);
  std::iota(identity.begin(), identity.end(), 0);
  EXPECT_EQ(a, identity);
}

/// A training program's data arguments: x [3, 2] float32, y [3] int64.
std::vector<ArgumentDesc> dataArguments() {
  ArgumentDesc x, y, w;
  x.kind = ArgumentKind::Input;
  x.name = "x";
  x.shape = {3, 2};
  y.kind = ArgumentKind::Input;
  y.name = "y";
  y.dtype = DType::Int64;
  y.shape = {3};
  w.kind = ArgumentKind::Parameter; // Not data: ignored.
  w.name = "w";
  w.shape = {2};
  return {w, x, y};
}

/// \p samples samples: x[i] = {i, -i}, y[i] = 10 i.
void writeData(const TempDir &dir, int64_t samples) {
  std::vector<float> x;
  std::vector<int64_t> y;
  for (int64_t i = 0; i < samples; ++i) {
    x.push_back(static_cast<float>(i));
    x.push_back(static_cast<float>(-i));
    y.push_back(10 * i);
  }
  writeNpy(dir.file("x.npy"), DType::Float32, {samples, 2}, x.data());
  writeNpy(dir.file("y.npy"), DType::Int64, {samples}, y.data());
}

/// The y values (10 x sample index) of the batch at \p position.
std::vector<int64_t> batchOf(DataLoader &loader, const DataPosition &position) {
  std::vector<float> x(6, -1.0f);
  std::vector<int64_t> y(3, -1);
  loader.fill(position, {x.data(), y.data()});
  for (size_t r = 0; r < 3; ++r)
    EXPECT_EQ(x[2 * r], -x[2 * r + 1]);
  for (size_t r = 0; r < 3; ++r)
    EXPECT_EQ(static_cast<int64_t>(x[2 * r]) * 10, y[r]);
  return y;
}

TEST(DataLoaderTest, InOrderDropsTheLastIncompleteBatch) {
  TempDir dir;
  writeData(dir, 7);
  DataLoader loader(dataArguments(), dir.path(), 3, std::nullopt);
  EXPECT_EQ(loader.inputs(), (std::vector<size_t>{1, 2}));
  EXPECT_EQ(loader.samples(), 7);
  EXPECT_EQ(loader.batchesPerEpoch(), 2);
  using V = std::vector<int64_t>;
  DataPosition position;
  EXPECT_EQ(batchOf(loader, position), (V{0, 10, 20}));
  position = loader.next(position);
  EXPECT_EQ(batchOf(loader, position), (V{30, 40, 50}));
  position = loader.next(position);
  EXPECT_EQ(position.epoch, 1);
  EXPECT_EQ(position.batchInEpoch, 0);
  EXPECT_EQ(batchOf(loader, position), (V{0, 10, 20}));
}

TEST(DataLoaderTest, ShuffledFollowsTheEpochPermutation) {
  TempDir dir;
  writeData(dir, 7);
  DataLoader loader(dataArguments(), dir.path(), 3, uint64_t(5));
  // python: list(autopar.data.batches(7, 3, 5, seed=5))
  std::vector<std::vector<int64_t>> expected = {
      {2, 0, 5}, {1, 6, 4}, {5, 6, 4}, {2, 0, 3}, {6, 4, 3}};
  DataPosition position;
  for (const std::vector<int64_t> &samples : expected) {
    EXPECT_EQ(loader.batchSamples(position), samples);
    std::vector<int64_t> y = batchOf(loader, position);
    for (size_t r = 0; r < 3; ++r)
      EXPECT_EQ(y[r], 10 * samples[r]);
    position = loader.next(position);
  }
}

TEST(DataLoaderTest, ListsEveryProblemAtOnce) {
  TempDir dir;
  std::vector<float> x(4);
  writeNpy(dir.file("x.npy"), DType::Float32, {2, 2}, x.data()); // Too few.
  std::vector<double> y(5);
  writeNpy(dir.file("y.npy"), DType::Float64, {5}, y.data()); // Wrong dtype.
  try {
    DataLoader loader(dataArguments(), dir.path(), 3, std::nullopt);
    FAIL() << "expected an error";
  } catch (const Error &error) {
    std::string message = error.what();
    EXPECT_NE(message.find("2 problem(s)"), std::string::npos) << message;
    EXPECT_NE(message.find("x.npy: 2 samples, fewer than one batch (3)"),
              std::string::npos)
        << message;
    EXPECT_NE(message.find("y.npy: dtype float64, expected int64"),
              std::string::npos)
        << message;
  }
  // A missing file and a wrong sample shape.
  TempDir other;
  std::vector<float> z(9);
  writeNpy(other.file("x.npy"), DType::Float32, {3, 3}, z.data());
  try {
    DataLoader loader(dataArguments(), other.path(), 3, std::nullopt);
    FAIL() << "expected an error";
  } catch (const Error &error) {
    std::string message = error.what();
    EXPECT_NE(message.find("x.npy: shape [3, 3], expected [samples, 2]"),
              std::string::npos)
        << message;
    EXPECT_NE(message.find("y.npy: cannot open"), std::string::npos) << message;
  }
}

TEST(DataLoaderTest, MapsRatherThanReadsTheFiles) {
  // A sparse file of 4 GiB of samples: mapping it costs no memory, and a
  // batch reads only its rows. (Reading it whole would need 4 GiB.)
  TempDir dir;
  int64_t samples = int64_t(1) << 29; // x: 8 bytes per sample.
  std::string header;
  {
    std::vector<float> row(2, 0.0f);
    writeNpy(dir.file("x.npy"), DType::Float32, {1, 2}, row.data());
    std::string bytes = readFile(dir.file("x.npy"));
    header = bytes.substr(0, bytes.size() - 8);
  }
  std::string shapeText = "(" + std::to_string(samples) + ", 2)";
  size_t at = header.find("(1, 2)");
  ASSERT_NE(at, std::string::npos);
  // Same header length: take the padding's spaces for the longer shape.
  header.replace(at, 6, shapeText);
  header.erase(header.size() - 1 - (shapeText.size() - 6),
               shapeText.size() - 6);
  writeFile(dir.file("x.npy"), header);
  ASSERT_EQ(truncate(dir.file("x.npy").c_str(),
                     static_cast<off_t>(header.size() + samples * 8)),
            0);
  std::vector<int64_t> y(3, 7);
  writeNpy(dir.file("y.npy"), DType::Int64, {3}, y.data());
  std::vector<ArgumentDesc> args = dataArguments();
  // In a child limited to 1 GiB of data memory (RLIMIT_DATA counts the heap
  // and private writable mappings, not read-only file mappings): a loader
  // that read the file whole would fail there.
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    struct rlimit limit = {rlim_t(1) << 30, rlim_t(1) << 30};
    bool ok = setrlimit(RLIMIT_DATA, &limit) == 0;
    try {
      DataLoader loader(args, dir.path(), 3, std::nullopt);
      std::vector<float> x(6, 1.0f);
      std::vector<int64_t> out(3);
      loader.fill({0, 0}, {x.data(), out.data()});
      ok = ok && loader.samples() == 3 && // The fewest of any file.
           x == std::vector<float>(6, 0.0f) && out == y;
    } catch (...) {
      ok = false;
    }
    _exit(ok ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
}

} // namespace
