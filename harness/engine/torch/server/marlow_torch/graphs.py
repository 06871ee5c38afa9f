"""Decode steps on static buffers, one set per batch-size bucket, for CUDA
graphs: a step of B live rows runs at the smallest bucket >= B over the
first rows of the device-resident decode rows (rowstate.DecodeRows), whose
rows past B are padding (token 0 at position 0 under no adapter, writing
its key and value into a scratch block of the pool that no row owns,
attending to that block alone). A bucket's inputs are views of those rows,
so nothing is copied from the host for a step. On cuda each bucket's step
is captured into a torch.cuda.CUDAGraph at its first use and replayed
after; on the CPU the same buffers run eagerly, which is how the bucket,
padding and scratch logic is tested.

Shapes are fixed for the life of the process: the bucket list comes from
the slot count alone, the pool is sized once and every bucket's block mask
is built once over tensors refilled in place before each step (outside the
graph). So the compiled attention compiles once per bucket and a graph,
captured once into one memory pool shared by the buckets, is replayed by
every later generate call: the decoder's stacked LoRA buffers are refilled
in place after optimizer steps (Qwen3Decoder.refresh), never reallocated.

The capture first ran on an H100 on 2026-12-05 (docs/torch-engine.md: GRPO
steps and the engine bench, no recompile past the first). What it needs
from the step is that nothing in it synchronises with the host or
allocates a shape that depends on values: the LoRA mask, the tables, the
positions and the block mask are all tensors of the bucket's fixed shape,
refilled on the device before the replay."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import torch

from .kvpool import BLOCK, KVPool, allow_compiled_shapes
from .qwen3_decode import Lora, RowAdapters

if TYPE_CHECKING:
    from .qwen3_decode import Qwen3Decoder
    from .rowstate import DecodeRows


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
    LoRA layout), refilled in place each step by one gather, on the device,
    from a table of each adapter's scales ([adapters + 1, R], row 0 for no
    adapter) at the rows' adapter indices (rowstate.DecodeRows.adapter);
    padded rows get zeros. A graph always runs the mask form, whatever the
    step's adapters."""

    def __init__(self, adapter: torch.Tensor, names: Sequence[str]) -> None:
        super().__init__([""] * adapter.shape[0], adapter.device)
        self.single = None
        self.any = True
        self.groups = []
        self.adapter = adapter
        """The rows' adapter indices ([n], a view of the decode rows' own)."""
        self.order = list(names)
        """The adapters by index - 1 (DecodeRows.names)."""
        self._tables: dict[int, torch.Tensor] = {}

    def fill(self) -> None:
        """Refills every mask from the rows' adapter indices."""
        for key, buf in self._masks.items():
            torch.index_select(self._tables[key], 0, self.adapter, out=buf)

    def mask(self, lo: Lora) -> torch.Tensor:
        key = hash(tuple(sorted(lo.spans.items())))
        if key not in self._masks:
            table = torch.zeros((len(self.order) + 1, lo.a.shape[0]), dtype=torch.float32)
            for i, name in enumerate(self.order):
                span = lo.spans.get(name)
                if span is not None:
                    table[i + 1, span[0] : span[1]] = span[2]
            self._tables[key] = table.to(self.device)
            self._masks[key] = torch.zeros((len(self.names), lo.a.shape[0]), dtype=torch.float32, device=self.device)
            self.fill()
        return self._masks[key]


class Bucket:
    """One bucket's decode step: its inputs are views of the first n decode
    rows (their tokens, positions and tables never copied), plus the slots
    and lengths derived from them before each step into static buffers, and
    its attention (built once over the tables and lengths)."""

    def __init__(self, n: int, rows: DecodeRows, pool: KVPool, dec: Qwen3Decoder, compiled: bool) -> None:
        device = pool.k.device
        self.n = n
        self.state = rows
        self.tokens = rows.tokens[:n]
        self.pos = rows.pos[:n]
        self.tables = rows.tables[:n]
        self.slots = torch.full((n,), rows.scratch * BLOCK, dtype=torch.long, device=device)
        self.lengths = torch.ones(n, dtype=torch.long, device=device)
        self.rows = StaticRows(rows.adapter[:n], rows.names)
        self.attend = dec.attention(pool, self.tables, self.lengths, dec.scale, compiled)
        self.out: torch.Tensor | None = None
        self.graph: Any = None

    def fill(self) -> None:
        """Derives the step's slots, lengths, block mask and LoRA masks from
        the decode rows, on the device (the rows past the live ones are
        padding, see the module doc)."""
        self.state.slots_into(self.slots)
        torch.add(self.pos, 1, out=self.lengths)
        self.attend.update(self.tables, self.lengths)
        self.rows.fill()


class DecodeGraphs:
    """Runs a decoder's steps over the decode rows at buckets (see the
    module doc). capture: use CUDA graphs (cuda only); else run the buckets'
    static buffers eagerly. compiled: the flex attention compiled (each
    bucket one shape)."""

    def __init__(
        self, dec: Qwen3Decoder, pool: KVPool, rows: DecodeRows, capture: bool, compiled: bool = False
    ) -> None:
        if not pool.reserved:
            raise ValueError("DecodeGraphs needs a pool with a reserved scratch block (KVPool reserve=1)")
        if rows.scratch != pool.reserved[0]:
            raise ValueError(
                "the decode rows pad with block %d, not the pool's scratch %d" % (rows.scratch, pool.reserved[0])
            )
        if dec.lora_mode != "mask":
            raise ValueError("DecodeGraphs runs LoRA in mask form, the decoder has lora_mode %r" % dec.lora_mode)
        if capture and pool.k.device.type != "cuda":
            raise ValueError("CUDA graphs need a cuda pool, got %s" % pool.k.device)
        self.dec, self.pool, self.rows = dec, pool, rows
        self.sizes = buckets(rows.n)
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
        # Warm up on a side stream (which compiles the attention's shape
        # outside the capture), then capture one step; replay() reruns it on
        # whatever the buffers hold.
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

    def step(self, live: int) -> torch.Tensor:
        """One decode step of the first live decode rows (each at its
        position, under its adapter, over its block table); returns their
        float32 logits [live, V]. The rows' positions and tokens are the
        caller's to advance (DecodeRows.advance)."""
        if not 0 < live <= self.rows.live:
            raise ValueError("a step of %d rows, %d are live" % (live, self.rows.live))
        n = self.bucket(live)
        b = self.buckets.get(n)
        if b is None:
            b = Bucket(n, self.rows, self.pool, self.dec, self.compiled)
            self.buckets[n] = b
        b.fill()
        if self.capture:
            if b.graph is None:
                self._capture(b)
            b.graph.replay()
        else:
            b.out = self._eager(b)
        assert b.out is not None
        return b.out[:live]
