"""Decode steps on static buffers, one set per batch-size bucket, for CUDA
graphs: a step of B live rows runs at the smallest bucket >= B, its inputs
copied into that bucket's buffers and the rows past B padded (token 0 at
position 0 under no adapter, writing its key and value into a scratch block
of the pool that no row owns, attending to that block alone). On cuda each
bucket's step is captured into a torch.cuda.CUDAGraph at its first use and
replayed after; on the CPU the same buffers run eagerly, which is how the
bucket, padding and scratch logic is tested.

Shapes are fixed for the life of the process: the bucket list comes from
the slot count alone, the pool is sized once and every bucket's block mask
is built once over tensors refilled in place before each step (outside the
graph). So the compiled attention compiles once per bucket and a graph,
captured once into one memory pool shared by the buckets, is replayed by
every later generate call: the decoder's stacked LoRA buffers are refilled
in place after optimizer steps (Qwen3Decoder.refresh), never reallocated.

THE CUDA CAPTURE HAS NEVER RUN: no GPU was available when it was written.
What it needs from the step is that nothing in it synchronises with the
host or allocates a shape that depends on values: the LoRA mask, the
tables, the positions and the block mask are all tensors of the bucket's
fixed shape, refilled before the replay."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from .kvpool import BLOCK, KVPool, allow_compiled_shapes
from .qwen3_decode import Lora, RowAdapters

if TYPE_CHECKING:
    from .qwen3_decode import Qwen3Decoder


def buckets(max_rows: int, smallest: int = 4) -> list[int]:
    """Batch sizes with a graph each: powers of two from smallest up to the
    first one >= max_rows, whose last is max_rows itself."""
    if max_rows < 1:
        raise ValueError("a decode step needs at least one row, got %d" % max_rows)
    out = []
    b = smallest
    while b < max_rows:
        out.append(b)
        b *= 2
    out.append(max_rows)
    return out


class StaticRows(RowAdapters):
    """The adapters of a bucket's rows as static [n, R] scale masks (one per
    LoRA layout), refilled in place each step by one gather from a table of
    each adapter's scales ([adapters + 1, R], row 0 for no adapter); padded
    rows get zeros. A graph always runs the mask form, whatever the step's
    adapters."""

    def __init__(self, n: int, device: torch.device) -> None:
        super().__init__([""] * n, device)
        self.single = None
        self.any = True
        self.groups = []
        self._tables: dict[int, tuple[torch.Tensor, dict[str, int]]] = {}
        self._idx = torch.zeros(n, dtype=torch.long, device=device)

    def fill(self, names: Sequence[str]) -> None:
        """Sets the rows' adapters: names for the first len(names) rows, none after."""
        self.names = list(names) + [""] * (len(self.names) - len(names))
        for key, buf in self._masks.items():
            table, index = self._tables[key]
            self._idx.copy_(torch.tensor([index.get(nm, 0) for nm in self.names], dtype=torch.long))
            torch.index_select(table, 0, self._idx, out=buf)

    def mask(self, lo: Lora) -> torch.Tensor:
        key = hash(tuple(sorted(lo.spans.items())))
        if key not in self._masks:
            table = torch.zeros((len(lo.spans) + 1, lo.a.shape[0]), dtype=torch.float32)
            index: dict[str, int] = {}
            for i, (name, (r0, r1, sc)) in enumerate(sorted(lo.spans.items())):
                table[i + 1, r0:r1] = sc
                index[name] = i + 1
            self._tables[key] = (table.to(self.device), index)
            self._masks[key] = torch.zeros((len(self.names), lo.a.shape[0]), dtype=torch.float32, device=self.device)
            self.fill(self.names)
        return self._masks[key]


class Bucket:
    """The static inputs and output of one bucket's decode step, and its
    attention (built once over the bucket's tables and lengths)."""

    def __init__(self, n: int, max_blocks: int, pool: KVPool, dec: Qwen3Decoder, compiled: bool) -> None:
        device = pool.k.device
        self.n = n
        self.scratch = pool.reserved[0]
        self.tokens = torch.zeros(n, dtype=torch.long, device=device)
        self.pos = torch.zeros(n, dtype=torch.long, device=device)
        self.slots = torch.full((n,), self.scratch * BLOCK, dtype=torch.long, device=device)
        self.tables = torch.full((n, max_blocks), self.scratch, dtype=torch.long, device=device)
        self.lengths = torch.ones(n, dtype=torch.long, device=device)
        self.rows = StaticRows(n, device)
        self.attend = dec.attention(pool, self.tables, self.lengths, dec.scale, compiled)
        self.out: torch.Tensor | None = None
        self.graph: Any = None

    def fill(
        self, tokens: Sequence[int], pos: Sequence[int], names: Sequence[str], tables: Sequence[Sequence[int]]
    ) -> None:
        """Copies a step's B rows in and pads the rest (see the module doc)."""
        B = len(tokens)
        n, nb = self.n, self.tables.shape[1]
        # every input in one host buffer and one copy to the device:
        # tokens, positions, slots, lengths, then the tables
        host = np.empty((4 + nb, n), dtype=np.int64)
        host[0, :B], host[0, B:] = tokens, 0
        host[1, :B], host[1, B:] = pos, 0
        host[3] = host[1] + 1
        host[2, B:] = self.scratch * BLOCK
        tab = host[4:].T  # [n, nb] view
        tab[B:] = self.scratch
        for i, t in enumerate(tables):
            if len(t) > nb:
                raise ValueError("row %d holds %d blocks, the buckets were sized for %d" % (i, len(t), nb))
            tab[i, : len(t)] = t
            tab[i, len(t) :] = t[0]
            host[2, i] = t[pos[i] // BLOCK] * BLOCK + pos[i] % BLOCK
        dev = torch.from_numpy(host).to(self.tokens.device)
        self.tokens.copy_(dev[0])
        self.pos.copy_(dev[1])
        self.slots.copy_(dev[2])
        self.attend.update(dev[4:].T, dev[3])
        self.rows.fill(names)


class DecodeGraphs:
    """Runs a decoder's steps at buckets (see the module doc). capture: use
    CUDA graphs (cuda only); else run the buckets' static buffers eagerly.
    compiled: the flex attention compiled (each bucket one shape)."""

    def __init__(
        self, dec: Qwen3Decoder, pool: KVPool, max_rows: int, max_blocks: int, capture: bool, compiled: bool = False
    ) -> None:
        if not pool.reserved:
            raise ValueError("DecodeGraphs needs a pool with a reserved scratch block (KVPool reserve=1)")
        if dec.lora_mode != "mask":
            raise ValueError("DecodeGraphs runs LoRA in mask form, the decoder has lora_mode %r" % dec.lora_mode)
        if capture and pool.k.device.type != "cuda":
            raise ValueError("CUDA graphs need a cuda pool, got %s" % pool.k.device)
        self.dec, self.pool = dec, pool
        self.sizes = buckets(max_rows)
        self.max_blocks = max_blocks
        self.capture = capture
        self.compiled = compiled
        if compiled:
            allow_compiled_shapes(len(self.sizes) + 1)
        self.buckets: dict[int, Bucket] = {}
        self.captures = 0
        """Graphs captured (each bucket once)."""
        self.mempool: Any = torch.cuda.graph_pool_handle() if capture else None
        """The memory pool that every bucket's graph allocates from."""

    def bucket(self, rows: int) -> int:
        """The smallest bucket >= rows."""
        for n in self.sizes:
            if n >= rows:
                return n
        raise ValueError("%d rows exceed the largest bucket %d" % (rows, self.sizes[-1]))

    def _eager(self, b: Bucket) -> torch.Tensor:
        return self.dec.decode(b.tokens, b.pos, b.rows, self.pool, b.tables, b.slots, b.attend)

    def _capture(self, b: Bucket) -> None:
        # NEVER RUN (no GPU was available): warm up on a side stream (which
        # compiles the attention's shape outside the capture), then capture
        # one step; replay() reruns it on whatever the buffers hold.
        side = torch.cuda.Stream()  # type: ignore[no-untyped-call]
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(2):
                b.out = self._eager(b)
        torch.cuda.current_stream().wait_stream(side)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g, pool=self.mempool):
            b.out = self._eager(b)
        b.graph = g
        self.captures += 1

    def step(
        self, tokens: Sequence[int], pos: Sequence[int], names: Sequence[str], tables: Sequence[Sequence[int]]
    ) -> torch.Tensor:
        """One decode step of len(tokens) rows (each at pos[i], under
        names[i], over its block table); returns their float32 logits [B, V]."""
        B = len(tokens)
        n = self.bucket(B)
        b = self.buckets.get(n)
        if b is None:
            b = Bucket(n, self.max_blocks, self.pool, self.dec, self.compiled)
            self.buckets[n] = b
        b.fill(tokens, pos, names, tables)
        if self.capture:
            if b.graph is None:
                self._capture(b)
            b.graph.replay()
        else:
            b.out = self._eager(b)
        assert b.out is not None
        return b.out[:B]
