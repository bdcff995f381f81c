//===- Grid.cpp - The device grid of a parallel plan ----------------------===//

#include "autopar/runtime/Grid.h"

namespace autopar::runtime {

namespace {
constexpr int DP = static_cast<int>(GridAxis::DP);
constexpr int TP = static_cast<int>(GridAxis::TP);
constexpr int PP = static_cast<int>(GridAxis::PP);
} // namespace

std::string_view gridAxisName(GridAxis axis) {
  switch (axis) {
  case GridAxis::DP:
    return "dp";
  case GridAxis::TP:
    return "tp";
  case GridAxis::PP:
    return "pp";
  }
  return "?";
}

std::optional<GridAxis> parseGridAxis(std::string_view name) {
  for (GridAxis axis : {GridAxis::DP, GridAxis::TP, GridAxis::PP})
    if (gridAxisName(axis) == name)
      return axis;
  return std::nullopt;
}

int64_t defaultRankOf(const GridVector &sizes, const GridVector &coords) {
  return (coords[PP] * sizes[DP] + coords[DP]) * sizes[TP] + coords[TP];
}

GridVector defaultCoordsOf(const GridVector &sizes, int64_t rank) {
  GridVector coords{};
  coords[TP] = rank % sizes[TP];
  rank /= sizes[TP];
  coords[DP] = rank % sizes[DP];
  coords[PP] = rank / sizes[DP];
  return coords;
}

} // namespace autopar::runtime
