"""The sampling rule of both engines (native generate.go's sampleRow): the
inverse CDF of softmax(logits / temperature) at one keyed uniform, summed in
float64 in id order. Pure numpy, shared by every generation backend."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from .keyed import PURPOSE_SAMPLE, hash_key, mix64, uniform01

if TYPE_CHECKING:
    import torch


def sample_key(seed: int, position: int) -> int:
    """The key of the draw for the token at position of the request with seed."""
    return hash_key(seed, PURPOSE_SAMPLE, position)


def sample_row(logits: npt.NDArray[np.floating], temp: float, key: int) -> tuple[int, float]:
    """Draws a token from softmax(logits / temp) at the uniform of key and
    returns it with its log-probability rounded to float32."""
    z = logits.astype(np.float64) / temp
    mx = z.max()
    c = np.cumsum(np.exp(z - mx))
    total = c[-1]
    u = uniform01(mix64(key)) * total
    tok = int(np.searchsorted(c, u, side="right"))
    if tok >= len(c):
        tok = len(c) - 1
    lp = z[tok] - mx - math.log(total)
    return tok, float(np.float32(lp))


def sample_rows(
    flat: npt.NDArray[np.float32],
    lengths: Sequence[int],
    temps: Sequence[float],
    seeds: Sequence[int],
    positions: Sequence[int],
) -> tuple[list[int], list[float]]:
    """sample_row on consecutive rows of flat (row i has lengths[i] values)
    at temps[i] with the uniform of (seeds[i], positions[i])."""
    toks: list[int] = []
    lps: list[float] = []
    off = 0
    for i, v in enumerate(lengths):
        tok, lp = sample_row(flat[off : off + v], temps[i], sample_key(seeds[i], positions[i]))
        off += v
        toks.append(tok)
        lps.append(lp)
    return toks, lps


SAMPLE_CHUNK = 1 << 19
"""float64 elements per row chunk of sample_device on the CPU: its
temporaries stay in the cache and the heap, where [B, V] float64 ones
(78 MB at batch 64 and vocab 151,936) are fresh mappings whose page faults
made the whole-batch form 5x slower than numpy row by row (2-vCPU Xeon)."""


def sample_device(
    logits: torch.Tensor, temps: torch.Tensor, uniforms: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """sample_row on every row of logits ([B, V] float32, on the device) at
    temps[b] with uniform uniforms[b] (both [B] float64, the uniforms from
    keyed.sample_uniforms): softmax(logits / T) in float64, its cumulative
    sum in id order and the inverse-CDF choice. Returns the tokens [B] and
    their float32 log-probs [B]; on the CPU both equal sample_row's bit for bit.

    All rows at once on cuda (one sequence of kernels), chunks of rows on the
    CPU (SAMPLE_CHUNK), each chunk's passes over one float64 buffer reused
    for the whole call: z = logits / T written straight into it (no
    promoted temporary), less the row's max, exp, cumulative sum in place.
    The max of z is taken on the float32 logits with amax (dividing by T > 0
    keeps the argmax, so it is the same float64 value; amax, unlike max,
    computes no indices) and z[tok] is recomputed from the float32 logit."""
    import torch

    B, V = logits.shape
    rows = B if logits.device.type == "cuda" else max(1, SAMPLE_CHUNK // max(1, V))
    tok = torch.empty(B, dtype=torch.long, device=logits.device)
    lp = torch.empty(B, dtype=torch.float32, device=logits.device)
    buf = torch.empty((min(rows, B), V), dtype=torch.float64, device=logits.device)
    for r0 in range(0, B, rows):
        r1 = min(B, r0 + rows)
        part = logits[r0:r1]
        t = temps[r0:r1].unsqueeze(1)
        mx = part.amax(dim=1, keepdim=True).double() / t
        c = buf[: r1 - r0]
        torch.div(part, t, out=c)  # float64: logits.double() / T
        c.sub_(mx).exp_().cumsum_(1)
        total = c[:, -1:]
        k = torch.searchsorted(c, uniforms[r0:r1].unsqueeze(1) * total, right=True).clamp_(max=V - 1)
        z = part.gather(1, k).double() / t
        tok[r0:r1] = k.squeeze(1)
        lp[r0:r1] = ((z - mx) - torch.log(total)).squeeze(1).float()
    return tok, lp
