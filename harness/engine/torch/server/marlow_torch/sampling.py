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


def sample_device(
    logits: torch.Tensor, temps: torch.Tensor, uniforms: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """sample_row on every row of logits ([B, V] float32, on the device) at
    temps[b] with uniform uniforms[b] (both [B] float64, the uniforms from
    keyed.sample_uniforms): softmax(logits / T) in float64, its cumulative
    sum in id order and the inverse-CDF choice. Returns the tokens [B] and
    their float32 log-probs [B]; on the CPU both equal sample_row's bit for bit."""
    import torch

    z = logits.double() / temps.unsqueeze(1)
    mx = z.max(dim=1, keepdim=True).values
    c = torch.cumsum(torch.exp(z - mx), dim=1)
    total = c[:, -1:]
    tok = torch.searchsorted(c, uniforms.unsqueeze(1) * total, right=True).clamp_(max=z.shape[1] - 1)
    lp = (z.gather(1, tok) - mx) - torch.log(total)
    return tok.squeeze(1), lp.squeeze(1).float()
