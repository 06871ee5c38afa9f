"""The slot generation backend: every request of a generate call in one
queue, at most `slots` rows decoding at once over a paged KV pool
(kvpool.py) with the server's own Qwen3 forward (qwen3_decode.py).

A request is admitted when the pool can hold its prompt and its next
token; blocks are taken as rows grow, and when the pool runs dry the
youngest row is preempted and later recomputed (Scheduler). A row that
stops frees its blocks at once and its slot takes the next request. The
prompts admitted in one round prefill in one packed forward; identical
prompts of one adapter prefill once: the prefix's full blocks are shared
by reference count, its last partial block copied per row. The decoder,
pool and graphs live for the process (SlotEngine), and so do the live
rows' decode inputs, on the device (rowstate.DecodeRows): written when rows
are admitted, grow or retire, never rebuilt for a step. Sampling runs on
the device (sampling.sample_device) at uniforms computed on the host
(keyed.sample_uniforms), so a token depends only on its own row's logits,
never on the schedule; a step decodes the tokens sampled into the decode
rows, and the host reads them one step late (one sync a step), for stop
detection."""

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
from .qwen3_decode import Qwen3Decoder, RowAdapters, layout
from .rowstate import DecodeRows, to_device
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
    as CUDA graphs on cuda (None: on cuda), eagerly on the CPU when True (tests)."""
    attention: str = ""
    """The decode attention (kvpool.ATTENTIONS): "gather" (gathered blocks,
    SDPA) or "flex" (FlexAttention over the pool in place); "" is flex on
    cuda and gather on the CPU, where flex runs its eager dense reference
    (scores against every slot of the pool)."""
    compile_flex: bool | None = None
    """Compile the flex attention (None: on cuda); it needs graphs (buckets)."""
    prefill_tokens: int = 8192
    """Most prompt tokens of one packed prefill forward (a longer prompt runs alone)."""


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
    preemptions: int = 0
    """Rows preempted when the pool ran dry (and recomputed later)."""
    dropped: int = 0
    """Tokens drawn after a stop token that the host had not read yet, and
    dropped when it did (Scheduler: tokens are read one step late)."""

    def add_to(self, acc: dict[str, int], requests: int) -> None:
        """Adds this call's figures to acc (Model.gen_pool): sums, and the
        largest pool and peak."""
        for k in ("blocks", "pool_bytes", "peak_blocks", "peak_rows"):
            acc[k] = max(acc.get(k, 0), getattr(self, k))
        acc["block_tokens"] = self.block_tokens
        for k in ("prefills", "shared_rows", "steps", "row_steps", "used_token_steps", "block_reuses", "preemptions"):
            acc[k] = acc.get(k, 0) + getattr(self, k)
        acc["calls"] = acc.get("calls", 0) + 1
        acc["requests"] = acc.get("requests", 0) + requests


@dataclass
class Prefix:
    """A prefilled prompt: its blocks (one reference held by the prefix),
    its last logits and how many queued requests still want it."""

    blocks: list[int]
    logits: torch.Tensor | None
    pending: int


@dataclass
class Row:
    """A request decoding in a slot."""

    seq: GenRequest
    table: list[int]
    """Its blocks: enough for its cached tokens and the next one, grown on
    demand (Scheduler.grow)."""
    cached: int
    """Tokens whose keys and values are in the pool."""
    order: int
    """When it was admitted: the row with the largest is the youngest, the
    first to be preempted."""
    drawn: int = 0
    """Its new tokens drawn so far, read by the host or not (the position
    of the next draw, which keys its uniform)."""
    grown: list[tuple[int, int]] = field(default_factory=list)
    """(table column, block) of the blocks it grew into that the decode rows
    do not hold yet (Scheduler.grow sends them in one copy)."""
    gone: bool = False
    """Retired or preempted: out of the live rows."""


@dataclass
class Prefill:
    """One prompt of an admission round's packed prefill: its tokens, its
    adapter, the blocks that take its keys and values and the prefix it
    fills (None for a preempted row's recompute)."""

    tokens: list[int]
    adapter: str
    blocks: list[int]
    key: tuple[str, tuple[int, ...]] | None


@dataclass
class Draw:
    """The tokens and float32 log-probs sampled for rows, on their way to
    the host: both [2, len(rows)] in one float64 tensor (a pinned host copy
    on cuda, with the event that marks it done)."""

    rows: list[Row]
    host: torch.Tensor
    done: torch.cuda.Event | None


@dataclass
class Scheduler:
    """The queue, the live rows and the prefixes of one generate call.

    Blocks are taken on demand: a row is admitted with the blocks of its
    prompt and its next token, and takes one more whenever its next token
    starts a block (grow). When the pool runs dry, the prefixes that no
    live row is waiting on go first, then the youngest row is preempted:
    its blocks freed and its request put back at the head of the queue with
    the tokens it has, to be recomputed (one prefill of prompt and tokens)
    when it is admitted again. Sampling is keyed by request and position
    (keyed.sample_uniforms), so a preemption changes no token beyond the
    float32 noise of recomputing its keys and values.

    The live rows' decode inputs stay on the device (rowstate.DecodeRows,
    in the order of rows), written when rows change; a step decodes the
    tokens its previous step sampled there. The host reads each step's
    tokens one step late (Draw): a row whose token was a stop runs one step
    more, whose token is dropped, and is then retired. Keyed sampling keeps
    every other row's tokens what they would have been; rows that reach
    their length are known without a read and retired at once."""

    model: Model
    dec: Qwen3Decoder
    pool: KVPool
    state: DecodeRows
    opts: SlotOptions
    progress: Progress
    stats: SlotStats
    queue: deque[GenRequest] = field(default_factory=deque)
    rows: list[Row] = field(default_factory=list)
    prefixes: dict[tuple[str, tuple[int, ...]], Prefix] = field(default_factory=dict)
    pending: dict[tuple[str, tuple[int, ...]], int] = field(default_factory=dict)
    generated: int = 0
    graphs: DecodeGraphs | None = None
    admitted: int = 0
    unread: list[Draw] = field(default_factory=list)
    """Draws the host has not read yet, oldest first."""
    adapters: RowAdapters | None = None
    """The live rows' adapters for a step without buckets, kept until rows change."""

    def need(self, s: GenRequest, fresh_prefix: bool) -> int:
        """Blocks that admitting s takes from the free list: those of its
        cached tokens and next token that it does not share, and a fresh
        prefix's."""
        n = len(s.prompt)
        if s.ids:
            return blocks_for(n + len(s.ids))
        own = blocks_for(n + 1) - n // BLOCK
        return own + (blocks_for(n) if fresh_prefix else 0)

    def drop_prefixes(self, keep: tuple[str, tuple[int, ...]] | None = None) -> None:
        """Releases every prefix but keep (their queued requests prefill again)."""
        for k in [k for k in self.prefixes if k != keep]:
            pre = self.prefixes.pop(k)
            self.pending[k] = pre.pending
            self.pool.blocks.decref(pre.blocks)

    def admit(self) -> None:
        """Admits queued requests in order while a slot and their blocks are
        free, prefilling the round's new prompts in one packed forward, and
        adds them to the live rows; those whose first token is still to be
        drawn draw it from their prompt's logits (the rest are preempted
        rows resuming at their last token)."""
        new: list[Row] = []
        fresh: list[int] = []
        fresh_keys: list[tuple[str, tuple[int, ...]]] = []
        jobs: list[Prefill] = []
        copies: list[tuple[int, int, int]] = []
        bm = self.pool.blocks
        while self.queue and len(self.rows) + len(new) < self.opts.slots:
            s = self.queue[0]
            key = (s.adapter, tuple(s.prompt))
            pre = None if s.ids else self.prefixes.get(key)
            if self.need(s, pre is None) > bm.n_free():
                if self.rows or new:
                    break
                # Nothing runs: only prefixes hold blocks. Drop those not wanted now.
                self.drop_prefixes(keep=key)
                if self.need(s, pre is None) > bm.n_free():
                    raise Fault("internal", "request %d does not fit an idle KV pool" % s.index)
            self.queue.popleft()
            self.admitted += 1
            n = len(s.prompt)
            if s.ids:
                # a preempted row: recompute its prompt and all but its last token
                table = bm.alloc(blocks_for(n + len(s.ids)))
                jobs.append(Prefill(s.prompt + s.ids[:-1], s.adapter, table, None))
                new.append(Row(s, table, n + len(s.ids) - 1, self.admitted, len(s.ids)))
                continue
            if pre is None:
                pre = Prefix(bm.alloc(blocks_for(n)), None, self.pending[key])
                self.prefixes[key] = pre
                jobs.append(Prefill(list(s.prompt), s.adapter, pre.blocks, key))
                self.stats.prefills += 1
            else:
                self.stats.shared_rows += 1
            full = n // BLOCK
            table = pre.blocks[:full]
            bm.incref(table)
            own = bm.alloc(blocks_for(n + 1) - full)
            if n % BLOCK:
                copies.append((pre.blocks[full], own[0], n % BLOCK))
            fresh.append(len(new))
            new.append(Row(s, table + own, n, self.admitted))
            fresh_keys.append(key)
            pre.pending -= 1
        if not new:
            return
        self.prefill(jobs)
        for src, dst, tokens in copies:
            self.pool.copy_block(src, dst, tokens)
        first = []
        for key in fresh_keys:
            logits = self.prefixes[key].logits
            assert logits is not None
            first.append(logits)
        for key in dict.fromkeys(fresh_keys):
            if self.prefixes[key].pending == 0:
                bm.decref(self.prefixes.pop(key).blocks)
        at = len(self.rows)
        self.state.append(
            [r.table for r in new],
            [r.cached for r in new],
            [r.seq.adapter for r in new],
            [r.seq.temperature for r in new],
            [r.seq.ids[-1] if r.seq.ids else 0 for r in new],
        )
        self.rows.extend(new)
        self.adapters = None
        if fresh:
            rows = [new[j] for j in fresh]
            temps = self.state.temps[at : at + len(new)].index_select(
                0, to_device(torch.tensor(fresh), self.dec.device)
            )
            tok = self.sample(rows, torch.stack(first), temps)
            self.state.set_tokens([at + j for j in fresh], tok)

    def prefill(self, jobs: Sequence[Prefill]) -> None:
        """Runs jobs in packed forwards of at most opts.prefill_tokens tokens
        (a longer prompt alone) and gives each prefix its last logits."""
        i = 0
        while i < len(jobs):
            j, total = i, 0
            while j < len(jobs) and (j == i or total + len(jobs[j].tokens) <= self.opts.prefill_tokens):
                total += len(jobs[j].tokens)
                j += 1
            pack = jobs[i:j]
            flat = [x for p in pack for x in slots_of(p.blocks, 0, len(p.tokens))]
            slots = to_device(torch.tensor(flat, dtype=torch.long), self.dec.device)
            logits = self.dec.prefill_many([p.tokens for p in pack], [p.adapter for p in pack], self.pool, slots)
            for k, p in enumerate(pack):
                if p.key is not None:
                    self.prefixes[p.key].logits = logits[k]
            i = j

    def grow(self) -> None:
        """Gives every live row, oldest first, the block its next token
        needs, reclaiming blocks when the pool is dry (prefixes first, then
        the youngest row, see the class doc), and sends the new table
        entries to the decode rows in one copy."""
        bm = self.pool.blocks
        for r in [r for r in self.rows if len(r.table) < blocks_for(r.cached + 1)]:
            while not r.gone and len(r.table) < blocks_for(r.cached + 1):
                if bm.n_free() == 0:
                    self.reclaim()
                    continue
                b = bm.alloc(1)[0]
                r.grown.append((len(r.table), b))
                r.table.append(b)
        entries = [(i, c, b) for i, r in enumerate(self.rows) for c, b in r.grown]
        for r in self.rows:
            r.grown = []
        self.state.extend(entries)

    def reclaim(self) -> None:
        """Frees at least one block: reads the unread tokens and retires the
        rows that stopped, else drops the prefixes, else preempts the
        youngest row (whose tokens are then all read)."""
        bm = self.pool.blocks
        free = bm.n_free()
        self.read(0)
        self.retire()
        if bm.n_free() > free or not self.rows:
            return
        self.drop_prefixes()
        if bm.n_free() > free:
            return
        victim = max(self.rows, key=lambda r: r.order)
        i = self.rows.index(victim)
        victim.gone = True
        self.rows.pop(i)
        self.state.keep([j for j in range(len(self.rows) + 1) if j != i])
        self.adapters = None
        bm.decref(victim.table)
        self.queue.appendleft(victim.seq)
        self.stats.preemptions += 1

    def sample(self, rows: Sequence[Row], logits: torch.Tensor, temps: torch.Tensor) -> torch.Tensor:
        """Draws each row's next token from its logits row at its
        temperature (temps, on the device), on the device: returns the
        tokens and sends them with their log-probs towards the host, to be
        read later (read)."""
        dev = logits.device
        u = sample_uniforms([r.seq.seed for r in rows], [r.drawn for r in rows])
        tok, lp = sample_device(logits, temps, to_device(torch.from_numpy(u), dev))
        both = torch.stack((tok.double(), lp.double()))
        done = None
        if dev.type == "cuda":
            host = torch.empty(both.shape, dtype=both.dtype, pin_memory=True)
            host.copy_(both, non_blocking=True)
            done = torch.cuda.Event()  # type: ignore[no-untyped-call]
            done.record()
        else:
            host = both
        for r in rows:
            r.drawn += 1
        self.unread.append(Draw(list(rows), host, done))
        self.generated += len(rows)
        return tok

    def read(self, keep: int) -> None:
        """Reads every draw but the newest keep (one host sync each) and
        records their tokens; a row's tokens after its stop token are dropped."""
        n = len(self.unread) - keep
        if n <= 0:
            return
        for d in self.unread[:n]:
            if d.done is not None:
                d.done.synchronize()
            toks, lps = d.host.tolist()
            for r, t, p in zip(d.rows, toks, lps):
                s = r.seq
                if s.finish:
                    self.stats.dropped += 1
                    continue
                s.ids.append(int(t))
                s.logprobs.append(float(p))
                if int(t) in self.model.stop_ids and not s.ignore_end_of_turn:
                    s.finish = FINISH_STOP
                elif len(s.ids) >= s.max_new:
                    s.finish = FINISH_LENGTH
        del self.unread[:n]

    def retire(self) -> None:
        """Frees the blocks of the rows that are done: stopped (as read so
        far) or with all their tokens drawn."""
        keep = []
        for i, r in enumerate(self.rows):
            if r.seq.finish or r.drawn >= r.seq.max_new:
                r.gone = True
                self.pool.blocks.decref(r.table)
            else:
                keep.append(i)
        if len(keep) < len(self.rows):
            self.rows = [self.rows[i] for i in keep]
            self.state.keep(keep)
            self.adapters = None

    def step(self) -> None:
        """One decode step of every live row, from and into the decode rows."""
        rows = self.rows
        B = len(rows)
        st = self.state
        if self.graphs is not None:
            logits = self.graphs.step(B)
        else:
            if self.adapters is None:
                self.adapters = RowAdapters([r.seq.adapter for r in rows], self.dec.device)
            nb = max(len(r.table) for r in rows)
            logits = self.dec.decode(
                st.tokens[:B], st.pos[:B], self.adapters, self.pool, st.tables[:B, :nb], st.slots(B)
            )
        stats = self.stats
        stats.steps += 1
        stats.row_steps += B
        stats.used_token_steps += sum(r.cached + 1 for r in rows)
        for r in rows:
            r.cached += 1
        st.advance(self.sample(rows, logits, st.temps[:B]))

    def release(self) -> None:
        """Returns every block that the call's rows and prefixes still hold
        (all of them when it ended early), leaving the pool and the decode
        rows idle."""
        for r in self.rows:
            self.pool.blocks.decref(r.table)
        self.rows = []
        self.state.reset()
        for pre in self.prefixes.values():
            self.pool.blocks.decref(pre.blocks)
        self.prefixes = {}
        self.unread = []

    def run(self) -> None:
        """Generates until the queue and the slots are empty, reading each
        step's tokens after the next step is under way."""
        for s in self.queue:
            key = (s.adapter, tuple(s.prompt))
            self.pending[key] = self.pending.get(key, 0) + 1
        while self.queue or self.rows:
            self.admit()
            self.stats.peak_rows = max(self.stats.peak_rows, len(self.rows))
            self.retire()
            self.grow()
            if self.rows:
                self.step()
            self.read(1)
            self.retire()
            self.stats.peak_blocks = self.pool.blocks.peak
            self.progress(op="generate", tokens=self.generated)
        self.read(0)


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


class SlotEngine:
    """What the slot backend keeps for the life of the process (on the
    model): the decoder with its stacked LoRA buffers, the KV pool sized
    once, the device-resident decode rows (rowstate.DecodeRows) and the
    buckets with their graphs and compiled shapes. A generate call
    refreshes the LoRA buffers and reuses the rest; a change of the
    adapters' layout or of the options builds a new engine."""

    def __init__(self, model: Model, adapters: Adapters, opts: SlotOptions) -> None:
        self.opts = opts
        cuda = model.device.type == "cuda"
        attention = opts.attention or ("flex" if cuda else "gather")
        self.use_graphs = opts.graphs if opts.graphs is not None else cuda
        compiled = opts.compile_flex if opts.compile_flex is not None else cuda
        if attention == "flex" and compiled and not self.use_graphs:
            raise Fault(
                "bad_request",
                "the compiled flex attention runs at fixed batch buckets only; turn graphs on or use attention gather",
            )
        self.dec = Qwen3Decoder(model, adapters, adapters.names(), opts.lora_mode, attention)
        shape = self.dec.pool_shape()
        if opts.pool_blocks > 0:
            n = opts.pool_blocks
        else:
            cpu_bytes = opts.kv_bytes or model.gen_budget * shape.bytes_per_block() // BLOCK
            n = pool_blocks(shape, model.device, cpu_bytes, opts.kv_fraction)
        self.pool = KVPool(shape, n, model.device, reserve=1 if self.use_graphs else 0)
        scratch = self.pool.reserved[0] if self.pool.reserved else 0
        self.rows = DecodeRows(
            opts.slots,
            min(n, blocks_for(model.max_pos)),
            scratch,
            [a[0] for a in self.dec.adapter_layout],
            model.device,
        )
        self.graphs: DecodeGraphs | None = None
        if self.use_graphs:
            self.graphs = DecodeGraphs(
                self.dec, self.pool, self.rows, capture=cuda, compiled=attention == "flex" and compiled
            )

    def matches(self, adapters: Adapters, opts: SlotOptions) -> bool:
        """Whether this engine serves a call with these adapters and options."""
        return self.opts == opts and self.dec.adapter_layout == layout(adapters, adapters.names())


def engine_for(model: Model, adapters: Adapters, opts: SlotOptions) -> SlotEngine:
    """The model's slot engine for adapters and opts, built at first use (and
    again only when the adapters' layout or the options change)."""
    eng: SlotEngine | None = model.slot_engine
    if eng is not None and eng.matches(adapters, opts):
        return eng
    model.slot_engine = None
    del eng  # released before the new pool is sized (pool_blocks empties the allocator's cache)
    eng = SlotEngine(model, adapters, opts)
    model.slot_engine = eng
    return eng


def slot_generate(
    model: Model, adapters: Adapters, seqs: Sequence[GenRequest], progress: Progress, opts: SlotOptions
) -> SlotStats:
    """Samples every request of seqs in place with the slot backend and
    returns what the pool did; the pool stays for the next call."""
    live = [s for s in seqs if s.max_new > 0]
    stats = SlotStats()
    if not live:
        return stats
    with torch.no_grad():
        eng = engine_for(model, adapters, opts)
        eng.dec.refresh()
        pool = eng.pool
        n = pool.blocks.n
        check_fits(live, n)
        pool.blocks.reset()
        eng.rows.reset()
        stats.blocks, stats.pool_bytes = n, pool.nbytes()
        sch = Scheduler(model, eng.dec, pool, eng.rows, opts, progress, stats, queue=deque(live), graphs=eng.graphs)
        try:
            sch.run()
        finally:
            sch.release()
        stats.block_reuses = pool.blocks.reuses
    return stats
