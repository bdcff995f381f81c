"""The dropout masks of a compiled training step, computed in NumPy.

A training-mode ONNX ``Dropout`` compiled by autopar keeps each element with
probability ``1 - ratio`` by a counter-based random function of the run's seed
(``autopar-run --seed``), the 1-based step, the node and the element's
row-major index (docs/training.md, "Dropout masks"; lib/Import/Dropout.cpp):

    key  = mix64(mix64(mix64(seed + G) ^ node) ^ step)
    u(i) = mix64(key + (i + 1) * G) >> 32
    keep = u(i) >= floor(ratio * 2**32)

with ``G = 0x9E3779B97F4A7C15``, ``mix64`` SplitMix64's finalizer, and
``node`` the FNV-1a 64 hash of the node's first output name (xor its ``seed``
attribute when it has one). Tests use this twin to feed PyTorch the masks
autopar draws, so that a model with dropout can be compared step by step.
"""

import numpy as np

GOLDEN = 0x9E3779B97F4A7C15
_MASK = (1 << 64) - 1


def fnv1a64(text):
    """FNV-1a, 64 bits, of a string's UTF-8 bytes."""
    h = 0xCBF29CE484222325
    for byte in text.encode("utf-8"):
        h = ((h ^ byte) * 0x100000001B3) & _MASK
    return h


def mix64(z):
    """SplitMix64's finalizer on uint64 (a Python int or a uint64 array)."""
    if isinstance(z, int):
        z &= _MASK
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK
        return z ^ (z >> 31)
    with np.errstate(over="ignore"):
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


def node_key(output_name, node_seed=None):
    """The node term of the key: FNV-1a 64 of the node's first output name,
    xor its ``seed`` attribute when it has one."""
    key = fnv1a64(output_name)
    if node_seed is not None:
        key ^= node_seed & _MASK
    return key


def threshold(ratio):
    """The 32-bit threshold below which an element is dropped. ``ratio`` is
    the value in the ONNX file (a float32 for PyTorch's exports)."""
    return int(np.floor(float(ratio) * 4294967296.0))


def dropout_keep(seed, step, output_name, shape, ratio, node_seed=None):
    """The boolean keep-mask of a Dropout node at a step (1-based)."""
    key = mix64(mix64(mix64((seed + GOLDEN) & _MASK) ^ node_key(
        output_name, node_seed)) ^ (step & _MASK))
    n = int(np.prod(shape, dtype=np.int64))
    index = np.arange(1, n + 1, dtype=np.uint64)
    with np.errstate(over="ignore"):
        z = mix64(np.uint64(key) + index * np.uint64(GOLDEN))
    u = z >> np.uint64(32)
    return (u >= np.uint64(threshold(ratio))).reshape(shape)


def dropout_scale(ratio, dtype=np.float32):
    """What kept elements are multiplied by: 1 / (1 - ratio), rounded to the
    tensor's type (0 when everything is dropped)."""
    ratio = float(ratio)
    return dtype(1.0 / (1.0 - ratio)) if ratio < 1.0 else dtype(0.0)
