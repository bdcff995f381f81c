//===- DataLoader.h - Training data: mapped .npy, batch order --*- C++ -*-===//
//
// `autopar-run --train --data DIR` reads one `.npy` per data input
// (docs/training.md, "Data"). The files are memory-mapped read-only and never
// read whole: each step copies only its batch's rows into the program's input
// buffers, so a data set larger than memory trains as well as a small one.
//
// The order: step s takes the batch at the current DataPosition (epoch,
// batch within the epoch); each epoch visits the samples in order, or, with
// `--shuffle SEED`, in epochPermutation(SEED, epoch, samples)
// (docs/design/training-artifact.md, "Shuffle order";
// python/autopar/data.py is its twin). The last incomplete batch of an epoch
// is dropped.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_RUNTIME_DATALOADER_H
#define AUTOPAR_RUNTIME_DATALOADER_H

#include "autopar/runtime/Manifest.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace autopar::runtime {

/// Vigna's SplitMix64 (prng.di.unimi.it/splitmix64.c): the state advances
/// by 0x9E3779B97F4A7C15, then is mixed.
class SplitMix64 {
public:
  explicit SplitMix64(uint64_t seed) : state(seed) {}
  uint64_t next();

private:
  uint64_t state;
};

/// The order in which epoch \p epoch (0-based) visits \p n samples under
/// `--shuffle SEED`: a Fisher-Yates shuffle of the identity, for i = n-1
/// down to 1: j = next() mod (i+1), swap(p[i], p[j]), with SplitMix64
/// seeded with SEED ^ (epoch * 0x9E3779B97F4A7C15 mod 2^64).
std::vector<int64_t> epochPermutation(uint64_t seed, int64_t epoch, int64_t n);

/// Where the data stands: the batch the next step takes.
struct DataPosition {
  int64_t epoch = 0;
  /// 0-based, below DataLoader::batchesPerEpoch().
  int64_t batchInEpoch = 0;
};

/// The data inputs of a training program, mapped from their files.
class DataLoader {
public:
  /// Maps `dir/<name>.npy` for every `input` of \p arguments and checks them
  /// all (file present and readable, dtype, shape[1:], at least
  /// \p globalBatch samples) before anything runs; throws one Error listing
  /// every problem. The samples of an epoch are the fewest any file has.
  DataLoader(const std::vector<ArgumentDesc> &arguments, std::string dir,
             int64_t globalBatch, std::optional<uint64_t> shuffleSeed);
  ~DataLoader();
  DataLoader(const DataLoader &) = delete;
  DataLoader &operator=(const DataLoader &) = delete;

  /// Indices into the arguments of the data inputs, in call order.
  const std::vector<size_t> &inputs() const { return inputIndices; }
  int64_t samples() const { return sampleCount; }
  int64_t batchesPerEpoch() const { return sampleCount / batch; }
  const std::string &directory() const { return dir; }

  /// The sample indices of the batch at \p position, in the order they fill
  /// the batch.
  std::vector<int64_t> batchSamples(const DataPosition &position);

  /// Makes fill() copy only samples [first, first + count) of each batch:
  /// a data-parallel replica's share (the buffers then hold count rows).
  void selectShare(int64_t first, int64_t count);

  /// Copies the rows of the batch at \p position into \p buffers (one per
  /// inputs(), each global-batch rows of its input, or the share's rows).
  void fill(const DataPosition &position, const std::vector<void *> &buffers);

  /// The position after \p position: the next batch, or the next epoch's
  /// first.
  DataPosition next(const DataPosition &position) const;

private:
  struct MappedInput;
  std::string dir;
  int64_t batch;
  /// The samples of each batch fill() copies (selectShare).
  int64_t shareFirst = 0, shareCount = -1;
  std::optional<uint64_t> shuffleSeed;
  std::vector<size_t> inputIndices;
  std::vector<std::unique_ptr<MappedInput>> mapped;
  int64_t sampleCount = 0;
  /// The permutation of `permutationEpoch` (shuffled runs only).
  std::vector<int64_t> permutation;
  int64_t permutationEpoch = -1;
};

} // namespace autopar::runtime

#endif // AUTOPAR_RUNTIME_DATALOADER_H
