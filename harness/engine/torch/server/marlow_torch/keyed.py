"""Counter-based keyed random streams, a port of the Go side's keyed stream
(harness/engine/native/rng.go).

Every draw is a pure function of a key (seed, purpose, indices), so results
never depend on scheduling, batch composition or the order of the draws. The
tests check every function here against the golden table that the Go side
writes (keyed/testdata/golden.json).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

M64 = (1 << 64) - 1
"""The mask that keeps Python's unbounded integers to 64 bits."""

PURPOSE_INIT = 0x696E6974
"""Purpose word of base weight initialisation ("init")."""
PURPOSE_LORA = 0x6C6F7261
"""Purpose word of LoRA A initialisation ("lora")."""
PURPOSE_SAMPLE = 0x73616D70
"""Purpose word of token sampling ("samp")."""

GOLDEN = 0x9E3779B97F4A7C15
MUL1 = 0xBF58476D1CE4E5B9
MUL2 = 0x94D049BB133111EB
HASH_START = 0x6D61726C6F77  # "marlow"
_SCALE53 = 1.0 / (1 << 53)


def mix64(z: int) -> int:
    """The SplitMix64 finaliser on the low 64 bits of z."""
    z &= M64
    z ^= z >> 30
    z = (z * MUL1) & M64
    z ^= z >> 27
    z = (z * MUL2) & M64
    z ^= z >> 31
    return z


def hash_key(*words: int) -> int:
    """Folds a sequence of 64-bit words into one well-mixed key."""
    h = HASH_START
    for w in words:
        w &= M64
        h = mix64(((h + GOLDEN + w * GOLDEN) & M64) ^ mix64(w))
    return h


def uniform01(h: int) -> float:
    """Maps a 64-bit hash to a float64 in [0, 1) with 53 random bits."""
    return float(h >> 11) * _SCALE53


def uniform_at(key: int, i: int) -> float:
    """The draw in [-1, 1) for element i of the stream key."""
    return 2.0 * uniform01(mix64(key ^ (((i + 1) * GOLDEN) & M64))) - 1.0


def sample_uniform(seed: int, position: int) -> float:
    """The uniform in [0, 1) that the samplers use for the token at position
    of the request with this seed (before scaling by the CDF's total)."""
    return uniform01(mix64(hash_key(seed, PURPOSE_SAMPLE, position)))


def uniform_at_array(key: int, n: int) -> npt.NDArray[np.float64]:
    """uniform_at(key, i) for i in [0, n) as float64, vectorised."""
    i = np.arange(1, n + 1, dtype=np.uint64)
    with np.errstate(over="ignore"):
        z = np.uint64(key) ^ (i * np.uint64(GOLDEN))
        z ^= z >> np.uint64(30)
        z *= np.uint64(MUL1)
        z ^= z >> np.uint64(27)
        z *= np.uint64(MUL2)
        z ^= z >> np.uint64(31)
    u: npt.NDArray[np.float64] = (z >> np.uint64(11)).astype(np.float64) * _SCALE53
    return 2.0 * u - 1.0


def _mix64_array(z: npt.NDArray[np.uint64]) -> npt.NDArray[np.uint64]:
    with np.errstate(over="ignore"):
        z = z ^ (z >> np.uint64(30))
        z = z * np.uint64(MUL1)
        z = z ^ (z >> np.uint64(27))
        z = z * np.uint64(MUL2)
        z = z ^ (z >> np.uint64(31))
    return z


def sample_uniforms(seeds: Sequence[int], positions: Sequence[int]) -> npt.NDArray[np.float64]:
    """sample_uniform(seeds[i], positions[i]) for every i, vectorised: the
    same hash_key of (seed, PURPOSE_SAMPLE, position) on uint64 arrays."""
    n = len(seeds)
    h = np.full(n, HASH_START, dtype=np.uint64)
    words = [
        np.array([s & M64 for s in seeds], dtype=np.uint64),
        np.full(n, PURPOSE_SAMPLE, dtype=np.uint64),
        np.array([p & M64 for p in positions], dtype=np.uint64),
    ]
    with np.errstate(over="ignore"):
        for w in words:
            h = _mix64_array((h + np.uint64(GOLDEN) + w * np.uint64(GOLDEN)) ^ _mix64_array(w))
    u: npt.NDArray[np.float64] = (_mix64_array(h) >> np.uint64(11)).astype(np.float64) * _SCALE53
    return u
