"""autopar-ckpt: inspect, verify and export the checkpoints autopar-run writes.

A checkpoint directory (``--checkpoint-dir D``) holds ``latest`` and one ``step-N/``
per save, each a ``metadata.json`` and the ranks' ``rank-*.bin`` files (the format is
docs/checkpoints.md, version 1). Every command takes either ``D`` (its
``latest`` step) or a ``step-N`` directory::

    autopar-ckpt info D                    # step, model, plan, data position, tensors
    autopar-ckpt verify D                  # every chunk in range and its CRC-32; exit 1 on a problem
    autopar-ckpt export D --to-npz W.npz   # the trained tensors (--all: optimizer states too)
    autopar-ckpt consolidate D --to-onnx M.onnx [--model SRC.onnx]
                                           # SRC (default: the model the checkpoint
                                           # records) with its initializers replaced by
                                           # the checkpoint's trained values; SRC's
                                           # SHA-256 must be the one the checkpoint
                                           # records (--any-model: not checked)
    autopar-ckpt consolidate D --to-npz W.npz
                                           # the trained tensors (--all: optimizer
                                           # states too); `export` is the same command
    autopar-ckpt import STATE.npz --model SRC.onnx -o OUT.onnx [--allow-missing]
                                           # pretrained weights (a PyTorch state_dict
                                           # saved with numpy.savez) into the model's
                                           # initializers: compile OUT.onnx to fine-tune

Errors name the file and the tensor. The reader assembles each tensor from whatever
chunks tile it, so it reads the checkpoints of any plan.
"""

import argparse
import hashlib
import json
import os
import sys
import zlib

import numpy as np

FORMAT, VERSION = "autopar-checkpoint", 1

# runtime/lib/DType.cpp's names. bfloat16 is read as its 16 bits and widened to float32
# on export (NumPy has no bfloat16).
DTYPES = {
    "float32": np.float32, "float64": np.float64, "float16": np.float16,
    "bfloat16": np.uint16, "int64": np.int64, "int32": np.int32, "int16": np.int16,
    "int8": np.int8, "uint64": np.uint64, "uint32": np.uint32, "uint16": np.uint16,
    "uint8": np.uint8, "bool": np.bool_,
}
# Kinds whose values are the model's (the rest are optimizer states).
MODEL_KINDS = ("param", "state")


class CheckpointError(Exception):
    """A problem with a checkpoint, naming the file (and tensor)."""


def step_dir(path):
    """The step directory `path` names: itself, or its `latest`."""
    if os.path.exists(os.path.join(path, "metadata.json")):
        return path
    latest = os.path.join(path, "latest")
    if os.path.exists(latest):
        with open(latest) as f:
            name = f.read().strip()
        resolved = os.path.join(path, name)
        if not os.path.exists(os.path.join(resolved, "metadata.json")):
            raise CheckpointError(f"{latest} names {name}, which has no metadata.json")
        return resolved
    raise CheckpointError(f"{path}: neither a checkpoint step (no metadata.json) nor a "
                          "checkpoint directory (no latest)")


class Checkpoint:
    """One saved step: its metadata and lazy access to its tensors."""

    def __init__(self, path):
        self.dir = step_dir(path)
        self.metadata_path = os.path.join(self.dir, "metadata.json")
        try:
            with open(self.metadata_path) as f:
                self.meta = json.load(f)
        except (OSError, ValueError) as e:
            raise CheckpointError(f"{self.metadata_path}: {e}") from None
        if self.meta.get("format") != FORMAT:
            raise CheckpointError(f"{self.metadata_path}: not an autopar checkpoint "
                                  f"(format {self.meta.get('format')!r})")
        if self.meta.get("version") != VERSION:
            raise CheckpointError(f"{self.metadata_path}: format version "
                                  f"{self.meta.get('version')}, this tool reads {VERSION}")
        # Names are unique: an optimizer state's is its parameter's plus its role
        # (fc1.weight.exp_avg).
        self.tensors = {t["name"]: t for t in self.meta["tensors"]}

    def _chunk(self, entry, chunk, dtype):
        """(the chunk's bytes, None), or (None, what is wrong with them)."""
        name = entry["name"]
        path = os.path.join(self.dir, chunk["file"])
        nbytes = int(np.prod(chunk["sizes"], dtype=np.int64)) * np.dtype(dtype).itemsize
        if not os.path.exists(path):
            return None, f"{path}: missing (tensor '{name}')"
        size = os.path.getsize(path)
        if chunk["offset_bytes"] + nbytes > size:
            return None, (f"{path}: tensor '{name}' needs bytes [{chunk['offset_bytes']}, "
                          f"{chunk['offset_bytes'] + nbytes}) but the file has {size}")
        with open(path, "rb") as f:
            f.seek(chunk["offset_bytes"])
            data = f.read(nbytes)
        if zlib.crc32(data) != chunk["crc32"]:
            return None, (f"{path}: tensor '{name}' is corrupt (CRC-32 {zlib.crc32(data)}, "
                          f"metadata says {chunk['crc32']})")
        # A chunk checksummed in blocks too (partial reads check those).
        if "block_crc32" in chunk or "block_bytes" in chunk:
            size, crcs = chunk.get("block_bytes", 0), chunk.get("block_crc32", [])
            count = -(-nbytes // size) if size > 0 else 0
            if size <= 0 or len(crcs) != count:
                return None, (f"{self.metadata_path}: tensor '{name}' has {len(crcs)} "
                              f"block CRCs for {nbytes} bytes in blocks of {size}")
            for b, expected in enumerate(crcs):
                actual = zlib.crc32(data[b * size:(b + 1) * size])
                if actual != expected:
                    begin = chunk["offset_bytes"] + b * size
                    end = chunk["offset_bytes"] + min((b + 1) * size, nbytes)
                    return None, (f"{path}: tensor '{name}' is corrupt at bytes [{begin}, "
                                  f"{end}) (block CRC-32 {actual}, metadata says {expected})")
        if any(o < 0 or o + n > d for o, n, d in
               zip(chunk["offsets"], chunk["sizes"], entry["shape"])):
            return None, (f"{self.metadata_path}: tensor '{name}' has a chunk outside its "
                          f"shape {entry['shape']}")
        return data, None

    def _assemble(self, entry):
        """(the global tensor, []) or (None, every problem of its chunks: a missing
        file, a range out of the file, a CRC, chunks not tiling the tensor)."""
        dtype = DTYPES.get(entry["dtype"])
        if dtype is None:
            return None, [f"{self.metadata_path}: tensor '{entry['name']}' has an unknown "
                          f"dtype {entry['dtype']!r}"]
        shape = entry["shape"]
        out = np.zeros(shape, dtype=dtype)
        problems, covered = [], 0
        for chunk in entry["chunks"]:
            data, problem = self._chunk(entry, chunk, dtype)
            covered += int(np.prod(chunk["sizes"], dtype=np.int64))
            if problem:
                problems.append(problem)
                continue
            index = tuple(slice(o, o + n) for o, n in zip(chunk["offsets"], chunk["sizes"]))
            out[index] = np.frombuffer(data, dtype=dtype).reshape(chunk["sizes"])
        total = int(np.prod(shape, dtype=np.int64))
        if covered != total:
            problems.append(f"{self.metadata_path}: the chunks of tensor '{entry['name']}' "
                            f"cover {covered} of its {total} elements")
        return (None, problems) if problems else (out, [])

    def problems(self, entry):
        """Every problem of one tensor's chunks; empty when it reads back intact."""
        return self._assemble(entry)[1]

    def read(self, key):
        """The global tensor named `key`."""
        entry = self.tensors[key]
        out, problems = self._assemble(entry)
        if problems:
            raise CheckpointError("\n".join(problems))
        if entry["dtype"] == "bfloat16":
            out = (out.astype(np.uint32) << 16).view(np.float32)
        return out

    def model_keys(self):
        return [k for k, t in self.tensors.items() if t["kind"] in MODEL_KINDS]


def human_bytes(n):
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.2f} {unit}"
        n /= 1024


def cmd_info(ckpt, args):
    m = ckpt.meta
    plan, data = m.get("plan", {}), m.get("data", {})
    grid = plan.get("grid", {})
    print(f"checkpoint   {ckpt.dir}")
    print(f"step         {m['step']}")
    print(f"model        {m.get('model')} ({m.get('model_hash')}"
          + (f", file sha256 {m['model_sha256']}" if m.get("model_sha256") else "") + ")")
    print(f"plan         {plan.get('cluster')}, world size {plan.get('world_size')}, "
          f"dp {grid.get('dp')} x tp {grid.get('tp')} x pp {grid.get('pp')}")
    print(f"data         {data.get('directory')}: next batch {data.get('batch_in_epoch')} "
          f"of epoch {data.get('epoch')}, global batch {data.get('global_batch')}, "
          f"{data.get('samples_consumed')} samples consumed, shuffle "
          f"{data.get('shuffle_seed')}")
    total = 0
    rows = []
    for t in m["tensors"]:
        nbytes = int(np.prod(t["shape"], dtype=np.int64)) * np.dtype(DTYPES[t["dtype"]]).itemsize
        total += nbytes
        role = t["kind"] + (f" of {t['of']}" if "of" in t else "")
        rows.append((t["name"], role, t["dtype"], "x".join(map(str, t["shape"])) or "scalar",
                     human_bytes(nbytes), len(t["chunks"])))
    print(f"tensors      {len(rows)}, {human_bytes(total)}")
    widths = [max(len(str(r[i])) for r in rows + [("name", "kind", "dtype", "shape",
                                                      "bytes", "chunks")]) for i in range(6)]
    for r in [("name", "kind", "dtype", "shape", "bytes", "chunks")] + rows:
        print("  " + "  ".join(str(v).ljust(w) for v, w in zip(r, widths)).rstrip())
    return 0


def cmd_verify(ckpt, args):
    problems = []
    for t in ckpt.meta["tensors"]:
        problems += ckpt.problems(t)
    if problems:
        for p in problems:
            print(f"autopar-ckpt: error: {p}", file=sys.stderr)
        return 1
    chunks = sum(len(t["chunks"]) for t in ckpt.meta["tensors"])
    print(f"{ckpt.dir}: {len(ckpt.meta['tensors'])} tensors in {chunks} chunks, every "
          "CRC-32 matches")
    return 0


def cmd_export(ckpt, args):
    if bool(args.to_npz) == bool(args.to_onnx):
        raise CheckpointError(f"{args.cmd}: give one of --to-npz FILE or --to-onnx FILE")
    if args.to_npz:
        keys = list(ckpt.tensors) if args.all else ckpt.model_keys()
        arrays = {k: ckpt.read(k) for k in keys}
        np.savez(args.to_npz, **arrays)
        print(f"wrote {len(arrays)} tensors to {args.to_npz}")
        return 0
    import onnx
    source = args.model or ckpt.meta.get("model")
    if not source or not os.path.exists(source):
        raise CheckpointError(f"--to-onnx: the model {source!r} the checkpoint records is not "
                              "there; give it with --model FILE.onnx")
    recorded = ckpt.meta.get("model_sha256")
    if recorded and not args.any_model:
        actual = file_sha256(source)
        if actual != recorded:
            raise CheckpointError(
                f"--to-onnx: {source} is not the model {ckpt.metadata_path} was trained "
                f"from: its SHA-256 is {actual}, the checkpoint records {recorded} (of "
                f"{ckpt.meta.get('model')}); give that file with --model, or --any-model "
                "to fill this one anyway")
    model = onnx.load(source)
    trained = {ckpt.tensors[k]["name"]: ckpt.read(k) for k in ckpt.model_keys()}
    # The checkpoint holds what training changed; frozen initializers keep the
    # model's values.
    fill_initializers(model, trained, source, ckpt.metadata_path, allow_missing=True)
    save_onnx(model, args.to_onnx)
    print(f"wrote {args.to_onnx}: {source} with {len(ckpt.model_keys())} trained tensors "
          f"from step {ckpt.meta['step']}")
    return 0


def file_sha256(path):
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def fill_initializers(model, values, source, what, allow_missing=False):
    """Replaces `model`'s initializers named in `values` (name -> array) by them,
    cast to each initializer's dtype. Raises CheckpointError listing every name
    `values` has and the model lacks, and every shape that differs; and, unless
    allow_missing, every float initializer `values` does not give."""
    import onnx
    from onnx import numpy_helper
    initializers = {i.name: i for i in model.graph.initializer}
    extra = [k for k in values if k not in initializers]
    mismatched = [f"'{k}' is {list(initializers[k].dims)} in {source}, "
                  f"{list(np.shape(v))} in {what}"
                  for k, v in values.items()
                  if k in initializers and list(initializers[k].dims) != list(np.shape(v))]
    floats = {onnx.TensorProto.FLOAT, onnx.TensorProto.DOUBLE, onnx.TensorProto.FLOAT16,
              onnx.TensorProto.BFLOAT16}
    missing = [] if allow_missing else [
        k for k, i in initializers.items() if k not in values and i.data_type in floats]
    if extra or mismatched or missing:
        parts = []
        if extra:
            parts.append(f"no initializer {', '.join(extra)} in {source}")
        parts += mismatched
        if missing:
            parts.append(f"{what} gives no value for {', '.join(missing)} "
                         "(--allow-missing keeps the model's own)")
        raise CheckpointError(f"{what} does not match {source}: " + "; ".join(parts))
    for name, value in values.items():
        init = initializers[name]
        dtype = numpy_helper.to_array(init).dtype
        init.CopyFrom(numpy_helper.from_array(np.asarray(value).astype(dtype), name))


def save_onnx(model, path):
    import onnx
    big = sum(i.ByteSize() for i in model.graph.initializer) > (1 << 30)
    onnx.save_model(model, path, save_as_external_data=big,
                    location=os.path.basename(path) + ".data" if big else None)


def cmd_import(args):
    import onnx
    try:
        state = np.load(args.state)
    except (OSError, ValueError) as e:
        raise CheckpointError(f"{args.state}: {e}") from None
    values = {k: state[k] for k in state.files}
    model = onnx.load(args.model)
    fill_initializers(model, values, args.model, args.state, args.allow_missing)
    save_onnx(model, args.output)
    print(f"wrote {args.output}: {args.model} with {len(values)} tensors from {args.state}")
    return 0


def main(argv=None):
    p = argparse.ArgumentParser(prog="autopar-ckpt", description=__doc__.split("\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog=__doc__)
    sub = p.add_subparsers(dest="cmd", required=True)
    imp = sub.add_parser("import")
    imp.add_argument("state", help="a state_dict saved with numpy.savez (name -> array)")
    imp.add_argument("--model", required=True, metavar="SRC.onnx")
    imp.add_argument("-o", "--output", required=True, metavar="OUT.onnx")
    imp.add_argument("--allow-missing", action="store_true",
                     help="float initializers the state_dict lacks keep the model's values")
    for name in ("info", "verify", "consolidate", "export"):
        sp = sub.add_parser(name)
        sp.add_argument("checkpoint", help="a --checkpoint-dir (its latest) or a step-N dir")
        if name in ("consolidate", "export"):
            sp.add_argument("--any-model", action="store_true",
                            help="--to-onnx: fill a model whose SHA-256 differs from the "
                                 "one the checkpoint records")
            sp.add_argument("--to-npz", metavar="FILE")
            sp.add_argument("--to-onnx", metavar="FILE")
            sp.add_argument("--model", metavar="FILE.onnx",
                            help="--to-onnx: the ONNX file to fill (default: the one the "
                                 "checkpoint records)")
            sp.add_argument("--all", action="store_true",
                            help="--to-npz: optimizer states too")
    args = p.parse_args(argv)
    try:
        if args.cmd == "import":
            return cmd_import(args)
        ckpt = Checkpoint(args.checkpoint)
        return {"info": cmd_info, "verify": cmd_verify, "consolidate": cmd_export,
                "export": cmd_export}[args.cmd](ckpt, args)
    except CheckpointError as e:
        print(f"autopar-ckpt: error: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
