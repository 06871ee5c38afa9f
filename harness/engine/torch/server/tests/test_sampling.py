"""The sampling rule: the inverse CDF of softmax(logits / T) at the keyed
uniform, summed in float64 in id order (native sampleRow)."""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt
import pytest

from marlow_torch.keyed import mix64, sample_uniform, uniform01
from marlow_torch.sampling import sample_key, sample_row, sample_rows


def reference(logits: npt.NDArray[np.float32], temp: float, u01: float) -> tuple[int, float]:
    """sampleRow of native/generate.go, written out in Python floats."""
    z = [float(v) / temp for v in logits]
    mx = max(z)
    total = 0.0
    for v in z:
        total += math.exp(v - mx)
    u = u01 * total
    tok, c = len(z) - 1, 0.0
    for j, v in enumerate(z):
        c += math.exp(v - mx)
        if u < c:
            tok = j
            break
    return tok, float(np.float32(z[tok] - mx - math.log(total)))


@pytest.mark.parametrize("temp", [0.25, 0.7, 1.0, 3.0])
def test_matches_the_native_rule(temp: float) -> None:
    rng = np.random.default_rng(7)
    for row in range(200):
        logits = (rng.standard_normal(50) * 4).astype(np.float32)
        seed, pos = 1000 + row, row % 17
        got = sample_row(logits, temp, sample_key(seed, pos))
        assert got == reference(logits, temp, sample_uniform(seed, pos))


def test_token_is_where_the_cdf_passes_the_uniform() -> None:
    rng = np.random.default_rng(3)
    logits = rng.standard_normal(1000).astype(np.float32)
    z = logits.astype(np.float64)
    c = np.cumsum(np.exp(z - z.max()))
    for pos in range(100):
        key = sample_key(42, pos)
        tok, lp = sample_row(logits, 1.0, key)
        u = uniform01(mix64(key)) * c[-1]
        assert (tok == 0 or c[tok - 1] <= u) and u < c[tok]
        assert lp == pytest.approx(float(z[tok] - z.max() - math.log(c[-1])), abs=1e-6)


def test_dominant_logit_wins_and_logprob_is_float32() -> None:
    logits = np.array([0.0, 80.0, 0.0], dtype=np.float32)
    tok, lp = sample_row(logits, 1.0, sample_key(1, 0))
    assert tok == 1
    assert lp == float(np.float32(lp)) and lp <= 0.0


def test_uniform_of_one_picks_the_last_token() -> None:
    # the key whose mix64 is all ones gives the largest uniform below 1
    logits = np.zeros(4, dtype=np.float32)
    tok, _ = sample_row(logits, 1.0, _key_with_mix((1 << 64) - 1))
    assert tok == 3


def _key_with_mix(target: int) -> int:
    """The inverse of mix64 (each step of the finaliser is invertible)."""
    z = target
    z = _unshift(z, 31)
    z = (z * pow(0x94D049BB133111EB, -1, 1 << 64)) & ((1 << 64) - 1)
    z = _unshift(z, 27)
    z = (z * pow(0xBF58476D1CE4E5B9, -1, 1 << 64)) & ((1 << 64) - 1)
    z = _unshift(z, 30)
    assert mix64(z) == target
    return z


def _unshift(y: int, s: int) -> int:
    x = y
    for _ in range(64 // s + 1):
        x = y ^ (x >> s)
    return x


def test_rows_of_different_lengths() -> None:
    rows = [np.array([1.0, 2.0, 3.0], dtype=np.float32), np.array([0.5, -1.0], dtype=np.float32)]
    flat = np.concatenate(rows)
    toks, lps = sample_rows(flat, [3, 2], [1.0, 0.5], [9, 10], [0, 4])
    assert toks == [sample_row(rows[0], 1.0, sample_key(9, 0))[0], sample_row(rows[1], 0.5, sample_key(10, 4))[0]]
    assert len(lps) == 2
