"""The order in which ``autopar-run --train`` visits the training data.

The twin of ``runtime/lib/DataLoader.cpp`` (``epochPermutation``), written from
the specification in docs/design/training-artifact.md ("Shuffle order"), so
that a test can feed PyTorch exactly the batches autopar-run trains on:

- Without ``--shuffle``, epoch ``e`` visits samples ``0 .. n-1`` in order.
- With ``--shuffle SEED``, it visits ``epoch_permutation(SEED, e, n)``: a
  Fisher-Yates shuffle of the identity (``for i = n-1 .. 1: j = next() mod
  (i+1); swap(p[i], p[j])``) driven by SplitMix64 seeded with
  ``SEED ^ (e * 0x9E3779B97F4A7C15 mod 2**64)``.
- Step ``s`` (0-based) of a run with global batch ``B`` and ``n`` samples
  takes epoch ``s // (n // B)``'s positions ``[k*B, (k+1)*B)``, ``k = s % (n // B)``:
  the last incomplete batch of an epoch is dropped.

Pure Python (no numpy needed).
"""

MASK64 = (1 << 64) - 1
GOLDEN_GAMMA = 0x9E3779B97F4A7C15


class SplitMix64:
    """Vigna's SplitMix64 (prng.di.unimi.it/splitmix64.c): the state advances
    by the golden gamma, then is mixed."""

    def __init__(self, seed):
        self.state = seed & MASK64

    def next(self):
        self.state = (self.state + GOLDEN_GAMMA) & MASK64
        z = self.state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
        return z ^ (z >> 31)


def epoch_seed(seed, epoch):
    """The SplitMix64 seed of epoch ``epoch`` (0-based) under ``--shuffle seed``."""
    if not 0 <= seed <= MASK64 or epoch < 0:
        raise ValueError(f"seed must be in [0, 2**64) and epoch >= 0, got {seed}, {epoch}")
    return seed ^ ((epoch * GOLDEN_GAMMA) & MASK64)


def epoch_permutation(seed, epoch, n):
    """The sample indices epoch ``epoch`` visits, in order, under ``--shuffle seed``."""
    rng = SplitMix64(epoch_seed(seed, epoch))
    p = list(range(n))
    for i in range(n - 1, 0, -1):
        j = rng.next() % (i + 1)
        p[i], p[j] = p[j], p[i]
    return p


def batches(n, batch, steps, seed=None, start_step=0):
    """The sample indices of steps ``start_step .. steps-1`` (0-based), one list
    of ``batch`` indices per step, for ``n`` samples; ``seed`` None means no
    ``--shuffle``."""
    per_epoch = n // batch
    if per_epoch < 1:
        raise ValueError(f"{n} samples are fewer than one batch of {batch}")
    order, order_epoch = None, None
    for s in range(start_step, steps):
        epoch, k = divmod(s, per_epoch)
        if order_epoch != epoch:
            order = list(range(n)) if seed is None else epoch_permutation(seed, epoch, n)
            order_epoch = epoch
        yield order[k * batch:(k + 1) * batch]
