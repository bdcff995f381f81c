//===- FuzzUtil.cpp - Helpers shared by the fuzz targets ------------------===//

#include "FuzzUtil.h"

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <unistd.h>

namespace autopar::fuzz {

namespace {
struct ScratchDir {
  std::string path;
  ScratchDir() {
    std::string base = "/dev/shm";
    if (access(base.c_str(), W_OK) != 0) {
      const char *tmp = std::getenv("TMPDIR");
      base = tmp && *tmp ? tmp : "/tmp";
    }
    std::string pattern = base + "/autopar-fuzz-XXXXXX";
    if (!mkdtemp(pattern.data())) {
      std::perror("autopar-fuzz: mkdtemp");
      std::abort();
    }
    path = pattern;
  }
  ~ScratchDir() {
    std::error_code error;
    std::filesystem::remove_all(path, error);
  }
};
} // namespace

const std::string &scratchDir() {
  static ScratchDir dir;
  return dir.path;
}

void writeFile(const std::string &path, const uint8_t *data, size_t size) {
  std::ofstream file(path, std::ios::binary | std::ios::trunc);
  file.write(reinterpret_cast<const char *>(data),
             static_cast<std::streamsize>(size));
  file.close();
  if (!file) {
    std::fprintf(stderr, "autopar-fuzz: cannot write %s\n", path.c_str());
    std::abort();
  }
}

} // namespace autopar::fuzz
