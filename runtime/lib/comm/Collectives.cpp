//===- Collectives.cpp - Collectives called by generated code -------------===//
//
// Unpacks MLIR's unranked memrefs, checks the shapes the way the shard
// dialect defines each collective, stages strided views and blocks of
// dimensions other than the outermost through dense buffers, and calls the
// active Communicator.
//
//===----------------------------------------------------------------------===//

#include "autopar/runtime/Collectives.h"

#include "autopar/runtime/Communicator.h"
#include "autopar/runtime/Error.h"
#include "autopar/runtime/Fatal.h"
#include "autopar/runtime/MemorySpace.h"
#include "autopar/runtime/TensorLayout.h"

#include <cstring>

using namespace autopar::runtime;

namespace {

/// One memref argument: its element data, sizes and strides.
struct View {
  char *data = nullptr;
  Shape sizes;
  std::vector<int64_t> strides;
  size_t elementSize = 0;

  int rank() const { return static_cast<int>(sizes.size()); }
  int64_t count() const {
    int64_t n = 1;
    for (int64_t s : sizes)
      n *= s;
    return n;
  }
  bool dense() const {
    return isDenseRowMajor(sizes.data(), strides.data(), rank());
  }
};

View viewOf(const UnrankedMemRef *memref, DType dtype, const char *which) {
  if (!memref || !memref->descriptor || memref->rank < 0)
    throw Error(std::string(which) + " is not a valid memref descriptor");
  // {T *allocated; T *aligned; int64_t offset; int64_t sizes[R];
  //  int64_t strides[R];}
  struct Head {
    void *allocated;
    char *aligned;
    int64_t offset;
  };
  const Head *head = static_cast<const Head *>(memref->descriptor);
  const int64_t *dims = reinterpret_cast<const int64_t *>(head + 1);
  View view;
  view.elementSize = dtypeSize(dtype);
  view.data =
      head->aligned + head->offset * static_cast<int64_t>(view.elementSize);
  view.sizes.assign(dims, dims + memref->rank);
  view.strides.assign(dims + memref->rank, dims + 2 * memref->rank);
  return view;
}

Communicator &communicator() {
  Communicator *comm = activeCommunicator();
  if (!comm)
    throw Error("no communicator: the program must run under autopar-run");
  return *comm;
}

/// The active communicator's memory: where the views live (device memory
/// on a GPU), and so where staging buffers go.
MemorySpace &memory() { return communicator().memory(); }

/// A dense copy of a view, or the view's own memory if it is dense already.
class Dense {
public:
  /// \p load: copy the view's elements in (for operands that are read).
  Dense(const View &view, bool load) : view(view) {
    if (view.dense()) {
      data = view.data;
      return;
    }
    MemorySpace &space = memory();
    copy = ScratchBuffer(space,
                         static_cast<size_t>(view.count()) * view.elementSize);
    data = copy.data();
    if (load)
      copyStridedToDense(view.data, view.sizes.data(), view.strides.data(),
                         view.rank(), view.elementSize, data, space);
  }
  /// Writes the dense elements back to a strided view.
  void store() {
    if (data != view.data)
      copyDenseToStrided(data, view.sizes.data(), view.strides.data(),
                         view.rank(), view.elementSize, view.data, memory());
  }
  char *data;

private:
  const View &view;
  ScratchBuffer copy;
};

CommScope scopeOfAxis(int64_t axis) {
  if (axis < 0 || axis >= NumGridAxes)
    throw Error("axis " + std::to_string(axis) +
                " is not a grid axis (0 = dp, 1 = tp, 2 = pp)");
  return static_cast<CommScope>(axis);
}

std::string describe(const View &view) { return formatShape(view.sizes); }

[[noreturn]] void mismatch(const std::string &detail) {
  throw Error("operand shapes do not agree: " + detail +
              "; the generated program is inconsistent, which is a compiler "
              "bug");
}

void checkDim(int64_t dim, const View &view, const char *name) {
  if (dim < 0 || dim >= view.rank())
    mismatch(std::string(name) + " " + std::to_string(dim) +
             " is out of range for " + describe(view));
}

/// Expects \p big to be \p small with dimension \p dim times \p parts.
void checkScaled(const View &small, const View &big, int64_t dim, int64_t parts,
                 const std::string &what) {
  Shape expected = small.sizes;
  expected[dim] *= parts;
  if (big.sizes != expected)
    mismatch(what + " (" + std::to_string(parts) + " ranks on the axis)");
}

/// Runs \p body; reports an Error as a fatal error of entry \p name.
template <typename Fn> void guarded(const char *name, Fn body) {
  try {
    body();
  } catch (const std::exception &error) {
    fatalError(std::string(name) + ": " + error.what());
  }
}

void allReduce(const char *name, DType dtype, ReduceOp op, UnrankedMemRef *in,
               UnrankedMemRef *out, int64_t axis) {
  guarded(name, [&] {
    View vin = viewOf(in, dtype, "in"), vout = viewOf(out, dtype, "out");
    if (vin.sizes != vout.sizes)
      mismatch("in " + describe(vin) + ", out " + describe(vout));
    Dense din(vin, true), dout(vout, false);
    communicator().allReduce(din.data, dout.data, vin.count(), dtype, op,
                             scopeOfAxis(axis));
    dout.store();
  });
}

void allGather(const char *name, DType dtype, UnrankedMemRef *in,
               UnrankedMemRef *out, int64_t axis, int64_t dim) {
  guarded(name, [&] {
    View vin = viewOf(in, dtype, "in"), vout = viewOf(out, dtype, "out");
    CommScope scope = scopeOfAxis(axis);
    Communicator &comm = communicator();
    int64_t parts = comm.scopeSize(scope);
    checkDim(dim, vin, "gather_dim");
    checkScaled(vin, vout, dim, parts,
                "all_gather along dim " + std::to_string(dim) + " of in " +
                    describe(vin) + " cannot give out " + describe(vout));
    Dense din(vin, true), dout(vout, false);
    BlockSplit blocks(vout.sizes, dim, parts, vout.elementSize, name);
    if (blocks.blocksAreContiguous()) {
      comm.allGather(din.data, dout.data, vin.count(), dtype, scope);
    } else {
      ScratchBuffer stage(comm.memory(),
                          blocks.blockBytes() * static_cast<size_t>(parts));
      comm.allGather(din.data, stage.data(), vin.count(), dtype, scope);
      for (int64_t p = 0; p < parts; ++p)
        blocks.unpack(stage.data() + p * blocks.blockBytes(), p, dout.data,
                      comm.memory());
    }
    dout.store();
  });
}

void reduceScatter(const char *name, DType dtype, UnrankedMemRef *in,
                   UnrankedMemRef *out, int64_t axis, int64_t dim) {
  guarded(name, [&] {
    View vin = viewOf(in, dtype, "in"), vout = viewOf(out, dtype, "out");
    CommScope scope = scopeOfAxis(axis);
    Communicator &comm = communicator();
    int64_t parts = comm.scopeSize(scope);
    checkDim(dim, vout, "scatter_dim");
    checkScaled(vout, vin, dim, parts,
                "reduce_scatter along dim " + std::to_string(dim) + " of in " +
                    describe(vin) + " cannot give out " + describe(vout));
    Dense din(vin, true), dout(vout, false);
    BlockSplit blocks(vin.sizes, dim, parts, vin.elementSize, name);
    if (blocks.blocksAreContiguous()) {
      comm.reduceScatter(din.data, dout.data, vout.count(), dtype,
                         ReduceOp::Sum, scope);
    } else {
      ScratchBuffer stage(comm.memory(),
                          blocks.blockBytes() * static_cast<size_t>(parts));
      for (int64_t p = 0; p < parts; ++p)
        blocks.pack(din.data, p, stage.data() + p * blocks.blockBytes(),
                    comm.memory());
      comm.reduceScatter(stage.data(), dout.data, vout.count(), dtype,
                         ReduceOp::Sum, scope);
    }
    dout.store();
  });
}

void allToAll(const char *name, DType dtype, UnrankedMemRef *in,
              UnrankedMemRef *out, int64_t axis, int64_t splitDim,
              int64_t concatDim) {
  guarded(name, [&] {
    View vin = viewOf(in, dtype, "in"), vout = viewOf(out, dtype, "out");
    CommScope scope = scopeOfAxis(axis);
    Communicator &comm = communicator();
    int64_t parts = comm.scopeSize(scope);
    checkDim(splitDim, vin, "split_dim");
    checkDim(concatDim, vin, "concat_dim");
    if (vin.sizes[splitDim] % parts != 0)
      mismatch("all_to_all cannot split dim " + std::to_string(splitDim) +
               " of in " + describe(vin) + " into " + std::to_string(parts) +
               " blocks");
    Shape block = vin.sizes;
    block[splitDim] /= parts;
    Shape expected = block;
    expected[concatDim] *= parts;
    if (vout.sizes != expected)
      mismatch("all_to_all of in " + describe(vin) + " (split dim " +
               std::to_string(splitDim) + ", concat dim " +
               std::to_string(concatDim) + ", " + std::to_string(parts) +
               " ranks) gives " + formatShape(expected) + ", not out " +
               describe(vout));
    Dense din(vin, true), dout(vout, false);
    BlockSplit sendBlocks(vin.sizes, splitDim, parts, vin.elementSize, name);
    BlockSplit recvBlocks(vout.sizes, concatDim, parts, vout.elementSize, name);
    size_t blockBytes = sendBlocks.blockBytes();
    MemorySpace &space = comm.memory();
    ScratchBuffer sendStage, recvStage;
    char *send = din.data, *recv = dout.data;
    if (!sendBlocks.blocksAreContiguous()) {
      sendStage = ScratchBuffer(space, blockBytes * static_cast<size_t>(parts));
      send = sendStage.data();
      for (int64_t p = 0; p < parts; ++p)
        sendBlocks.pack(din.data, p, send + p * blockBytes, space);
    }
    if (!recvBlocks.blocksAreContiguous()) {
      recvStage = ScratchBuffer(space, blockBytes * static_cast<size_t>(parts));
      recv = recvStage.data();
    }
    comm.allToAll(send, recv, vout.count() / parts, dtype, scope);
    if (recv != dout.data)
      for (int64_t p = 0; p < parts; ++p)
        recvBlocks.unpack(recv + p * blockBytes, p, dout.data, space);
    dout.store();
  });
}

void broadcast(const char *name, DType dtype, UnrankedMemRef *buffer,
               int64_t axis, int64_t root) {
  guarded(name, [&] {
    View view = viewOf(buffer, dtype, "buffer");
    Dense dense(view, true);
    communicator().broadcast(dense.data, view.count(), dtype, root,
                             scopeOfAxis(axis));
    dense.store();
  });
}

void send(const char *name, DType dtype, UnrankedMemRef *buffer, int64_t peer,
          int64_t axis) {
  guarded(name, [&] {
    View view = viewOf(buffer, dtype, "buffer");
    Dense dense(view, true);
    communicator().send(dense.data, view.count(), dtype, peer,
                        scopeOfAxis(axis));
  });
}

void recv(const char *name, DType dtype, UnrankedMemRef *buffer, int64_t peer,
          int64_t axis) {
  guarded(name, [&] {
    View view = viewOf(buffer, dtype, "buffer");
    Dense dense(view, false);
    communicator().recv(dense.data, view.count(), dtype, peer,
                        scopeOfAxis(axis));
    dense.store();
  });
}

} // namespace

#define AUTOPAR_DEFINE_COLLECTIVES(SUFFIX, DTYPE)                              \
  AUTOPAR_KERNEL_EXPORT void _mlir_ciface_autopar_rt_all_reduce_##SUFFIX(      \
      UnrankedMemRef *in, UnrankedMemRef *out, int64_t axis) {                 \
    allReduce("autopar_rt_all_reduce_" #SUFFIX, DTYPE, ReduceOp::Sum, in, out, \
              axis);                                                           \
  }                                                                            \
  AUTOPAR_KERNEL_EXPORT void _mlir_ciface_autopar_rt_all_reduce_max_##SUFFIX(  \
      UnrankedMemRef *in, UnrankedMemRef *out, int64_t axis) {                 \
    allReduce("autopar_rt_all_reduce_max_" #SUFFIX, DTYPE, ReduceOp::Max, in,  \
              out, axis);                                                      \
  }                                                                            \
  AUTOPAR_KERNEL_EXPORT void _mlir_ciface_autopar_rt_all_gather_##SUFFIX(      \
      UnrankedMemRef *in, UnrankedMemRef *out, int64_t axis,                   \
      int64_t gatherDim) {                                                     \
    allGather("autopar_rt_all_gather_" #SUFFIX, DTYPE, in, out, axis,          \
              gatherDim);                                                      \
  }                                                                            \
  AUTOPAR_KERNEL_EXPORT void _mlir_ciface_autopar_rt_reduce_scatter_##SUFFIX(  \
      UnrankedMemRef *in, UnrankedMemRef *out, int64_t axis,                   \
      int64_t scatterDim) {                                                    \
    reduceScatter("autopar_rt_reduce_scatter_" #SUFFIX, DTYPE, in, out, axis,  \
                  scatterDim);                                                 \
  }                                                                            \
  AUTOPAR_KERNEL_EXPORT void _mlir_ciface_autopar_rt_all_to_all_##SUFFIX(      \
      UnrankedMemRef *in, UnrankedMemRef *out, int64_t axis, int64_t splitDim, \
      int64_t concatDim) {                                                     \
    allToAll("autopar_rt_all_to_all_" #SUFFIX, DTYPE, in, out, axis, splitDim, \
             concatDim);                                                       \
  }                                                                            \
  AUTOPAR_KERNEL_EXPORT void _mlir_ciface_autopar_rt_broadcast_##SUFFIX(       \
      UnrankedMemRef *buffer, int64_t axis, int64_t root) {                    \
    broadcast("autopar_rt_broadcast_" #SUFFIX, DTYPE, buffer, axis, root);     \
  }                                                                            \
  AUTOPAR_KERNEL_EXPORT void _mlir_ciface_autopar_rt_send_##SUFFIX(            \
      UnrankedMemRef *buffer, int64_t peer, int64_t axis) {                    \
    send("autopar_rt_send_" #SUFFIX, DTYPE, buffer, peer, axis);               \
  }                                                                            \
  AUTOPAR_KERNEL_EXPORT void _mlir_ciface_autopar_rt_recv_##SUFFIX(            \
      UnrankedMemRef *buffer, int64_t peer, int64_t axis) {                    \
    recv("autopar_rt_recv_" #SUFFIX, DTYPE, buffer, peer, axis);               \
  }

extern "C" {
AUTOPAR_KERNEL_EXPORT int64_t autopar_rt_grid_coord(int64_t axis) {
  int64_t coord = 0;
  guarded("autopar_rt_grid_coord",
          [&] { coord = communicator().scopeRank(scopeOfAxis(axis)); });
  return coord;
}

AUTOPAR_DEFINE_COLLECTIVES(f32, DType::Float32)
AUTOPAR_DEFINE_COLLECTIVES(f64, DType::Float64)
AUTOPAR_DEFINE_COLLECTIVES(i32, DType::Int32)
AUTOPAR_DEFINE_COLLECTIVES(i64, DType::Int64)
// 16-bit floats: GPU programs at bf16/fp16 precision (gpu-backend.md). Host
// communicators move them but do not reduce them (Communicator::canReduce).
AUTOPAR_DEFINE_COLLECTIVES(bf16, DType::BFloat16)
AUTOPAR_DEFINE_COLLECTIVES(f16, DType::Float16)
} // extern "C"
