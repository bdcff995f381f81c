//===- Grid.h - The device grid of a parallel plan --------------*- C++ -*-===//
//
// A plan arranges its ranks in a three-dimensional grid: data parallel (dp),
// tensor parallel (tp) and pipeline parallel (pp). Each rank has one
// coordinate per axis; tensors may be split over an axis, and collectives run
// among the ranks that differ only in one axis' coordinate.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_RUNTIME_GRID_H
#define AUTOPAR_RUNTIME_GRID_H

#include <array>
#include <cstdint>
#include <optional>
#include <string_view>

namespace autopar::runtime {

/// A grid axis. The values are what generated code passes as `axis` to the
/// collective entry points (docs/design/artifact.md).
enum class GridAxis : uint8_t { DP = 0, TP = 1, PP = 2 };

constexpr int NumGridAxes = 3;

/// "dp", "tp" or "pp".
std::string_view gridAxisName(GridAxis axis);

/// Parses "dp", "tp" or "pp".
std::optional<GridAxis> parseGridAxis(std::string_view name);

/// One number per axis, indexed by GridAxis.
using GridVector = std::array<int64_t, NumGridAxes>;

/// The rank at \p coords when no coordinates are given explicitly: tp varies
/// fastest, then dp, then pp (Megatron-LM's order, which keeps tensor-parallel
/// groups on neighbouring ranks, i.e. inside a node).
int64_t defaultRankOf(const GridVector &sizes, const GridVector &coords);

/// The inverse of defaultRankOf.
GridVector defaultCoordsOf(const GridVector &sizes, int64_t rank);

} // namespace autopar::runtime

#endif // AUTOPAR_RUNTIME_GRID_H
