//===- Error.h - Errors reported by the autopar runtime ---------*- C++ -*-===//
//
// Every problem the runtime can diagnose (a bad manifest, a missing file, a
// shape mismatch) is thrown as an Error and reported once by autopar-run as
// "autopar-run: error: <message>". Exceptions keep the loading code linear:
// each step either succeeds or says exactly what is wrong, with no error codes
// threaded through every call.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_RUNTIME_ERROR_H
#define AUTOPAR_RUNTIME_ERROR_H

#include <stdexcept>
#include <string>

namespace autopar::runtime {

/// A user-facing error. The message is a complete sentence fragment naming the
/// file, key or tensor at fault, without the "autopar-run: error: " prefix.
class Error : public std::runtime_error {
public:
  explicit Error(const std::string &message) : std::runtime_error(message) {}
};

} // namespace autopar::runtime

#endif // AUTOPAR_RUNTIME_ERROR_H
