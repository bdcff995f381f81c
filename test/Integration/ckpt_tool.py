#!/usr/bin/env python3
"""autopar-ckpt (python/autopar/ckpt.py) on the checkpoints autopar-run writes.

Trains an MLP for 3 steps on one rank with checkpoints, and on 2 data-parallel
ranks (rank 0 writes), then checks that:
- `info` names the step, the plan and every tensor with its global shape;
- `verify` passes, and fails naming the file and the tensor after a byte of a
  chunk is flipped, after the file is truncated, and when a block's CRC-32
  (--checkpoint-block-bytes) disagrees with its bytes;
- `export --to-npz` gives the trained parameters bit for bit as autopar-run's
  --outputs, `--all` the optimizer states too;
- `consolidate --to-onnx` fills the model's initializers with them; the
  checkpoint records the model file's SHA-256 (`info` shows it), another
  file is refused naming both hashes, and with --any-model a model that
  lacks one of the checkpoint's tensors is refused naming it;
- `import` writes a PyTorch state_dict (.npz) into the model's initializers:
  training the result starts from those weights (its first loss is PyTorch's
  on them), and a state_dict with a name or shape the model lacks is refused.

Usage: ckpt_tool.py BUILD_DIR WORK_DIR MPIRUN [MPIRUN_FLAG...]
"""
import json
import os
import shutil
import subprocess
import sys

import numpy as np
import onnx
import torch
from onnx import numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))
import train_dp  # noqa: E402
from gradcheck import Mlp  # noqa: E402

from autopar import ckpt  # noqa: E402


def tool(*argv):
    r = subprocess.run([sys.executable, "-m", "autopar.ckpt", *argv], capture_output=True,
                       text=True, env={**os.environ, "PYTHONPATH": os.path.join(
                           HERE, "..", "..", "python")})
    return r.returncode, r.stdout + r.stderr


def main():
    build, work, launcher = sys.argv[1], sys.argv[2], sys.argv[3:]
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    errors = []

    def expect(cond, what, detail=""):
        print(f"{'PASS' if cond else 'FAIL'} {what}")
        if not cond:
            errors.append(f"{what}\n{detail}")

    torch.manual_seed(0)
    data = {"x": torch.randn(24, 8), "y": torch.randint(0, 5, (24,))}
    case = train_dp.Case(build, work, "mlp", Mlp(), data, 8, train_dp.CONFIG)
    for ranks in (1, 2):
        art = case.compile(f"local{ranks}", ranks)[0]
        ckdir = os.path.join(case.dir, f"ckpt{ranks}")
        # The 2-rank run checksums its chunks in blocks of 128 bytes too.
        blocks = ("--checkpoint-block-bytes", "128") if ranks == 2 else ()
        _, params, _ = case.train(f"local{ranks}", art, ranks, launcher,
                                  "--checkpoint-dir", ckdir, "--checkpoint-every", "2",
                                  *blocks)
        tag = f"local:{ranks}"
        rc, out = tool("info", ckdir)
        sha = ckpt.file_sha256(case.onnx)
        expect(rc == 0 and f"step         {train_dp.STEPS}" in out and
               f"world size {ranks}" in out and "fc1.weight             param" in out and
               "16x8" in out and f"file sha256 {sha}" in out, f"{tag} info", out)
        rc, out = tool("verify", ckdir)
        expect(rc == 0 and "every CRC-32 matches" in out, f"{tag} verify", out)
        npz = os.path.join(work, f"w{ranks}.npz")
        rc, out = tool("export", ckdir, "--to-npz", npz)
        saved = np.load(npz) if rc == 0 else {}
        expect(rc == 0 and set(saved.files) == set(params) and
               all(saved[k].tobytes() == params[k].tobytes() for k in params),
               f"{tag} export --to-npz equals autopar-run's --outputs bit for bit", out)
        rc, out = tool("export", ckdir, "--to-npz", npz, "--all")
        expect(rc == 0 and "fc1.weight.exp_avg_sq" in np.load(npz).files,
               f"{tag} export --to-npz --all has the optimizer states", out)
        onnx_out = os.path.join(work, f"m{ranks}.onnx")
        rc, out = tool("consolidate", ckdir, "--to-onnx", onnx_out)
        inits = ({i.name: numpy_helper.to_array(i) for i in onnx.load(onnx_out).graph.initializer}
                 if rc == 0 else {})
        expect(rc == 0 and all(inits[k].tobytes() == params[k].tobytes() for k in params),
               f"{tag} consolidate --to-onnx carries the trained initializers", out)

    # A model without one of the checkpoint's tensors is refused, naming it.
    ckdir = os.path.join(case.dir, "ckpt1")
    model = onnx.load(case.onnx)
    kept = [i for i in model.graph.initializer if i.name != "fc2.bias"]
    del model.graph.initializer[:]
    model.graph.initializer.extend(kept)
    other = os.path.join(work, "other.onnx")
    onnx.save(model, other)
    rc, out = tool("consolidate", ckdir, "--to-onnx", os.path.join(work, "x.onnx"), "--model",
                   other)
    expect(rc == 1 and f"its SHA-256 is {ckpt.file_sha256(other)}, the checkpoint records "
           f"{ckpt.file_sha256(case.onnx)}" in out, "another model file is refused by its hash",
           out)
    rc, out = tool("consolidate", ckdir, "--to-onnx", os.path.join(work, "x.onnx"), "--model",
                   other, "--any-model")
    expect(rc == 1 and "no initializer fc2.bias" in out, "a model without fc2.bias is refused",
           out)

    # Pretrained weights from a state_dict: the first loss of training the
    # imported model is PyTorch's with those weights on the first batch.
    torch.manual_seed(7)
    pretrained = Mlp()
    state = os.path.join(work, "pretrained.npz")
    np.savez(state, **{k: v.detach().numpy() for k, v in pretrained.state_dict().items()})
    imported = os.path.join(work, "pretrained.onnx")
    rc, out = tool("import", state, "--model", case.onnx, "-o", imported)
    expect(rc == 0, "import a state_dict", out)
    if rc == 0:
        fine = train_dp.Case(build, work, "fine", Mlp(), data, 8, train_dp.CONFIG)
        shutil.copy(imported, fine.onnx)
        losses, _, _ = fine.train("local1", fine.compile("local1", 1)[0], 1, launcher)
        want = float(pretrained(data["x"][:8], data["y"][:8]))
        expect(abs(losses[0] - want) <= 1e-6 * abs(want),
               "training the imported model starts from the state_dict's weights",
               f"first loss {losses[0]}, PyTorch {want}")
    bad = os.path.join(work, "bad.npz")
    np.savez(bad, **{"fc1.weight": np.zeros((8, 16), np.float32),
                     "head.weight": np.zeros((5, 16), np.float32)})
    rc, out = tool("import", bad, "--model", case.onnx, "-o", os.path.join(work, "y.onnx"),
                   "--allow-missing")
    expect(rc == 1 and "no initializer head.weight" in out and
           "'fc1.weight' is [16, 8]" in out and "[8, 16] in" in out,
           "a state_dict with an unknown name and a wrong shape is refused, naming both", out)

    # Corruption: a block CRC that disagrees with its bytes, a flipped byte,
    # then a truncated file.
    step = ckpt.step_dir(ckdir)
    tampered = os.path.join(work, "tampered")
    shutil.copytree(ckpt.step_dir(os.path.join(case.dir, "ckpt2")), tampered)
    meta = json.load(open(os.path.join(tampered, "metadata.json")))
    entry = next(t for t in meta["tensors"] if t["name"] == "fc1.weight")
    chunk = entry["chunks"][0]
    expect(chunk.get("block_bytes") == 128 and len(chunk.get("block_crc32", [])) == 4,
           "a chunk of 512 bytes written with --checkpoint-block-bytes 128 has 4 block "
           "CRCs", json.dumps(chunk))
    if chunk.get("block_crc32"):
        chunk["block_crc32"][1] ^= 1
        with open(os.path.join(tampered, "metadata.json"), "w") as f:
            json.dump(meta, f)
        rc, out = tool("verify", tampered)
        begin = chunk["offset_bytes"] + 128
        expect(rc == 1 and f"tensor 'fc1.weight' is corrupt at bytes [{begin}, "
               f"{begin + 128})" in out, "verify checks each block's CRC-32", out)
    binary = os.path.join(step, "rank-00000.bin")
    with open(binary, "r+b") as f:
        f.seek(4)
        byte = f.read(1)
        f.seek(4)
        f.write(bytes([byte[0] ^ 0xFF]))
    rc, out = tool("verify", ckdir)
    expect(rc == 1 and binary in out and "tensor 'fc1.weight' is corrupt" in out,
           "verify names the file and the tensor of a flipped byte", out)
    with open(binary, "r+b") as f:
        f.truncate(600)
    rc, out = tool("verify", ckdir)
    expect(rc == 1 and "tensor 'fc2.weight' needs bytes" in out and "but the file has 600" in out,
           "verify names the tensors a truncated file lacks", out)
    rc, out = tool("info", os.path.join(work, "nowhere"))
    expect(rc == 1 and "neither a checkpoint step" in out, "a directory without a checkpoint",
           out)
    if errors:
        sys.exit("\n".join(errors))
    print("autopar-ckpt reads what autopar-run writes")


if __name__ == "__main__":
    main()
