//===- TestUtil.h - Helpers shared by the runtime tests ---------*- C++ -*-===//

#ifndef AUTOPAR_UNITTESTS_RUNTIME_TESTUTIL_H
#define AUTOPAR_UNITTESTS_RUNTIME_TESTUTIL_H

#include <cstdint>
#include <string>
#include <vector>

namespace autopar::runtime::test {

/// A fresh directory under $TMPDIR (or /tmp), removed with its contents when
/// the object dies.
class TempDir {
public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir &) = delete;
  TempDir &operator=(const TempDir &) = delete;

  const std::string &path() const { return dir; }
  /// path() + "/" + name.
  std::string file(const std::string &name) const;

private:
  std::string dir;
};

/// Writes \p bytes to \p path (replacing it); fails the test on error.
void writeFile(const std::string &path, const std::string &bytes);

/// Reads \p path entirely; fails the test on error.
std::string readFile(const std::string &path);

/// The raw bytes of \p values.
template <typename T> std::string bytesOf(const std::vector<T> &values) {
  return std::string(reinterpret_cast<const char *>(values.data()),
                     values.size() * sizeof(T));
}

/// What a finished process left behind.
struct CommandResult {
  int exitCode = -1;
  std::string out;
  std::string err;
};

/// Runs the shell command \p command, capturing stdout and stderr.
CommandResult runCommand(const std::string &command);

/// Expects \p result to have failed with exit status 1 and a stderr that is
/// an "autopar-run: error:" line containing \p expected.
void expectRunError(const CommandResult &result, const std::string &expected);

/// \p text quoted for the shell.
std::string shellQuote(const std::string &text);

} // namespace autopar::runtime::test

#endif // AUTOPAR_UNITTESTS_RUNTIME_TESTUTIL_H
