"""The paged KV pool of the slot backend: fixed blocks of BLOCK tokens, a
free list and reference counts (BlockManager, pure Python), and the key and
value tensors they index (KVPool), with two decode attentions over each
row's own blocks: the plain PyTorch reference (GatherAttention: the rows'
blocks gathered, then SDPA) and FlexAttention reading the pool in place
through a block mask of the rows' tables (FlexPagedAttention)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

BLOCK = 16
"""Tokens per block."""


def blocks_for(tokens: int, block: int = BLOCK) -> int:
    """Blocks that hold tokens."""
    return -(-tokens // block)


class PoolFull(Exception):
    """Raised by BlockManager.alloc when fewer blocks are free than asked."""


class BlockManager:
    """Block ids 0..n-1 with a free list and a reference count each. A block
    is free exactly when its count is zero; alloc hands out the lowest ids
    first so that a schedule reuses blocks in a reproducible order."""

    def __init__(self, n: int) -> None:
        if n <= 0:
            raise ValueError("a KV pool needs at least one block, got %d" % n)
        self.n = n
        self.refs = [0] * n
        self.free: list[int] = list(range(n - 1, -1, -1))
        """Free ids, the next one to hand out last."""
        self.peak = 0
        """The most blocks in use at once."""
        self.reuses = 0
        """Allocations of a block that had been used and freed before."""
        self._used_before = [False] * n

    def reset(self) -> None:
        """Starts a generate call on an idle pool: the free list back in
        order (so that every call hands out the same ids for the same
        schedule) and the peak and reuse counts at zero."""
        if self.in_use():
            raise ValueError("reset of a pool with %d blocks in use" % self.in_use())
        self.free = list(range(self.n - 1, -1, -1))
        self.peak = self.reuses = 0
        self._used_before = [False] * self.n

    def n_free(self) -> int:
        """Free blocks."""
        return len(self.free)

    def in_use(self) -> int:
        """Blocks with a positive count."""
        return self.n - len(self.free)

    def alloc(self, k: int) -> list[int]:
        """k fresh blocks, each with count one."""
        if k > len(self.free):
            raise PoolFull("asked for %d blocks, %d of %d free" % (k, len(self.free), self.n))
        out = [self.free.pop() for _ in range(k)]
        for b in out:
            self.refs[b] = 1
            if self._used_before[b]:
                self.reuses += 1
            self._used_before[b] = True
        self.peak = max(self.peak, self.in_use())
        return out

    def incref(self, blocks: Sequence[int]) -> None:
        """One more reference to each of blocks (all in use)."""
        for b in blocks:
            if self.refs[b] <= 0:
                raise ValueError("incref of free block %d" % b)
            self.refs[b] += 1

    def decref(self, blocks: Sequence[int]) -> None:
        """One reference fewer to each of blocks; a block whose count reaches
        zero returns to the free list."""
        for b in blocks:
            if self.refs[b] <= 0:
                raise ValueError("decref of free block %d" % b)
            self.refs[b] -= 1
            if self.refs[b] == 0:
                self.free.append(b)


@dataclass
class PoolShape:
    """The geometry of a KV pool."""

    layers: int
    kv_heads: int
    head_dim: int
    dtype: torch.dtype

    def bytes_per_block(self, block: int = BLOCK) -> int:
        """Bytes of keys and values of one block across all layers."""
        el = torch.empty((), dtype=self.dtype).element_size()
        return 2 * self.layers * block * self.kv_heads * self.head_dim * el


POOL_QUANTUM = 256
"""A cuda pool's blocks are a multiple of this (4,096 tokens), so that free
memory drifting by a little never gives the compiled attention a new shape."""

INDEX_LIMIT = 2**31 - 1
"""The most elements one layer's keys (or values) may hold: Inductor indexes
a tensor of more with 64-bit offsets, and torch 2.11's flex decoding kernel
then fails to compile (a ternary of an int64 and an int32 block bound). The
first GPU contact met it on an H100: a 2-layer Qwen3-0.6B at 0.85 of 77 GiB
free asked for about 8 million slots, 8.2e9 elements a layer. A pool that
large is never used (rows hold at most the model's context each), so the
pool stops below the limit instead."""


def max_pool_blocks(shape: PoolShape) -> int:
    """The most blocks (plus one reserved) whose layer of keys stays within
    INDEX_LIMIT elements, rounded down to POOL_QUANTUM."""
    n = INDEX_LIMIT // (BLOCK * shape.kv_heads * shape.head_dim) - 1
    return n - n % POOL_QUANTUM


def blocks_of_free(shape: PoolShape, free: int, fraction: float) -> int:
    """Blocks of a cuda pool in fraction of free bytes: rounded down to
    POOL_QUANTUM when there are that many, and never past max_pool_blocks."""
    n = min(int(free * fraction) // shape.bytes_per_block(), max_pool_blocks(shape))
    return max(1, n - n % POOL_QUANTUM if n >= POOL_QUANTUM else n)


def pool_blocks(shape: PoolShape, device: torch.device, cpu_bytes: int, fraction: float) -> int:
    """Blocks of a pool: fraction of the free device memory on cuda (with the
    allocator's cache emptied first; blocks_of_free), cpu_bytes on the CPU.
    The slot backend sizes its pool once per process."""
    if device.type == "cuda":
        torch.cuda.empty_cache()
        free, _ = torch.cuda.mem_get_info(device)
        return blocks_of_free(shape, free, fraction)
    return max(1, cpu_bytes // shape.bytes_per_block())


class KVPool:
    """Keys and values of every layer in blocks: k[layer] and v[layer] are
    [(blocks + reserve) * BLOCK, kv_heads, head_dim], block b holding slots
    b*BLOCK to b*BLOCK + BLOCK - 1."""

    def __init__(self, shape: PoolShape, blocks: int, device: torch.device, reserve: int = 0) -> None:
        self.shape = shape
        self.blocks = BlockManager(blocks)
        self.reserved = list(range(blocks, blocks + reserve))
        """Blocks past the manager's, never handed out (DecodeGraphs' scratch)."""
        size = (shape.layers, (blocks + reserve) * BLOCK, shape.kv_heads, shape.head_dim)
        self.k = torch.zeros(size, dtype=shape.dtype, device=device)
        self.v = torch.zeros(size, dtype=shape.dtype, device=device)
        self._gk = torch.empty((0, shape.kv_heads, shape.head_dim), dtype=shape.dtype, device=device)
        self._gv = torch.empty_like(self._gk)
        """The gather buffers of decode_attention, kept across layers and
        steps (grown by doubling): a fresh [B*T, kvh, hd] tensor a layer
        cost 7x the gather itself in page faults on the CPU."""

    def gather(self, layer: int, slots: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The keys and values of layer at the flat slots ([n]), each
        [n, kv_heads, head_dim] in the pool's reused gather buffers (valid
        until the next gather)."""
        n = slots.shape[0]
        if self._gk.shape[0] < n:
            m = max(n, 2 * self._gk.shape[0])
            self._gk = torch.empty((m, *self._gk.shape[1:]), dtype=self._gk.dtype, device=self._gk.device)
            self._gv = torch.empty_like(self._gk)
        k = torch.index_select(self.k[layer], 0, slots, out=self._gk[:n])
        v = torch.index_select(self.v[layer], 0, slots, out=self._gv[:n])
        return k, v

    def nbytes(self) -> int:
        """Bytes of the key and value tensors."""
        return int(self.k.numel() * self.k.element_size() * 2)

    def copy_block(self, src: int, dst: int, tokens: int) -> None:
        """Copies the first tokens slots of block src into block dst, every layer."""
        s, d = src * BLOCK, dst * BLOCK
        self.k[:, d : d + tokens] = self.k[:, s : s + tokens]
        self.v[:, d : d + tokens] = self.v[:, s : s + tokens]

    def write(self, layer: int, slots: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> None:
        """Stores k and v ([n, kv_heads, head_dim]) at the flat slots ([n])."""
        self.k[layer].index_copy_(0, slots, k.to(self.k.dtype))
        self.v[layer].index_copy_(0, slots, v.to(self.v.dtype))


def slots_of(table: Sequence[int], start: int, n: int) -> list[int]:
    """The flat slots of positions start..start+n-1 of a row whose blocks are table."""
    return [table[p // BLOCK] * BLOCK + p % BLOCK for p in range(start, start + n)]


def decode_attention(
    pool: KVPool, layer: int, q: torch.Tensor, tables: torch.Tensor, lengths: torch.Tensor, scale: float
) -> torch.Tensor:
    """Reference paged attention of one query token per row: q is [B, H, hd],
    tables [B, nb] the rows' block ids (padded with any valid id), lengths
    [B] the cached tokens of each row (the query's own included). It gathers
    each row's blocks into the pool's reused buffers ([B, nb*BLOCK, kvh, hd])
    and runs PyTorch's scaled_dot_product_attention over them with a mask of
    each row's length; grouped heads share their key and value head
    (enable_gqa). Returns [B, H, hd] in q's dtype."""
    B, _, hd = q.shape
    kvh = pool.shape.kv_heads
    T = tables.shape[1] * BLOCK
    idx = (tables.unsqueeze(-1) * BLOCK + torch.arange(BLOCK, device=tables.device)).reshape(B * T)
    k, v = pool.gather(layer, idx)
    kt = k.view(B, T, kvh, hd).transpose(1, 2)
    vt = v.view(B, T, kvh, hd).transpose(1, 2)
    valid = torch.arange(T, device=q.device).unsqueeze(0) < lengths.unsqueeze(1)  # [B, T]
    o = torch.nn.functional.scaled_dot_product_attention(
        q.unsqueeze(2), kt, vt, attn_mask=valid[:, None, None, :], scale=scale, enable_gqa=True
    )
    return o.squeeze(2)


class GatherAttention:
    """decode_attention for every layer of one decode step (the CPU default).
    update copies a step's tables and lengths into its own tensors in place
    (a bucket's, whose shapes never change)."""

    def __init__(
        self, pool: KVPool, tables: torch.Tensor, lengths: torch.Tensor, scale: float, compiled: bool = False
    ) -> None:
        self.pool, self.tables, self.lengths, self.scale = pool, tables, lengths, scale

    def update(self, tables: torch.Tensor, lengths: torch.Tensor) -> None:
        """The rows' tables [B, nb] and lengths [B], B and nb those it was
        built with (nothing to copy when they are the tensors it reads)."""
        if tables is not self.tables:
            self.tables.copy_(tables)
        if lengths is not self.lengths:
            self.lengths.copy_(lengths)

    def __call__(self, layer: int, q: torch.Tensor) -> torch.Tensor:
        return decode_attention(self.pool, layer, q, self.tables, self.lengths, self.scale)


_compiled_flex: Callable[..., Any] | None = None

FLEX_Q_BLOCK = 128
"""The block mask's query block: one block holds the single query token.
Inductor's cuda decoding kernel wants it a multiple of its BLOCK_M (16 or
more), so not 1 (read from torch 2.11's flex_decoding.py; it compiled and
ran on an H100)."""


def flex_function(compiled: bool) -> Callable[..., Any]:
    """flex_attention, eager (its dense math reference: scores against every
    slot of the pool, the keys repeated for grouped heads, so only for small
    pools) or compiled once per process with static shapes (Inductor: its
    Triton decoding kernel on cuda, C++ on the CPU). A compiled call whose
    shapes are new compiles again; Dynamo is told to raise when that passes
    its recompile limit rather than fall back to the eager form, which at a
    GPU pool's size asks for terabytes. Callers keep the shapes fixed
    (graphs.DecodeGraphs: one shape per bucket, a pool sized once)."""
    global _compiled_flex
    from torch.nn.attention.flex_attention import flex_attention

    if not compiled:
        return flex_attention
    if _compiled_flex is None:
        import torch._dynamo.config as dynamo_config

        dynamo_config.fail_on_recompile_limit_hit = True
        _compiled_flex = torch.compile(flex_attention, dynamic=False)
    return _compiled_flex


def allow_compiled_shapes(n: int) -> None:
    """Lets Dynamo keep n compiled shapes of one function (the buckets) under
    its recompile limit."""
    import torch._dynamo.config as dynamo_config

    dynamo_config.recompile_limit = max(int(dynamo_config.recompile_limit), n)


class FlexPagedAttention:
    """Decode attention of one step through FlexAttention over the whole
    pool in place: the query is [B, H, 1, hd], the keys and values the pool's
    [1, kvh, blocks*BLOCK, hd] (batch 1, shared by every row), and the block
    mask lists row b's physical blocks (kv_indices, BLOCK tokens each) with a
    mask_mod that keeps a slot when its block's logical index in the row and
    its offset put it before the row's length. One mask serves every layer
    of the step.

    The mask is built once, over tensors of fixed shape that update refills
    in place (a scatter, no shape that depends on values), so that a bucket
    keeps one mask, one compiled shape and, on cuda, builds it outside the
    captured graph; the query blocks are not computed (a decode step never
    runs the backward). Tested on the CPU eager (the dense reference) and
    compiled (Inductor's C++ backend) against GatherAttention."""

    def __init__(
        self, pool: KVPool, tables: torch.Tensor, lengths: torch.Tensor, scale: float, compiled: bool = False
    ) -> None:
        from torch.nn.attention.flex_attention import BlockMask

        self.pool, self.scale = pool, scale
        dev = tables.device
        B = tables.shape[0]
        n = pool.k.shape[1] // BLOCK
        self.n = n
        self.logical = torch.full((B, n + 1), -1, dtype=torch.long, device=dev)
        """logical[b, block]: the block's index in row b's table, -1 when not
        in it (the last column takes the unused table entries' writes)."""
        self.lengths = torch.zeros(B, dtype=torch.long, device=dev)
        self.kv_num = torch.zeros((B, 1, 1), dtype=torch.int32, device=dev)
        self.kv_idx = torch.zeros((B, 1, 1, n), dtype=torch.int32, device=dev)
        logical, lens = self.logical, self.lengths

        def mask_mod(b: torch.Tensor, h: torch.Tensor, q_idx: torch.Tensor, kv_idx: torch.Tensor) -> torch.Tensor:
            lb = logical[b, kv_idx // BLOCK]
            return (lb >= 0) & (lb * BLOCK + kv_idx % BLOCK < lens[b])

        self.mask = BlockMask.from_kv_blocks(
            self.kv_num,
            self.kv_idx,
            BLOCK_SIZE=(FLEX_Q_BLOCK, BLOCK),
            mask_mod=mask_mod,
            seq_lengths=(1, n * BLOCK),
            compute_q_blocks=False,
        )
        if self.mask.kv_indices.data_ptr() != self.kv_idx.data_ptr():
            raise RuntimeError("BlockMask copied its kv_indices: FlexPagedAttention.update could not refill it")
        self.flex = flex_function(compiled)
        self.update(tables, lengths)

    def update(self, tables: torch.Tensor, lengths: torch.Tensor) -> None:
        """Refills the mask in place for the rows' tables [B, nb] (padded
        with any valid id) and lengths [B] (B the rows it was built for)."""
        B, nb = tables.shape
        used = (lengths + BLOCK - 1) // BLOCK
        cols = torch.arange(nb, device=tables.device).expand(B, nb)
        at = torch.where(cols < used.unsqueeze(1), tables, torch.full_like(tables, self.n))
        self.logical.fill_(-1).scatter_(1, at, cols)
        self.lengths.copy_(lengths)
        self.kv_num.copy_(used.view(B, 1, 1))
        self.kv_idx.zero_()
        self.kv_idx[:, 0, 0, :nb] = tables

    def __call__(self, layer: int, q: torch.Tensor) -> torch.Tensor:
        k = self.pool.k[layer].transpose(0, 1).unsqueeze(0)
        v = self.pool.v[layer].transpose(0, 1).unsqueeze(0)
        o: torch.Tensor = self.flex(q.unsqueeze(2), k, v, block_mask=self.mask, scale=self.scale, enable_gqa=True)
        return o.squeeze(2)


ATTENTIONS: dict[str, type[GatherAttention] | type[FlexPagedAttention]] = {
    "gather": GatherAttention,
    "flex": FlexPagedAttention,
}
"""The decode attentions by name (SlotOptions.attention)."""
