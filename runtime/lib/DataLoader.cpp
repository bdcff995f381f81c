//===- DataLoader.cpp - Training data: mapped .npy files, batch order -----===//

#include "autopar/runtime/DataLoader.h"

#include "autopar/runtime/Error.h"
#include "autopar/runtime/Npy.h"
#include "autopar/runtime/TensorFiles.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <numeric>
#include <sys/mman.h>
#include <unistd.h>

namespace autopar::runtime {

constexpr uint64_t GoldenGamma = 0x9E3779B97F4A7C15ull;

uint64_t SplitMix64::next() {
  uint64_t z = (state += GoldenGamma);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

std::vector<int64_t> epochPermutation(uint64_t seed, int64_t epoch, int64_t n) {
  // Unsigned arithmetic: the product wraps modulo 2^64, as the spec says.
  SplitMix64 rng(seed ^ (static_cast<uint64_t>(epoch) * GoldenGamma));
  std::vector<int64_t> p(static_cast<size_t>(n));
  std::iota(p.begin(), p.end(), int64_t(0));
  for (int64_t i = n - 1; i >= 1; --i) {
    uint64_t j = rng.next() % static_cast<uint64_t>(i + 1);
    std::swap(p[static_cast<size_t>(i)], p[static_cast<size_t>(j)]);
  }
  return p;
}

/// One data file, mapped read-only: the kernel pages in only the rows a
/// batch touches (and may drop them again under memory pressure).
struct DataLoader::MappedInput {
  std::string path;
  void *base = MAP_FAILED;
  size_t length = 0;
  /// Where the rows start in the mapping, and the bytes of one row.
  const char *rows = nullptr;
  size_t rowBytes = 0;

  ~MappedInput() {
    if (base != MAP_FAILED)
      munmap(base, length);
  }
};

DataLoader::DataLoader(const std::vector<ArgumentDesc> &arguments,
                       std::string dirPath, int64_t globalBatch,
                       std::optional<uint64_t> seed)
    : dir(std::move(dirPath)), batch(globalBatch), shuffleSeed(seed) {
  std::vector<std::string> problems;
  for (size_t i = 0; i < arguments.size(); ++i) {
    const ArgumentDesc &arg = arguments[i];
    if (arg.kind != ArgumentKind::Input)
      continue;
    std::string path = dir + "/" + tensorFileName(arg.name);
    NpyLayout layout;
    try {
      layout = readNpyLayout(path);
    } catch (const Error &e) {
      problems.push_back(e.what());
      continue;
    }
    Shape sample(arg.shape.begin() + (arg.shape.empty() ? 0 : 1),
                 arg.shape.end());
    Shape found(layout.shape.begin() + (layout.shape.empty() ? 0 : 1),
                layout.shape.end());
    if (layout.dtype != npyStorageDType(arg.dtype)) {
      problems.push_back(path + ": dtype " +
                         std::string(dtypeName(layout.dtype)) + ", expected " +
                         std::string(dtypeName(arg.dtype)));
      continue;
    }
    if (layout.shape.empty() || found != sample) {
      problems.push_back(path + ": shape " + formatShape(layout.shape) +
                         ", expected [samples" + (sample.empty() ? "" : ", ") +
                         formatShape(sample).substr(1));
      continue;
    }
    if (layout.shape[0] < globalBatch) {
      problems.push_back(path + ": " + std::to_string(layout.shape[0]) +
                         " samples, fewer than one batch (" +
                         std::to_string(globalBatch) + ")");
      continue;
    }
    auto input = std::make_unique<MappedInput>();
    input->path = path;
    input->rowBytes = static_cast<size_t>(layout.dataBytes / layout.shape[0]);
    input->length = static_cast<size_t>(layout.dataOffset + layout.dataBytes);
    if (layout.dataBytes > 0) {
      int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
      if (fd >= 0) {
        input->base =
            mmap(nullptr, input->length, PROT_READ, MAP_PRIVATE, fd, 0);
        ::close(fd); // The mapping keeps the file.
      }
      if (input->base == MAP_FAILED) {
        problems.push_back(path + ": cannot map: " + std::strerror(errno));
        continue;
      }
      // A hint only: shuffled batches jump around the file.
      madvise(input->base, input->length,
              shuffleSeed ? MADV_RANDOM : MADV_SEQUENTIAL);
      input->rows = static_cast<const char *>(input->base) + layout.dataOffset;
    }
    sampleCount = mapped.empty() ? layout.shape[0]
                                 : std::min(sampleCount, layout.shape[0]);
    inputIndices.push_back(i);
    mapped.push_back(std::move(input));
  }
  if (!problems.empty()) {
    std::string message = "--data " + dir + ": " +
                          std::to_string(problems.size()) +
                          " problem(s) with the training data:";
    for (const std::string &p : problems)
      message += "\n  " + p;
    throw Error(message);
  }
}

DataLoader::~DataLoader() = default;

std::vector<int64_t> DataLoader::batchSamples(const DataPosition &position) {
  std::vector<int64_t> samples(static_cast<size_t>(batch));
  int64_t first = position.batchInEpoch * batch;
  if (!shuffleSeed) {
    std::iota(samples.begin(), samples.end(), first);
    return samples;
  }
  if (permutationEpoch != position.epoch) {
    permutation = epochPermutation(*shuffleSeed, position.epoch, sampleCount);
    permutationEpoch = position.epoch;
  }
  std::copy_n(permutation.begin() + first, batch, samples.begin());
  return samples;
}

void DataLoader::selectShare(int64_t first, int64_t count) {
  if (first < 0 || count < 1 || first + count > batch)
    throw Error("--data " + dir + ": samples [" + std::to_string(first) + ", " +
                std::to_string(first + count) +
                ") are not a share of a batch of " + std::to_string(batch));
  shareFirst = first;
  shareCount = count;
}

void DataLoader::fill(const DataPosition &position,
                      const std::vector<void *> &buffers) {
  if (position.batchInEpoch < 0 || position.batchInEpoch >= batchesPerEpoch())
    throw Error("--data " + dir + ": batch " +
                std::to_string(position.batchInEpoch) +
                " of an epoch requested, but an epoch has " +
                std::to_string(batchesPerEpoch()));
  std::vector<int64_t> samples = batchSamples(position);
  if (shareCount > 0)
    samples = std::vector<int64_t>(samples.begin() + shareFirst,
                                   samples.begin() + shareFirst + shareCount);
  for (size_t k = 0; k < mapped.size(); ++k) {
    const MappedInput &input = *mapped[k];
    char *out = static_cast<char *>(buffers[k]);
    if (input.rowBytes == 0)
      continue; // An input with a zero-sized dimension has no bytes.
    if (!shuffleSeed) {
      // In order, a batch is one contiguous range of rows.
      std::memcpy(out, input.rows + samples[0] * input.rowBytes,
                  input.rowBytes * samples.size());
      continue;
    }
    for (size_t r = 0; r < samples.size(); ++r)
      std::memcpy(out + r * input.rowBytes,
                  input.rows + samples[r] * input.rowBytes, input.rowBytes);
  }
}

DataPosition DataLoader::next(const DataPosition &position) const {
  if (position.batchInEpoch + 1 < batchesPerEpoch())
    return {position.epoch, position.batchInEpoch + 1};
  return {position.epoch + 1, 0};
}

} // namespace autopar::runtime
