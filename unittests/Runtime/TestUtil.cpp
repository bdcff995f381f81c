//===- TestUtil.cpp - Helpers shared by the runtime tests -----------------===//

#include "TestUtil.h"

#include "gtest/gtest.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <sys/wait.h>

namespace fs = std::filesystem;

namespace autopar::runtime::test {

TempDir::TempDir() {
  const char *base = std::getenv("TMPDIR");
  std::string pattern =
      std::string(base && *base ? base : "/tmp") + "/autopar-rt-test-XXXXXX";
  std::vector<char> buffer(pattern.begin(), pattern.end());
  buffer.push_back('\0');
  if (!mkdtemp(buffer.data()))
    ADD_FAILURE() << "mkdtemp failed for " << pattern;
  dir = buffer.data();
}

TempDir::~TempDir() {
  std::error_code ignored;
  fs::remove_all(dir, ignored);
}

std::string TempDir::file(const std::string &name) const {
  return dir + "/" + name;
}

void writeFile(const std::string &path, const std::string &bytes) {
  std::ofstream file(path, std::ios::binary | std::ios::trunc);
  file << bytes;
  file.close();
  ASSERT_TRUE(file.good()) << "cannot write " << path;
}

std::string readFile(const std::string &path) {
  std::ifstream file(path, std::ios::binary);
  EXPECT_TRUE(file.good()) << "cannot read " << path;
  std::ostringstream text;
  text << file.rdbuf();
  return text.str();
}

std::string shellQuote(const std::string &text) {
  std::string quoted = "'";
  for (char c : text) {
    if (c == '\'')
      quoted += "'\\''";
    else
      quoted += c;
  }
  return quoted + "'";
}

CommandResult runCommand(const std::string &command) {
  TempDir capture;
  std::string out = capture.file("stdout"), err = capture.file("stderr");
  int status = std::system(
      (command + " >" + shellQuote(out) + " 2>" + shellQuote(err)).c_str());
  CommandResult result;
  result.exitCode = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  result.out = readFile(out);
  result.err = readFile(err);
  return result;
}

void expectRunError(const CommandResult &result, const std::string &expected) {
  EXPECT_EQ(result.exitCode, 1) << result.out << result.err;
  EXPECT_EQ(result.err.rfind("autopar-run: error: ", 0), 0u) << result.err;
  EXPECT_NE(result.err.find(expected), std::string::npos)
      << "expected \"" << expected << "\" in: " << result.err;
}

} // namespace autopar::runtime::test
