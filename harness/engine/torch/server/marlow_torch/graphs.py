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
    LoRA layout), refilled in place each step; padded rows get zeros. A
    graph always runs the mask form, whatever the step's adapters."""

    def __init__(self, n: int, device: torch.device) -> None:
        super().__init__([""] * n, device)
        self.single = None
        self.any = True
        self.groups = []
        self._layouts: dict[int, Lora] = {}

    def fill(self, names: Sequence[str]) -> None:
        """Sets the rows' adapters: names for the first len(names) rows, none after."""
        self.names = list(names) + [""] * (len(self.names) - len(names))
        for key, buf in self._masks.items():
            buf.copy_(self._build(self._layouts[key]))

    def mask(self, lo: Lora) -> torch.Tensor:
        key = hash(tuple(sorted(lo.spans.items())))
        if key not in self._masks:
            self._layouts[key] = lo
            self._masks[key] = self._build(lo)
        return self._masks[key]

    def _build(self, lo: Lora) -> torch.Tensor:
        mm = torch.zeros((len(self.names), lo.a.shape[0]), dtype=torch.float32)
        for i, n in enumerate(self.names):
            span = lo.spans.get(n)
            if span is not None:
                mm[i, span[0] : span[1]] = span[2]
        return mm.to(self.device)


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
        nb = self.tables.shape[1]
        tab = torch.full((self.n, nb), self.scratch, dtype=torch.long)
        slots = torch.full((self.n,), self.scratch * BLOCK, dtype=torch.long)
        for i, t in enumerate(tables):
            if len(t) > nb:
                raise ValueError("row %d holds %d blocks, the buckets were sized for %d" % (i, len(t), nb))
            tab[i, : len(t)] = torch.tensor(t, dtype=torch.long)
            tab[i, len(t) :] = t[0]
            slots[i] = t[pos[i] // BLOCK] * BLOCK + pos[i] % BLOCK
        pad = [0] * (self.n - B)
        dev = self.tokens.device
        p = torch.tensor(list(pos) + pad, dtype=torch.long)
        self.tokens.copy_(torch.tensor(list(tokens) + pad, dtype=torch.long).to(dev))
        self.pos.copy_(p.to(dev))
        self.slots.copy_(slots.to(dev))
        self.attend.update(tab.to(dev), (p + 1).to(dev))
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
