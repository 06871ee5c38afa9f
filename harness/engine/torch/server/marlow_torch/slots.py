"""The slot generation backend: every request of a generate call in one
queue, at most `slots` rows decoding at once over a paged KV pool
(kvpool.py) with the server's own Qwen3 forward (qwen3_decode.py).

A request is admitted when the pool can hold its prompt and all its new
tokens (so a running row never waits for blocks and the queue cannot
deadlock); a row that stops frees its blocks at once and its slot takes the
next request. Identical prompts of one adapter prefill once: the prefix's
full blocks are shared by reference count, its last partial block copied
per row. Sampling runs on the device (sampling.sample_device) at uniforms
computed on the host (keyed.sample_uniforms), so a token depends only on
its own row's logits, never on the schedule."""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import torch

from .generation import FINISH_LENGTH, FINISH_STOP, GenRequest, Progress
from .graphs import DecodeGraphs
from .keyed import sample_uniforms
from .kvpool import BLOCK, KVPool, blocks_for, pool_blocks, slots_of
from .protocol import Fault
from .qwen3_decode import Qwen3Decoder, RowAdapters
from .sampling import sample_device

if TYPE_CHECKING:
    from .adapters import Adapters
    from .model import Model


@dataclass
class SlotOptions:
    """The slot backend's settings."""

    slots: int = 64
    """Rows decoding at once."""
    kv_fraction: float = 0.85
    """Share of the free device memory the KV pool takes on cuda."""
    kv_bytes: int = 0
    """The KV pool's bytes on the CPU (0: the generation token budget's worth)."""
    lora_mode: str = "mask"
    """How a batch of several adapters applies LoRA (Qwen3Decoder). mask was
    the faster on the CPU: a [64, 1024] x [1024, 3072] layer with two rank-64
    adapters took 3.8-4.4 ms without LoRA, +1.5 ms with mask and +2.1-3.1 ms
    with split (one thread, 2-vCPU Xeon, process CPU time); on cuda it is one
    kernel sequence for all roles."""
    pool_blocks: int = 0
    """The pool's blocks exactly, overriding kv_fraction and kv_bytes (tests)."""
    graphs: bool | None = None
    """Decode at batch-size buckets on static buffers (graphs.py): captured
    as CUDA graphs on cuda (None: on cuda; the capture has never run on a
    GPU), eagerly on the CPU when True (tests)."""
    attention: str = ""
    """The decode attention (kvpool.ATTENTIONS): "gather" (gathered blocks,
    SDPA) or "flex" (FlexAttention over the pool in place); "" is flex on
    cuda, which has never run on a GPU, and gather on the CPU, where flex
    runs its eager dense reference (scores against every slot of the pool)."""


@dataclass
class SlotStats:
    """What one generate call did with its pool."""

    blocks: int = 0
    block_tokens: int = BLOCK
    pool_bytes: int = 0
    peak_blocks: int = 0
    block_reuses: int = 0
    prefills: int = 0
    shared_rows: int = 0
    """Rows that took their prompt from an earlier prefill."""
    steps: int = 0
    row_steps: int = 0
    """Rows decoded, summed over steps (the mean batch is row_steps / steps)."""
    used_token_steps: int = 0
    """Cached tokens of the live rows, summed over steps."""
    peak_rows: int = 0

    def add_to(self, acc: dict[str, int], requests: int) -> None:
        """Adds this call's figures to acc (Model.gen_pool): sums, and the
        largest pool and peak."""
        for k in ("blocks", "pool_bytes", "peak_blocks", "peak_rows"):
            acc[k] = max(acc.get(k, 0), getattr(self, k))
        acc["block_tokens"] = self.block_tokens
        for k in ("prefills", "shared_rows", "steps", "row_steps", "used_token_steps", "block_reuses"):
            acc[k] = acc.get(k, 0) + getattr(self, k)
        acc["calls"] = acc.get("calls", 0) + 1
        acc["requests"] = acc.get("requests", 0) + requests


@dataclass
class Prefix:
    """A prefilled prompt: its blocks (one reference held by the prefix),
    its last logits and how many queued requests still want it."""

    blocks: list[int]
    logits: torch.Tensor
    pending: int


@dataclass
class Row:
    """A request decoding in a slot."""

    seq: GenRequest
    table: list[int]
    cached: int
    """Tokens whose keys and values are in the pool."""


@dataclass
class Scheduler:
    """The queue, the live rows and the prefixes of one generate call."""

    model: Model
    dec: Qwen3Decoder
    pool: KVPool
    opts: SlotOptions
    progress: Progress
    stats: SlotStats
    queue: deque[GenRequest] = field(default_factory=deque)
    rows: list[Row] = field(default_factory=list)
    prefixes: dict[tuple[str, tuple[int, ...]], Prefix] = field(default_factory=dict)
    pending: dict[tuple[str, tuple[int, ...]], int] = field(default_factory=dict)
    generated: int = 0
    graphs: DecodeGraphs | None = None

    def need(self, s: GenRequest, fresh_prefix: bool) -> int:
        """Blocks that admitting s takes from the free list."""
        n = len(s.prompt)
        own = blocks_for(n + s.max_new - 1) - n // BLOCK
        return own + (blocks_for(n) if fresh_prefix else 0)

    def admit(self) -> tuple[list[Row], list[torch.Tensor]]:
        """Admits queued requests in order while a slot and their blocks are
        free; returns the new rows, whose first token is still to be drawn,
        and the logits of their prompts."""
        new: list[Row] = []
        first: list[torch.Tensor] = []
        bm = self.pool.blocks
        while self.queue and len(self.rows) + len(new) < self.opts.slots:
            s = self.queue[0]
            key = (s.adapter, tuple(s.prompt))
            pre = self.prefixes.get(key)
            if self.need(s, pre is None) > bm.n_free():
                if self.rows or new:
                    break
                # Nothing runs: only prefixes hold blocks. Drop those not wanted now.
                for k in [k for k in self.prefixes if k != key]:
                    bm.decref(self.prefixes.pop(k).blocks)
                if self.need(s, pre is None) > bm.n_free():
                    raise Fault("internal", "request %d does not fit an idle KV pool" % s.index)
            self.queue.popleft()
            if pre is None:
                pre = self.prefill(s, key)
            else:
                self.stats.shared_rows += 1
            n = len(s.prompt)
            full = n // BLOCK
            table = pre.blocks[:full]
            bm.incref(table)
            own = bm.alloc(blocks_for(n + s.max_new - 1) - full)
            if n % BLOCK:
                self.pool.copy_block(pre.blocks[full], own[0], n % BLOCK)
            new.append(Row(s, table + own, n))
            first.append(pre.logits)
            pre.pending -= 1
            if pre.pending == 0:
                bm.decref(self.prefixes.pop(key).blocks)
        return new, first

    def prefill(self, s: GenRequest, key: tuple[str, tuple[int, ...]]) -> Prefix:
        """Prefills s's prompt into fresh blocks and records it as a prefix."""
        n = len(s.prompt)
        blocks = self.pool.blocks.alloc(blocks_for(n))
        slots = torch.tensor(slots_of(blocks, 0, n), dtype=torch.long, device=self.dec.device)
        logits = self.dec.prefill(s.prompt, s.adapter, self.pool, slots)
        self.stats.prefills += 1
        pre = Prefix(blocks, logits, self.pending[key])
        self.prefixes[key] = pre
        return pre

    def sample(self, rows: Sequence[Row], logits: torch.Tensor) -> None:
        """Draws each row's next token from its logits row and records it."""
        dev = logits.device
        temps = torch.tensor([r.seq.temperature for r in rows], dtype=torch.float64, device=dev)
        u = sample_uniforms([r.seq.seed for r in rows], [len(r.seq.ids) for r in rows])
        tok, lp = sample_device(logits, temps, torch.from_numpy(u).to(dev))
        toks, lps = tok.tolist(), lp.tolist()
        for r, t, p in zip(rows, toks, lps):
            s = r.seq
            s.ids.append(int(t))
            s.logprobs.append(float(p))
            if t in self.model.stop_ids and not s.ignore_end_of_turn:
                s.finish = FINISH_STOP
            elif len(s.ids) >= s.max_new:
                s.finish = FINISH_LENGTH
        self.generated += len(rows)

    def retire(self) -> None:
        """Frees the blocks of the rows that stopped."""
        keep = []
        for r in self.rows:
            if r.seq.finish:
                self.pool.blocks.decref(r.table)
            else:
                keep.append(r)
        self.rows = keep

    def step(self) -> None:
        """One decode step of every live row."""
        rows = self.rows
        dev = self.dec.device
        if self.graphs is not None:
            logits = self.graphs.step(
                [r.seq.ids[-1] for r in rows],
                [r.cached for r in rows],
                [r.seq.adapter for r in rows],
                [r.table for r in rows],
            )
            self.finish_step(rows, logits)
            return
        toks = torch.tensor([r.seq.ids[-1] for r in rows], dtype=torch.long, device=dev)
        pos = torch.tensor([r.cached for r in rows], dtype=torch.long, device=dev)
        nb = max(blocks_for(r.cached + 1) for r in rows)
        tables = torch.tensor([(r.table + [r.table[0]] * nb)[:nb] for r in rows], dtype=torch.long, device=dev)
        slots = torch.tensor(
            [r.table[r.cached // BLOCK] * BLOCK + r.cached % BLOCK for r in rows], dtype=torch.long, device=dev
        )
        ra = RowAdapters([r.seq.adapter for r in rows], dev)
        self.finish_step(rows, self.dec.decode(toks, pos, ra, self.pool, tables, slots))

    def finish_step(self, rows: list[Row], logits: torch.Tensor) -> None:
        """Counts a decode step of rows and samples their next tokens."""
        B = len(rows)
        st = self.stats
        st.steps += 1
        st.row_steps += B
        st.used_token_steps += sum(r.cached + 1 for r in rows)
        for r in rows:
            r.cached += 1
        self.sample(rows, logits)

    def run(self) -> None:
        """Generates until the queue and the slots are empty."""
        for s in self.queue:
            key = (s.adapter, tuple(s.prompt))
            self.pending[key] = self.pending.get(key, 0) + 1
        while self.queue or self.rows:
            new, first = self.admit()
            if new:
                self.sample(new, torch.stack(first))
            self.rows.extend(new)
            self.stats.peak_rows = max(self.stats.peak_rows, len(self.rows))
            self.retire()
            if self.rows:
                self.step()
                self.retire()
            self.stats.peak_blocks = self.pool.blocks.peak
            self.progress(op="generate", tokens=self.generated)


def check_fits(seqs: Sequence[GenRequest], blocks: int) -> None:
    """A clear error naming the first request that an empty pool of blocks cannot hold."""
    for s in seqs:
        n = len(s.prompt)
        need = blocks_for(n) + blocks_for(n + s.max_new - 1) - n // BLOCK
        if need > blocks:
            raise Fault(
                "too_long",
                "request %d: prompt of %d tokens + %d new tokens needs %d KV blocks of %d tokens but the pool "
                "holds %d; give the pool more memory (kv_cache_fraction on cuda, gen_token_budget on the CPU) "
                "or shorten the request" % (s.index, n, s.max_new, need, BLOCK, blocks),
            )


def slot_generate(
    model: Model, adapters: Adapters, seqs: Sequence[GenRequest], progress: Progress, opts: SlotOptions
) -> SlotStats:
    """Samples every request of seqs in place with the slot backend and
    returns what the pool did; the pool is freed on return."""
    live = [s for s in seqs if s.max_new > 0]
    stats = SlotStats()
    if not live:
        return stats
    with torch.no_grad():
        attention = opts.attention or ("flex" if model.device.type == "cuda" else "gather")
        dec = Qwen3Decoder(model, adapters, sorted({s.adapter for s in live}), opts.lora_mode, attention)
        shape = dec.pool_shape()
        if opts.pool_blocks > 0:
            n = opts.pool_blocks
        else:
            cpu_bytes = opts.kv_bytes or model.gen_budget * shape.bytes_per_block() // BLOCK
            n = pool_blocks(shape, model.device, cpu_bytes, opts.kv_fraction)
        check_fits(live, n)
        use_graphs = opts.graphs if opts.graphs is not None else model.device.type == "cuda"
        pool = KVPool(shape, n, model.device, reserve=1 if use_graphs else 0)
        stats.blocks, stats.pool_bytes = n, pool.nbytes()
        sch = Scheduler(model, dec, pool, opts, progress, stats, queue=deque(live))
        if use_graphs:
            max_blocks = max(blocks_for(len(s.prompt) + s.max_new - 1) for s in live)
            sch.graphs = DecodeGraphs(
                dec, pool, min(opts.slots, len(live)), max_blocks, capture=model.device.type == "cuda"
            )
        sch.run()
        stats.block_reuses = pool.blocks.reuses
        del pool, sch
    if model.device.type == "cuda":
        torch.cuda.empty_cache()
    return stats
