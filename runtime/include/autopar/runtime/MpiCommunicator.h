//===- MpiCommunicator.h - Collectives over MPI -----------------*- C++ -*-===//
//
// The CPU implementation of Communicator: MPI_COMM_WORLD for the runtime's own
// traffic, and one communicator per grid axis, made with MPI_Comm_split among
// the ranks that share the other two coordinates (key: the coordinate on the
// axis, so that a rank's index in it is its coordinate).
//
// mpi.h stays out of this header: code that includes it does not need MPI's
// include path.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_RUNTIME_MPICOMMUNICATOR_H
#define AUTOPAR_RUNTIME_MPICOMMUNICATOR_H

#include "autopar/runtime/Communicator.h"
#include "autopar/runtime/World.h"

#include <memory>
#include <vector>

namespace autopar::runtime {

/// MPI itself, for the lifetime of the object: MPI_Init_thread when made,
/// MPI_Finalize when destroyed. One per process.
class MpiEnvironment {
public:
  /// Initializes MPI, asking for MPI_THREAD_MULTIPLE so that the watchdog
  /// thread may call MPI_Abort, and routes fatalError to MPI_Abort. Throws
  /// Error unless MPI's world is the one the launcher's environment announced
  /// (\p world): a mismatch means autopar-run's MPI is not the launcher's.
  explicit MpiEnvironment(const WorldInfo &world);
  ~MpiEnvironment();
  MpiEnvironment(const MpiEnvironment &) = delete;
  MpiEnvironment &operator=(const MpiEnvironment &) = delete;

  /// The world ranks that pass true, on every rank (collective). How the
  /// ranks agree that all of them loaded, or learn who did not.
  std::vector<int64_t> ranksWhere(bool condition) const;

  /// How many ranks share this rank's node (MPI_COMM_TYPE_SHARED).
  int64_t ranksOnThisNode() const;

  /// This rank's index among the ranks of its node, in world-rank order, and
  /// their number (MPI_COMM_TYPE_SHARED). Collective.
  NodePlacement nodePlacement() const;

  /// True while an MpiEnvironment exists.
  static bool isInitialized();
};

class MpiCommunicator : public Communicator {
public:
  /// Makes the axis communicators: for each grid axis, MPI_Comm_split of the
  /// world by the other two coordinates, ordered by this axis' coordinate.
  /// \p coords: every world rank's grid coordinates. Collective; needs an
  /// MpiEnvironment. Throws Error.
  static std::unique_ptr<MpiCommunicator>
  create(const GridVector &grid, std::vector<GridVector> coords);

  /// Frees the axis communicators.
  ~MpiCommunicator() override;

  void maxOverWorld(double *values, int count) override;

protected:
  AUTOPAR_COMMUNICATOR_OPERATIONS
  void doExchange(const std::vector<Message> &sends,
                  const std::vector<Message> &receives,
                  CommScope scope) override;

private:
  struct Comms;
  MpiCommunicator(int64_t rank, const GridVector &grid,
                  std::vector<GridVector> coords, std::unique_ptr<Comms> comms);

  std::unique_ptr<Comms> comms;
};

} // namespace autopar::runtime

#endif // AUTOPAR_RUNTIME_MPICOMMUNICATOR_H
