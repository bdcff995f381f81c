//===- PlanSegment.cpp - Exact tensor-parallel sharding of a segment ------===//
//
// A dynamic program over the ops of a segment in program order. Its state is
// the sharding of every live activation; each op picks one of its options
// (replicate, or split one loop), paying its compute time and the
// collectives that bring its operands to the shardings the option needs.
// Transformer segments keep at most a handful of activations live, so the
// state space stays small, and the result is exact for the cost model:
// Megatron's column/row split of the MLP (split n, then split k with one
// all-reduce of the partial sum) falls out of it rather than being written
// in.
//
//===----------------------------------------------------------------------===//

#include "PlannerImpl.h"

#include "llvm/ADT/DenseMap.h"

#include <map>

using namespace mlir;
namespace autopar::plan {

static bool isSplit(TensorSharding s) { return s >= 0; }

/// An all-reduce over the tp group (a partial gradient or result).
static double tpAllReduceSeconds(double bytes, const CostContext &ctx) {
  if (ctx.tpGroup.size <= 1)
    return 0;
  return collectiveTime(*ctx.cluster, Collective::AllReduce, bytes, ctx.tpGroup)
      .seconds;
}

double opComputeSeconds(const ProgramGraph &graph, const PlanOp &op,
                        const OpOption &option, int64_t tp,
                        const CostContext &ctx) {
  if (op.free || !op.cost.executes)
    return 0;
  double divide = option.splitLoop >= 0 ? tp : 1;
  double flops = op.cost.flops * ctx.batchScale / divide;
  double resultBytes = 0;
  if (op.result >= 0) {
    resultBytes = ctx.bytes(graph.values[op.result]);
    if (isSplit(option.result))
      resultBytes /= tp;
  }
  // A fused producer writes nothing; its user does not read it back, nor
  // an init its body ignores.
  double bytes = op.resultFused ? 0 : resultBytes;
  for (auto [k, id] : llvm::enumerate(op.operands)) {
    if (id < 0 || (k < 64 && (op.unreadOperands >> k) & 1))
      continue;
    const ValueInfo &v = graph.values[id];
    double b = ctx.bytes(v);
    if (k < option.operands.size() && isSplit(option.operands[k]))
      b /= tp;
    if (int64_t(k) == op.gatheredOperand)
      b = std::min(b, resultBytes);
    bytes += b;
  }
  return computeTime(*ctx.cluster, ctx.precision, op.cost.kind, flops, bytes,
                     op.cost.minDim)
      .seconds;
}

std::optional<Collective> reshardCollective(TensorSharding from,
                                            TensorSharding to, bool backward) {
  if (from == to)
    return std::nullopt;
  // Forward conversions and their gradients' (reverse) conversions.
  if (from == kReplicated) // slicing is free; its gradient is gathered
    return backward ? std::optional(Collective::AllGather) : std::nullopt;
  if (from == kPartial) {
    if (to == kReplicated) // all-reduce; the gradient is just replicated
      return backward ? std::nullopt : std::optional(Collective::AllReduce);
    return backward ? Collective::AllGather : Collective::ReduceScatter;
  }
  if (to == kReplicated)
    return backward ? Collective::ReduceScatter : Collective::AllGather;
  return Collective::AllToAll;
}

double optimizerSeconds(const CostContext &ctx, double elements) {
  // AdamW reads and writes parameters, gradients, master weights and
  // moments: memory-bound.
  double bytesPerParam = ctx.precision == Precision::FP32 ? 4 * 7 : 30;
  return computeTime(*ctx.cluster, ctx.precision, ComputeKind::Elementwise,
                     12 * elements, bytesPerParam * elements)
      .seconds;
}

double reshardMessageBytes(Collective c, double bytes, int64_t n) {
  return c == Collective::AllToAll ? bytes / n : bytes;
}

double reshardSeconds(TensorSharding from, TensorSharding to, double bytes,
                      const CostContext &ctx, bool backward) {
  if (ctx.tpGroup.size <= 1)
    return 0;
  std::optional<Collective> c = reshardCollective(from, to, backward);
  if (!c)
    return 0;
  return collectiveTime(*ctx.cluster, *c, bytes, ctx.tpGroup).seconds;
}

namespace {
/// The cost of what the partitioned program could not do: a collective of a
/// tensor the runtime has none for. Large, so that any other way wins;
/// finite, so that sums stay ordered.
constexpr double kUnplannable = 1e30;

struct Entry {
  double cost;
  int64_t prev; // index of the state this came from
  int option;   // option chosen for the op
};
/// One DP layer: states (sharding of each tracked value) and their entries.
struct Layer {
  std::vector<int64_t> slots; // tracked value ids
  std::map<std::vector<int>, int64_t> index;
  std::vector<std::vector<int>> keys;
  std::vector<Entry> entries;
  void add(std::vector<int> key, Entry e) {
    auto [it, inserted] = index.try_emplace(key, entries.size());
    if (inserted) {
      keys.push_back(std::move(key));
      entries.push_back(e);
    } else if (e.cost < entries[it->second].cost) {
      entries[it->second] = e;
    }
  }
};
/// Beyond this many states per op the cheapest are kept (never reached by
/// the models tested; a guard against pathological graphs).
constexpr size_t kMaxStates = 4096;
} // namespace

static bool optionFits(const PlanOp &op, const OpOption &option, int64_t tp) {
  if (option.splitLoop < 0)
    return true;
  if (tp <= 1)
    return false;
  if (option.splitLoop >= int64_t(op.loopRanges.size()))
    return false;
  int64_t range = op.loopRanges[option.splitLoop];
  return range >= tp && range % tp == 0;
}

int64_t segmentInput(const ProgramGraph &graph, const Segment &segment) {
  return segment.first > 0 ? graph.ops[segment.first - 1].result : -1;
}

llvm::SmallVector<TensorSharding>
boundaryShardings(const ProgramGraph &graph, int64_t valueId, int64_t tp) {
  llvm::SmallVector<TensorSharding> result = {kReplicated};
  if (tp <= 1 || valueId < 0 || !graph.values[valueId].isActivation ||
      graph.values[valueId].isResult)
    return result;
  const ValueInfo &v = graph.values[valueId];
  for (auto [d, size] : llvm::enumerate(v.shape)) {
    int64_t range = splittableRange(size, v.batch[d], graph.globalBatch);
    if (range >= tp && range % tp == 0)
      result.push_back(TensorSharding(d));
  }
  return result;
}

bool isSequenceSplit(const ProgramGraph &graph, int64_t valueId,
                     TensorSharding s) {
  if (valueId < 0 || s < 0)
    return false;
  return s + 1 < int64_t(graph.values[valueId].shape.size());
}

std::vector<bool> residualStreamBoundaries(const ProgramGraph &graph) {
  int64_t n = graph.segments.size();
  std::vector<bool> result(n, false);
  // Activations of tokens by features with a sequence dim tp could split.
  std::vector<const ValueInfo *> tokens(n, nullptr);
  for (int64_t k = 1; k < n; ++k) {
    int64_t id = segmentInput(graph, graph.segments[k]);
    if (id < 0)
      continue;
    const ValueInfo &v = graph.values[id];
    if (!v.isActivation || v.isResult || v.shape.size() < 2 ||
        v.shape.size() > 3)
      continue;
    for (size_t d = 0; d + 1 < v.shape.size(); ++d)
      if (splittableRange(v.shape[d], v.batch[d], graph.globalBatch) > 1)
        tokens[k] = &v;
  }
  // The residual stream's size: its elements and features, so that a
  // [batch * sequence, hidden] matmul result before its reshape is one with
  // the [batch, sequence, hidden] activations; inside the layers, or the
  // commonest.
  auto sizeOf = [](const ValueInfo &v) {
    return std::make_pair(numElements(v.shape), v.shape.back());
  };
  std::map<std::pair<double, int64_t>, int64_t> inLayers, all;
  for (int64_t k = 1; k < n; ++k) {
    if (!tokens[k])
      continue;
    ++all[sizeOf(*tokens[k])];
    if (graph.segments[k - 1].layerIndex >= 0 &&
        graph.segments[k].layerIndex >= 0)
      ++inLayers[sizeOf(*tokens[k])];
  }
  const auto &counts = inLayers.empty() ? all : inLayers;
  if (counts.empty())
    return result;
  auto commonest = llvm::max_element(
      counts, [](const auto &a, const auto &b) { return a.second < b.second; });
  for (int64_t k = 1; k < n; ++k)
    result[k] = tokens[k] && sizeOf(*tokens[k]) == commonest->first;
  return result;
}

TensorSharding leavingSharding(const ProgramGraph &graph,
                               const Segment &segment, SegmentBoundary boundary,
                               int64_t id) {
  if (id == graph.ops[segment.last].result && !graph.values[id].isResult)
    return boundary.out;
  return kReplicated;
}

std::vector<SegmentCost>
solveSegmentForOutputs(const ProgramGraph &graph, const Segment &segment,
                       int64_t tp, const CostContext &ctx, TensorSharding in,
                       llvm::ArrayRef<TensorSharding> outs) {
  bool training = ctx.mode == PlanMode::Training;
  auto tracked = [&](int64_t id) {
    return id >= 0 && graph.values[id].isActivation;
  };
  auto liveAfter = [&](int64_t id, int64_t i) {
    const ValueInfo &v = graph.values[id];
    return v.lastUse > i || v.isResult;
  };
  // Converting value `id`; never a collective the runtime does not have.
  auto convert = [&](TensorSharding from, TensorSharding to, int64_t id) {
    const ValueInfo &v = graph.values[id];
    double bytes = ctx.bytes(v);
    if (tp > 1 && !v.communicable && reshardCollective(from, to, false))
      return kUnplannable;
    double c = reshardSeconds(from, to, bytes, ctx, /*backward=*/false);
    if (training)
      c += reshardSeconds(from, to, bytes, ctx, /*backward=*/true);
    return c;
  };
  auto allReduce = [&](double bytes) { return tpAllReduceSeconds(bytes, ctx); };
  int64_t inputId = segmentInput(graph, segment);

  std::vector<Layer> layers(1);
  layers[0].add({}, {0, -1, -1});
  for (int64_t i = segment.first; i <= segment.last; ++i) {
    const PlanOp &op = graph.ops[i];
    Layer &cur = layers.back();
    // Activations from before the segment enter replicated, except the one
    // the previous segment hands on, which has the boundary's sharding.
    for (int64_t id : op.operands)
      if (tracked(id) && !llvm::is_contained(cur.slots, id)) {
        cur.slots.push_back(id);
        for (auto &key : cur.keys)
          key.push_back(id == inputId ? in : kReplicated);
        cur.index.clear();
        for (auto [k, key] : llvm::enumerate(cur.keys))
          cur.index[key] = k;
      }
    Layer next;
    for (int64_t id : cur.slots)
      if (liveAfter(id, i))
        next.slots.push_back(id);
    bool trackResult = tracked(op.result) && liveAfter(op.result, i);
    if (trackResult)
      next.slots.push_back(op.result);

    for (int64_t s = 0; s < int64_t(cur.entries.size()); ++s) {
      const std::vector<int> &key = cur.keys[s];
      for (int o = 0; o < int(op.options.size()); ++o) {
        const OpOption &option = op.options[o];
        if (!optionFits(op, option, tp))
          continue;
        double cost =
            cur.entries[s].cost +
            opComputeSeconds(graph, op, option, tp, ctx) * (training ? 3 : 1);
        if (option.reducesResult)
          cost += option.resultAllReduces *
                  convert(kPartial, kReplicated, op.result);
        for (auto [k, id] : llvm::enumerate(op.operands)) {
          if (!tracked(id))
            continue;
          int64_t slot = llvm::find(cur.slots, id) - cur.slots.begin();
          double bytes = ctx.bytes(graph.values[id]);
          cost += convert(key[slot], option.operands[k], id);
          if (training && option.splitLoop >= 0 &&
              option.wholeOperandOfSplitOp[k])
            cost += allReduce(bytes); // its gradient is a partial sum
        }
        // Whole weights of a split op: their gradient is all-reduced over tp
        // (once per step; charged here as if per micro-batch, the
        // conservative choice the DP has to make without knowing m).
        if (training && option.splitLoop >= 0)
          for (auto [k, id] : llvm::enumerate(op.operands))
            if (id >= 0 && graph.values[id].isParameter &&
                !isSplit(option.operands[k]))
              cost += allReduce(ctx.bytes(graph.values[id]));
        // Every rank updates the weights it holds: a split weight (an
        // embedding table split by vocabulary) updates 1/tp of them.
        if (training)
          for (auto [k, id] : llvm::enumerate(op.operands))
            if (id >= 0 && graph.values[id].isParameter)
              cost += optimizerSeconds(
                  ctx, numElements(graph.values[id].shape) /
                           (isSplit(option.operands[k]) ? tp : 1));
        std::vector<int> nextKey;
        for (int64_t id : next.slots) {
          if (id == op.result && trackResult) {
            nextKey.push_back(option.result);
            continue;
          }
          int64_t slot = llvm::find(cur.slots, id) - cur.slots.begin();
          nextKey.push_back(key[slot]);
        }
        next.add(std::move(nextKey), {cost, s, o});
      }
    }
    if (next.entries.size() > kMaxStates) {
      std::vector<int64_t> order(next.entries.size());
      for (size_t k = 0; k < order.size(); ++k)
        order[k] = k;
      std::partial_sort(order.begin(), order.begin() + kMaxStates, order.end(),
                        [&](int64_t a, int64_t b) {
                          return next.entries[a].cost < next.entries[b].cost;
                        });
      Layer pruned;
      pruned.slots = next.slots;
      for (size_t k = 0; k < kMaxStates; ++k)
        pruned.add(next.keys[order[k]], next.entries[order[k]]);
      next = std::move(pruned);
    }
    layers.push_back(std::move(next));
  }

  // For each way of handing the activation on, the best final state, and
  // the options that lead to it.
  Layer &last = layers.back();
  int64_t n = segment.last - segment.first + 1;
  std::vector<SegmentCost> results;
  for (TensorSharding out : outs) {
    SegmentBoundary boundary{in, out};
    int64_t bestState = -1;
    double bestCost = 0;
    for (int64_t s = 0; s < int64_t(last.entries.size()); ++s) {
      double cost = last.entries[s].cost;
      for (auto [k, id] : llvm::enumerate(last.slots))
        cost += convert(last.keys[s][k],
                        leavingSharding(graph, segment, boundary, id), id);
      if (bestState < 0 || cost < bestCost) {
        bestState = s;
        bestCost = cost;
      }
    }
    std::vector<int> choice(n, 0);
    for (int64_t i = n, s = bestState; i > 0; --i) {
      const Entry &e = layers[i].entries[s];
      choice[i - 1] = e.option;
      s = e.prev;
    }
    results.push_back(
        evaluateSegment(graph, segment, tp, ctx, std::move(choice), boundary));
    results.back().objective = bestCost;
  }
  return results;
}

SegmentCost solveSegment(const ProgramGraph &graph, const Segment &segment,
                         int64_t tp, const CostContext &ctx,
                         SegmentBoundary boundary) {
  return solveSegmentForOutputs(graph, segment, tp, ctx, boundary.in,
                                {boundary.out})
      .front();
}

SegmentCost evaluateSegment(const ProgramGraph &graph, const Segment &segment,
                            int64_t tp, const CostContext &ctx,
                            std::vector<int> choice, SegmentBoundary boundary) {
  bool training = ctx.mode == PlanMode::Training;
  auto tracked = [&](int64_t id) {
    return id >= 0 && graph.values[id].isActivation;
  };
  auto allReduce = [&](double bytes) { return tpAllReduceSeconds(bytes, ctx); };
  // Counts the collective of a conversion, as the partitioned program will
  // issue it (none when tp is 1).
  auto tally = [&](CollectiveTally &into, TensorSharding from,
                   TensorSharding to, double bytes, bool backward) {
    if (tp <= 1)
      return;
    if (std::optional<Collective> c = reshardCollective(from, to, backward))
      into.add(*c, reshardMessageBytes(*c, bytes, tp));
  };
  SegmentCost result;
  result.choice = std::move(choice);
  result.boundary = boundary;
  // Activations live past the segment's last op.
  std::vector<int64_t> outputs;
  for (int64_t i = segment.first; i <= segment.last; ++i) {
    int64_t id = graph.ops[i].result;
    if (tracked(id) &&
        (graph.values[id].lastUse > segment.last || graph.values[id].isResult))
      outputs.push_back(id);
  }

  // Replay the choices to split the cost into its parts.
  llvm::DenseMap<int64_t, TensorSharding> state;
  if (int64_t inputId = segmentInput(graph, segment); tracked(inputId)) {
    state[inputId] = boundary.in;
    // Whole: pipeline stages send and receive whole activations.
    result.receivedBytes = ctx.bytes(graph.values[inputId]);
  }
  auto shardingOf = [&](int64_t id) {
    auto it = state.find(id);
    return it == state.end() ? kReplicated : it->second;
  };
  double maxValueBytes = 0;
  for (int64_t i = segment.first; i <= segment.last; ++i) {
    const PlanOp &op = graph.ops[i];
    const OpOption &option = op.options[result.choice[i - segment.first]];
    double fwd = opComputeSeconds(graph, op, option, tp, ctx);
    result.forwardCompute += fwd;
    if (op.isContraction)
      result.forwardGemm += fwd;
    if (training) {
      result.backwardCompute += op.backwardFactor * fwd;
      if (op.isContraction)
        result.backwardGemm += op.backwardFactor * fwd;
      result.recomputeCompute[int(Recompute::Full)] += fwd;
      if (!op.isContraction)
        result.recomputeCompute[int(Recompute::Selective)] += fwd;
    }
    for (auto [k, id] : llvm::enumerate(op.operands)) {
      if (id < 0)
        continue;
      const ValueInfo &v = graph.values[id];
      if (v.isParameter) {
        double elements =
            numElements(v.shape) / (isSplit(option.operands[k]) ? tp : 1);
        result.parameterElementsPerRank += elements;
        if (v.isTrained)
          result.trainedElementsPerRank += elements;
        // A whole weight used by an op split over tp gets a partial
        // gradient on each rank: summed over tp once per step.
        if (training && option.splitLoop >= 0 && !isSplit(option.operands[k]))
          result.tpGradientSyncBytes += ctx.bytes(v);
      }
      if (!tracked(id))
        continue;
      double bytes = ctx.bytes(v);
      TensorSharding from = shardingOf(id), to = option.operands[k];
      double f = reshardSeconds(from, to, bytes, ctx, false);
      double b = reshardSeconds(from, to, bytes, ctx, true);
      tally(result.forwardCollectives, from, to, bytes, false);
      if (training)
        tally(result.backwardCollectives, from, to, bytes, true);
      if (f > 0 || b > 0)
        result.largestMessageBytes =
            std::max(result.largestMessageBytes, bytes);
      result.forwardComm += f;
      if (training) {
        result.backwardComm += b;
        if (option.splitLoop >= 0 && option.wholeOperandOfSplitOp[k]) {
          result.backwardComm += allReduce(bytes);
          if (tp > 1)
            result.backwardCollectives.add(Collective::AllReduce, bytes);
          result.largestMessageBytes =
              std::max(result.largestMessageBytes, bytes);
        }
      }
    }
    if (option.reducesResult) {
      double bytes = ctx.bytes(graph.values[op.result]);
      int64_t n = option.resultAllReduces;
      result.forwardComm +=
          n * reshardSeconds(kPartial, kReplicated, bytes, ctx, false);
      if (training)
        result.backwardComm +=
            n * reshardSeconds(kPartial, kReplicated, bytes, ctx, true);
      for (int64_t r = 0; r < n; ++r) {
        tally(result.forwardCollectives, kPartial, kReplicated, bytes, false);
        if (training)
          tally(result.backwardCollectives, kPartial, kReplicated, bytes, true);
      }
      result.largestMessageBytes = std::max(result.largestMessageBytes, bytes);
    }
    // What the backward keeps for this op's adjoint: the operands it reads,
    // as the option lays them out (PlanGraph.cpp, claimSavedActivations).
    auto keep = [&](Recompute mode, int64_t id, double bytes) {
      result.savedActivationBytes[int(mode)] += bytes;
      if (graph.values[id].isInput)
        result.savedInputBytes[int(mode)] += bytes;
    };
    for (auto [k, id] : llvm::enumerate(op.operands)) {
      if (k >= 64 || !((op.savedOperands >> k) & 1))
        continue;
      bool split = k < option.operands.size() && isSplit(option.operands[k]);
      keep(Recompute::None, id,
           ctx.keptBytes(graph.values[id]) / (split ? tp : 1));
    }
    for (int64_t id : op.firstReadInputs)
      result.dataInputBytes += ctx.bytes(graph.values[id]);
    // A fused kernel's operands (attention's query, key and value, a
    // cross-entropy's logits) are kept as the kernel reads them: in the
    // plan's precision (mixed precision converts them for it, whatever
    // made them; a CPU's f32 copies are made per reader).
    for (int64_t id : op.kernelSaved)
      keep(Recompute::None, id,
           ctx.bytes(graph.values[id]) / (isSplit(shardingOf(id)) ? tp : 1));
    for (int64_t id : op.savedUnderSelective)
      keep(Recompute::Selective, id,
           ctx.keptBytes(graph.values[id]) /
               (isSplit(shardingOf(id)) ? tp : 1));
    if (op.result >= 0) {
      state[op.result] = option.result;
      const ValueInfo &v = graph.values[op.result];
      double split = isSplit(option.result) ? tp : 1;
      double bytes = ctx.bytes(v) / split;
      maxValueBytes = std::max(maxValueBytes, bytes);
      double kept = ctx.keptBytes(v) / split, statsBytes = 0;
      if (op.savesKernelStats) {
        // A fused kernel's statistics (log-sum-exp) are f32 under mixed
        // precision too, and so is a fused attention's output on CPU ranks
        // (f32 kernels; a GPU's kernel writes the low type).
        double f32Bytes = ctx.f32Bytes(v) / split;
        statsBytes = f32Bytes * op.kernelStatsFraction;
        kept = ctx.cluster && ctx.cluster->isLocalCpu() ? f32Bytes : bytes;
      }
      if (op.savesResult)
        result.savedActivationBytes[int(Recompute::None)] += kept;
      // Selective recomputation keeps a fused kernel's statistics too (the
      // kernel is not recomputed), and a fused attention's output.
      result.savedActivationBytes[int(Recompute::None)] += statsBytes;
      result.savedActivationBytes[int(Recompute::Selective)] += statsBytes;
    }
  }
  // Handing the outputs on as the boundary says.
  for (int64_t id : outputs) {
    double bytes = ctx.bytes(graph.values[id]);
    TensorSharding to = leavingSharding(graph, segment, boundary, id);
    result.forwardComm += reshardSeconds(shardingOf(id), to, bytes, ctx, false);
    tally(result.forwardCollectives, shardingOf(id), to, bytes, false);
    if (training) {
      result.backwardComm +=
          reshardSeconds(shardingOf(id), to, bytes, ctx, true);
      tally(result.backwardCollectives, shardingOf(id), to, bytes, true);
    }
    // The segment's input/output is what full recomputation keeps.
    result.savedActivationBytes[int(Recompute::Full)] +=
        ctx.keptBytes(graph.values[id]);
  }
  result.peakLiveBytes = 2 * maxValueBytes;
  if (ctx.overlapTensorParallelComm && tp > 1) {
    result.forwardComm =
        overlappedCommSeconds(result.forwardComm, result.forwardGemm, tp);
    result.backwardComm =
        overlappedCommSeconds(result.backwardComm, result.backwardGemm, tp);
  }
  return result;
}

} // namespace autopar::plan
