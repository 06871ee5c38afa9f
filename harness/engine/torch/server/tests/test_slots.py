"""The slot backend: its block manager, sampler and uniforms on their own,
and its forward and generation against transformers and the reference
backend (sample_wave) on a committed tiny checkpoint."""

from __future__ import annotations

import copy
import random
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from marlow_torch import sampling, slots
from marlow_torch.adapters import Adapters
from marlow_torch.generation import FINISH_LENGTH, FINISH_STOP, GenRequest, plan_waves, sample_wave
from marlow_torch.graphs import DecodeGraphs, buckets
from marlow_torch.keyed import sample_uniform, sample_uniforms
from marlow_torch.kvpool import (
    BLOCK,
    BlockManager,
    FlexPagedAttention,
    GatherAttention,
    KVPool,
    PoolFull,
    PoolShape,
    blocks_for,
    blocks_of_free,
    max_pool_blocks,
    slots_of,
)
from marlow_torch.model import Model, open_model
from marlow_torch.protocol import Args, Fault
from marlow_torch.qwen3_decode import Qwen3Decoder, RowAdapters
from marlow_torch.rowstate import DecodeRows
from marlow_torch.sampling import sample_device, sample_key, sample_row
from marlow_torch.slots import SlotOptions, SlotStats, slot_generate

TINY = Path(__file__).resolve().parents[5] / "seeds" / "models" / "s-862b5de974d5"


def test_blocks_alloc_lowest_first_share_and_free() -> None:
    bm = BlockManager(4)
    a = bm.alloc(2)
    assert a == [0, 1] and bm.n_free() == 2 and bm.refs[:2] == [1, 1]
    bm.incref([1])
    bm.decref(a)
    assert bm.refs == [0, 1, 0, 0] and bm.n_free() == 3  # block 1 is still shared
    assert bm.alloc(1) == [0] and bm.reuses == 1
    with pytest.raises(PoolFull, match="asked for 3 blocks, 2 of 4 free"):
        bm.alloc(3)
    bm.decref([1, 0])
    assert bm.n_free() == 4 and bm.peak == 2
    with pytest.raises(ValueError, match="decref of free block 1"):
        bm.decref([1])
    with pytest.raises(ValueError, match="incref of free block 2"):
        bm.incref([2])


def test_slots_of_follow_the_block_table() -> None:
    assert slots_of([5, 2], BLOCK - 1, 3) == [5 * BLOCK + BLOCK - 1, 2 * BLOCK, 2 * BLOCK + 1]


GiB = 1 << 30


@pytest.mark.parametrize(
    "layers, free, want",
    [
        (28, 77 * GiB, 38144),  # Qwen3-0.6B on an H100: memory bounds the pool (the device check's 38,144 blocks)
        (28, 4 * GiB, 1792),  # rounded down to the quantum
        (28, GiB // 4, 124),  # fewer than a quantum: taken as they are
        (2, 77 * GiB, 130816),  # the 2-layer engine-check model: the index limit bounds it (memory alone: 536,064)
        (36, 0, 1),  # never empty
    ],
)
def test_cuda_pool_stays_within_memory_and_32_bit_indexing(layers: int, free: int, want: int) -> None:
    shape = PoolShape(layers=layers, kv_heads=8, head_dim=128, dtype=torch.bfloat16)
    n = blocks_of_free(shape, free, 0.85)
    assert n == want
    assert n * shape.bytes_per_block() <= max(free * 0.85, shape.bytes_per_block())
    per_layer = (n + 1) * BLOCK * shape.kv_heads * shape.head_dim  # one layer's keys, the scratch block included
    assert per_layer < 2**31
    assert max_pool_blocks(shape) % 256 == 0


def test_decode_rows_change_only_where_rows_do() -> None:
    """The device-resident decode rows: rows appended after the live ones,
    a table entry per grown block, the survivors of a retire moved to the
    front in order with the rest padded, and a step's tokens and positions
    advanced; the flat slots follow each row's table at its position."""
    st = DecodeRows(4, 3, 9, ["b", "a"], torch.device("cpu"))
    assert st.names == ["a", "b"] and st.adapter_index("b") == 2 and st.adapter_index("") == 0
    with pytest.raises(ValueError, match="adapter 'c' is not one of"):
        st.adapter_index("c")
    st.append([[1], [2, 3], [4]], [5, 17, 0], ["a", "", "b"], [0.7, 1.0, 1.3], [11, 12, 0])
    st.set_tokens([2], torch.tensor([13]))
    assert st.live == 3 and st.tokens.tolist() == [11, 12, 13, 0] and st.pos.tolist() == [5, 17, 0, 0]
    assert st.tables.tolist() == [[1, 9, 9], [2, 3, 9], [4, 9, 9], [9, 9, 9]]
    assert st.slots(3).tolist() == [1 * BLOCK + 5, 3 * BLOCK + 1, 4 * BLOCK]
    st.extend([(0, 1, 6), (2, 1, 7)])
    st.keep([0, 2])
    assert st.live == 2 and st.tables.tolist() == [[1, 6, 9], [4, 7, 9], [9, 9, 9], [9, 9, 9]]
    assert st.adapter.tolist() == [1, 2, 0, 0] and st.temps.tolist() == [0.7, 1.3, 1.0, 1.0]
    assert st.tokens.tolist() == [11, 13, 0, 0] and st.pos.tolist() == [5, 0, 0, 0]
    st.advance(torch.tensor([21, 22]))
    assert st.tokens.tolist() == [21, 22, 0, 0] and st.pos.tolist() == [6, 1, 0, 0]
    with pytest.raises(ValueError, match="2 live rows \\+ 3 new exceed the 4 decode rows"):
        st.append([[1]] * 3, [0] * 3, [""] * 3, [1.0] * 3, [0] * 3)
    st.reset()
    assert st.live == 0 and st.tables.eq(9).all() and st.pos.eq(0).all()


def test_uniforms_are_the_scalar_hash_vectorised() -> None:
    rng = random.Random(1)
    seeds = [0, 1, (1 << 64) - 1, -3] + [rng.getrandbits(64) for _ in range(200)]
    positions = [0, 7, 5000, 2] + [rng.randrange(1 << 20) for _ in range(200)]
    got = sample_uniforms(seeds, positions)
    want = [sample_uniform(s, p) for s, p in zip(seeds, positions)]
    assert got.dtype == np.float64 and got.tolist() == want


@pytest.mark.parametrize("chunk", [sampling.SAMPLE_CHUNK, 151 * 5, 1])
def test_device_sampler_is_the_reference_sampler_bit_for_bit(chunk: int, monkeypatch: pytest.MonkeyPatch) -> None:
    # One chunk, chunks of 5 rows (the last one short), rows one by one.
    monkeypatch.setattr(sampling, "SAMPLE_CHUNK", chunk)
    g = torch.Generator().manual_seed(2)
    B, V = 96, 151
    logits = torch.randn((B, V), generator=g) * 4
    logits[3] = 0.0  # a flat row
    logits[4, 7] = 80.0  # a peaked row
    temps = [0.3 + 0.1 * (b % 9) for b in range(B)]
    seeds = [1000 + b for b in range(B)]
    pos = [b * 3 for b in range(B)]
    tok, lp = sample_device(
        logits, torch.tensor(temps, dtype=torch.float64), torch.from_numpy(sample_uniforms(seeds, pos))
    )
    assert tok.dtype == torch.long and lp.dtype == torch.float32
    for b in range(B):
        t, p = sample_row(logits[b].numpy(), temps[b], sample_key(seeds[b], pos[b]))
        assert (int(tok[b]), float(lp[b])) == (t, p), "row %d" % b


def test_flex_attention_reads_the_pool_as_the_gather_reference_does() -> None:
    """FlexAttention over the pool in place (eager on the CPU) against the
    gathered-blocks reference: rows of 1, 16, 17, 40 and 70 cached tokens
    (within a block, at and across block edges), one block shared by two
    rows, tables padded, two query heads per key head."""
    B, H, kvh, hd, n = 5, 4, 2, 16, 30
    pool = KVPool(PoolShape(2, kvh, hd, torch.float32), n, torch.device("cpu"))
    g = torch.Generator().manual_seed(0)
    pool.k.copy_(torch.randn(pool.k.shape, generator=g))
    pool.v.copy_(torch.randn(pool.v.shape, generator=g))
    lengths = torch.tensor([1, 16, 17, 40, 70])
    used = [blocks_for(int(x)) for x in lengths]
    perm = torch.randperm(n, generator=g).tolist()
    rows, o = [], 0
    for u in used:
        rows.append(perm[o : o + u] + [perm[o]] * (max(used) - u))
        o += u
    rows[1][0] = rows[3][0]  # a shared prefix block
    tables = torch.tensor(rows)
    q = torch.randn((B, H, hd), generator=g)
    gather = GatherAttention(pool, tables, lengths, hd**-0.5)
    flex = FlexPagedAttention(pool, tables, lengths, hd**-0.5)
    for layer in range(2):
        want, got = gather(layer, q), flex(layer, q)
        assert got.shape == want.shape == (B, H, hd)
        assert float((got - want).abs().max()) <= 1e-6, layer


# The model parts: the committed tiny checkpoint, two adapters with B moved off zero.


@pytest.fixture(scope="module")
def tiny() -> Iterator[tuple[Model, Adapters]]:
    m = open_model(Args({"checkpoint": str(TINY), "device": "cpu"}, "open"))
    ads = Adapters(m)
    g = torch.Generator().manual_seed(9)
    for i, name in enumerate(["a", "b"]):
        ad = ads.add(name, 4 + 4 * i, 8.0, [], 7 + i)
        with torch.no_grad():
            for p in ad.params:
                if p.is_b:
                    p.tensor.copy_(torch.randn(p.tensor.shape, generator=g) * 0.05)
    yield m, ads


LOGIT_TOL = 1e-5
"""The slot forward's logits against transformers' (absolute), asserted at
the real width (logits up to 3.4: measured 3.5e-6). On the tiny checkpoint
(logits up to 18) transformers' own fp32 logits are up to 1.4e-5 from a
float64 forward, so there the slot forward is held to twice transformers' error
against float64 instead, and to LOGIT_TOL plus that error against transformers."""


def check_forward(
    m: Model,
    ads: Adapters,
    prompts: list[list[int]],
    names: list[str],
    mode: str,
    tail: int,
    direct: bool,
    attention: str = "gather",
) -> tuple[float, float, float]:
    """Prefills all but the last tail tokens of each (prompt, adapter) and
    decodes the rest as one mixed batch, comparing every logit vector with
    transformers' (one unbatched fp32 forward of the whole prompt) and with
    a float64 forward. direct: the gap to transformers must be within
    LOGIT_TOL; else see LOGIT_TOL. Returns the largest gap to transformers,
    the slot forward's and transformers' largest error against float64."""
    with torch.no_grad():
        refs: dict[tuple[str, int], torch.Tensor] = {}
        truth: dict[tuple[str, int], torch.Tensor] = {}
        for dt in (torch.float64, torch.float32):
            m.hf.to(dt)
            for name in names:
                with ads.use(name):
                    for k, p in enumerate(prompts):
                        z = m.hf(input_ids=torch.tensor([p])).logits[0]
                        (truth if dt == torch.float64 else refs)[name, k] = z if dt == torch.float64 else z.float()
        dec = Qwen3Decoder(m, ads, names, mode, attention)
        rows = [(name, k) for name in names for k in range(len(prompts))]
        per = max(len(p) for p in prompts) // BLOCK + 1
        pool = KVPool(dec.pool_shape(), per * len(rows), m.device)
        got: dict[tuple[str, int, int], torch.Tensor] = {}
        tables = []
        for r, (name, k) in enumerate(rows):
            table = list(range(per * r, per * r + per))
            tables.append(table)
            n = len(prompts[k]) - tail
            got[name, k, n - 1] = dec.prefill(prompts[k][:n], name, pool, torch.tensor(slots_of(table, 0, n)))
        ra = RowAdapters([name for name, _ in rows], m.device)
        for j in range(tail):
            pos = [len(prompts[k]) - tail + j for _, k in rows]
            toks = torch.tensor([prompts[k][p] for (_, k), p in zip(rows, pos)])
            sl = torch.tensor([slots_of(t, p, 1)[0] for t, p in zip(tables, pos)])
            lg = dec.decode(toks, torch.tensor(pos), ra, pool, torch.tensor(tables), sl)
            assert lg.shape == (len(rows), m.vocab) and lg.dtype == torch.float32
            for r, (name, k) in enumerate(rows):
                got[name, k, pos[r]] = lg[r]
    gap = max(float((z - refs[n, k][p]).abs().max()) for (n, k, p), z in got.items())
    e_slot = max(float((z.double() - truth[n, k][p]).abs().max()) for (n, k, p), z in got.items())
    e_tf = max(float((refs[n, k][p].double() - truth[n, k][p]).abs().max()) for (n, k, p) in got)
    if direct:
        assert gap <= LOGIT_TOL, (gap, e_slot, e_tf)
    else:
        assert e_slot <= 2 * max(LOGIT_TOL / 2, e_tf) and gap <= LOGIT_TOL + e_tf, (gap, e_slot, e_tf)
    return gap, e_slot, e_tf


@pytest.mark.parametrize(("mode", "attention"), [("split", "gather"), ("mask", "gather"), ("mask", "flex")])
def test_forward_matches_transformers(tiny: tuple[Model, Adapters], mode: str, attention: str) -> None:
    m, ads = tiny
    prompts = [[3 + (7 * i) % 90 for i in range(n)] for n in (37, 5)]
    gap, e_slot, e_tf = check_forward(m, ads, prompts, ["", "a", "b"], mode, 4, False, attention)
    print(
        "tiny %s: logits gap to transformers %.3g; against float64: slots %.3g, transformers %.3g"
        % (mode, gap, e_slot, e_tf)
    )


def test_forward_matches_transformers_at_real_width() -> None:
    """The published Qwen3-0.6B shape (vocab 151,936, head_dim 128, theta
    1e6) with 2 layers, random weights and a rank-8 adapter."""
    from marlow_torch.bench_gen import random_model

    m = random_model(2, "cpu", torch.float32, 4096)
    ads = Adapters(m)
    ad = ads.add("a", 8, 16.0, [], 7)
    g = torch.Generator().manual_seed(9)
    with torch.no_grad():
        for p in ad.params:
            if p.is_b:
                p.tensor.copy_(torch.randn(p.tensor.shape, generator=g) * 0.02)
    prompts = [[(1000 + 7919 * i) % 151000 for i in range(n)] for n in (21, 6)]
    gap, e_slot, e_tf = check_forward(m, ads, prompts, ["", "a"], "mask", 3, True)
    print(
        "real width: logits gap to transformers %.3g; against float64: slots %.3g, transformers %.3g"
        % (gap, e_slot, e_tf)
    )


def requests(n: int) -> list[GenRequest]:
    """n requests: groups of 8 with one prompt and adapter (the rollouts of a
    problem), then single ones reusing those prompts under other adapters;
    prompt lengths 2 to 69 (within one block, and across up to five), 1 to 47 new tokens."""
    rng = random.Random(5)
    prompts = [[rng.randrange(3, 90) for _ in range(rng.randrange(2, 70))] for _ in range(n // 8)]
    out = []
    for i in range(n):
        grouped = i < n * 5 // 8
        pr = prompts[i // 8] if grouped else prompts[rng.randrange(len(prompts))]
        adapter = ["", "a", "b"][(i // 8) % 3 if grouped else i % 3]
        out.append(GenRequest(i, adapter, list(pr), rng.randrange(1, 48), 0.7 + 0.1 * (i % 5), False, 1000 + i))
    return out


Recorder = dict[tuple[int, int], "np.ndarray[Any, np.dtype[np.float32]]"]


def run_reference(m: Model, ads: Adapters, reqs: list[GenRequest], rec: Recorder) -> None:
    keys = {sample_key(s.seed, p): (s.seed, p) for s in reqs for p in range(s.max_new)}

    def record(logits: Any, temp: float, key: int) -> tuple[int, float]:
        rec[keys[key]] = np.array(logits, dtype=np.float32)
        return sample_row(logits, temp, key)

    with pytest.MonkeyPatch.context() as mp, torch.no_grad():
        mp.setattr(sampling, "sample_row", record)
        for w in plan_waves(reqs, m.gen_budget):
            live = [reqs[j] for j in w]
            sample_wave(m, ads, live, live[0].adapter, lambda **k: None)


def run_slots(m: Model, ads: Adapters, reqs: list[GenRequest], rec: Recorder, opts: SlotOptions) -> SlotStats:
    orig = slots.Scheduler.sample

    def record(self: slots.Scheduler, rows: list[slots.Row], logits: torch.Tensor, temps: torch.Tensor) -> torch.Tensor:
        for r, row in zip(rows, logits):
            rec[r.seq.seed, r.drawn] = row.numpy().copy()
        return orig(self, rows, logits, temps)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(slots.Scheduler, "sample", record)
        return slot_generate(m, ads, reqs, lambda **k: None, opts)


def straddles(z1: Any, z2: Any, temp: float, u: float) -> bool:
    """Whether the uniform u falls between the two CDFs of softmax(z / temp)
    at some boundary between the tokens that they pick."""
    c1, c2 = (np.cumsum(np.exp(z / temp - (z / temp).max())) for z in (z1.astype(np.float64), z2.astype(np.float64)))
    c1, c2 = c1 / c1[-1], c2 / c2[-1]
    t1, t2 = int(np.searchsorted(c1, u, side="right")), int(np.searchsorted(c2, u, side="right"))
    lo, hi = min(t1, t2), max(t1, t2)
    return any(
        min(c1[k], c2[k]) <= u < max(c1[k], c2[k]) or min(c1[k], c2[k]) < u <= max(c1[k], c2[k]) for k in range(lo, hi)
    )


def compare(ref: list[GenRequest], got: list[GenRequest], r1: Recorder, r2: Recorder) -> tuple[int, int, float]:
    """Counts the requests that differ (each must begin at a straddle) and
    the tokens compared; returns them with the largest log-prob gap."""
    differ, compared, gap = 0, 0, 0.0
    for a, b in zip(ref, got):
        assert b.finish in (FINISH_STOP, FINISH_LENGTH) and b.ids, "request %d was not generated" % b.index
        n = 0
        while n < min(len(a.ids), len(b.ids)) and a.ids[n] == b.ids[n]:
            z1, z2 = r1[a.seed, n], r2[b.seed, n]
            assert float(np.abs(z1 - z2).max()) <= 1e-5 * max(1.0, float(np.abs(z1).max())), (a.index, n)
            gap = max(gap, abs(a.logprobs[n] - b.logprobs[n]))
            n += 1
        compared += n
        if (a.ids, a.finish) != (b.ids, b.finish):
            differ += 1
            z1, z2 = r1[a.seed, n], r2[b.seed, n]
            assert straddles(z1, z2, a.temperature, sample_uniform(a.seed, n)), "request %d differs at %d" % (
                a.index,
                n,
            )
    return differ, compared, gap


def truth_errors(m: Model, ads: Adapters, reqs: list[GenRequest], other: list[GenRequest]) -> np.ndarray[Any, Any]:
    """|log-prob - float64 truth| of every token of reqs that other (the
    other backend's run) generated too: the truth is one float64 forward of
    prompt and completion under the request's adapter."""
    errs: list[float] = []
    with torch.no_grad():
        m.hf.double()
        try:
            for a, b in zip(reqs, other):
                n = 0
                while n < min(len(a.ids), len(b.ids)) and a.ids[n] == b.ids[n]:
                    n += 1
                if n == 0:
                    continue
                with ads.use(a.adapter):
                    z = m.hf(input_ids=torch.tensor([a.prompt + a.ids[: n - 1]])).logits[0, len(a.prompt) - 1 :]
                lp = torch.log_softmax(z / a.temperature, -1).gather(1, torch.tensor(a.ids[:n])[:, None])[:, 0]
                errs.extend(abs(np.array(a.logprobs[:n], dtype=np.float64) - lp.numpy()))
        finally:
            m.hf.float()
    return np.array(errs)


@pytest.mark.slow
def test_slots_generate_what_the_reference_does_at_real_width() -> None:
    """The published Qwen3-0.6B widths (2 layers, random weights, vocab
    151,936) with two rank-8 adapters, 64 of the requests above (token ids
    spread over the vocabulary) and a pool of 40 blocks: tokens equal the
    reference's wherever their logits do not straddle a CDF boundary, and
    log-probs agree within 1e-5 (logits there are within 3.5e-6 of
    transformers', so the float32 noise that the tiny checkpoint's large
    logits show stays below it). About a minute on the CPU."""
    from marlow_torch.bench_gen import random_model

    m = random_model(2, "cpu", torch.float32, 4096)
    ads = Adapters(m)
    g = torch.Generator().manual_seed(9)
    for name in ("a", "b"):
        ad = ads.add(name, 8, 16.0, [], 7)
        with torch.no_grad():
            for p in ad.params:
                if p.is_b:
                    p.tensor.copy_(torch.randn(p.tensor.shape, generator=g) * 0.02)
    reqs = requests(64)
    for q in reqs:
        q.prompt = [(t * 7919) % 151000 + 3 for t in q.prompt]
    ref, got = copy.deepcopy(reqs), copy.deepcopy(reqs)
    r1: Recorder = {}
    r2: Recorder = {}
    run_reference(m, ads, ref, r1)
    st = run_slots(m, ads, got, r2, SlotOptions(slots=16, pool_blocks=40, lora_mode="mask"))
    differ, compared, gap = compare(ref, got, r1, r2)
    print(
        "real width: %d of 64 requests differ (each at a straddle), %d tokens compared, log-prob gap %.3g; %s"
        % (differ, compared, gap, st)
    )
    assert compared > 1000 and differ <= 4
    assert gap <= 1e-5


@pytest.fixture(scope="module")
def reference_run(tiny: tuple[Model, Adapters]) -> tuple[list[GenRequest], list[GenRequest], Recorder]:
    m, ads = tiny
    reqs = requests(256)
    ref = copy.deepcopy(reqs)
    r1: Recorder = {}
    run_reference(m, ads, ref, r1)
    return reqs, ref, r1


@pytest.mark.parametrize("mode", ["split", "mask"])
def test_slots_generate_what_the_reference_does(
    tiny: tuple[Model, Adapters], reference_run: tuple[list[GenRequest], list[GenRequest], Recorder], mode: str
) -> None:
    m, ads = tiny
    reqs, ref, r1 = reference_run
    got = copy.deepcopy(reqs)
    r2: Recorder = {}
    st = run_slots(m, ads, got, r2, SlotOptions(slots=32, pool_blocks=60, lora_mode=mode))
    assert sum(s.finish == FINISH_STOP for s in ref) > 20  # stop tokens do happen
    # and rows stepped once past them (their stop read one step late), whose
    # extra tokens were dropped: completions still equal the reference's
    assert st.dropped > 20, st
    differ, compared, gap = compare(ref, got, r1, r2)
    # Log-probs against a float64 forward: in fp32 neither backend is within
    # 1e-5 of it (the reference measured 2.3e-5 at most, and it differs from
    # transformers' own unbatched fp32 forward by up to 2.8e-5), so the slot
    # backend is held to the reference's own float32 error instead.
    e_ref, e_got = truth_errors(m, ads, ref, got), truth_errors(m, ads, got, ref)
    print(
        "%s: %d of 256 requests differ (each at a straddle), %d tokens compared, log-prob gap %.3g; "
        "error vs float64: reference max %.3g p99 %.3g, slots max %.3g p99 %.3g; %s"
        % (
            mode,
            differ,
            compared,
            gap,
            e_ref.max(),
            np.quantile(e_ref, 0.99),
            e_got.max(),
            np.quantile(e_got, 0.99),
            st,
        )
    )
    assert compared > 3000 and len(e_got) == len(e_ref) == compared
    assert e_got.max() <= 2 * e_ref.max() and np.quantile(e_got, 0.99) <= 1.25 * np.quantile(e_ref, 0.99)
    assert gap <= e_ref.max() + e_got.max()
    # The pool was small: rows waited, blocks were reused many times and prompts shared.
    assert st.blocks == 60 and st.peak_blocks == 60 and st.block_reuses > 500
    assert st.prefills < 256 and st.shared_rows == 256 - st.prefills


def test_queue_longer_than_the_pool_never_stalls(tiny: tuple[Model, Adapters]) -> None:
    m, ads = tiny
    reqs = [GenRequest(i, ["a", "b"][i % 2], [5 + i % 7] * (20 + i), 40, 1.0, True, i) for i in range(40)]
    st = slot_generate(m, ads, reqs, lambda **k: None, SlotOptions(slots=16, pool_blocks=8))
    assert all(len(s.ids) == 40 and s.finish == FINISH_LENGTH for s in reqs)
    # eight blocks hold two or three rows; a row that outgrows them is preempted and resumed
    assert st.peak_rows <= 3 and st.prefills == 40 and st.preemptions > 0 and st.peak_blocks == 8


@pytest.mark.parametrize("graphs", [False, True])
def test_a_pool_too_small_for_every_row_samples_what_a_large_one_does(
    tiny: tuple[Model, Adapters], graphs: bool
) -> None:
    """48 requests (shared prompts, three adapters, stop tokens) at 16 slots
    in a pool of 20 blocks, where rows run dry and the youngest are
    preempted and recomputed, and in one of 400, where nothing is: the same
    tokens and finishes (keyed sampling), log-probs within float32 noise.
    (A dry pool first retires the rows whose stop token was still unread,
    so 24 blocks, enough for 5 preemptions, became 20 for 10.)"""
    m, ads = tiny
    reqs = requests(48)
    small, large = copy.deepcopy(reqs), copy.deepcopy(reqs)
    st = slot_generate(m, ads, small, lambda **k: None, SlotOptions(slots=16, pool_blocks=20, graphs=graphs))
    big = slot_generate(m, ads, large, lambda **k: None, SlotOptions(slots=16, pool_blocks=400, graphs=graphs))
    assert st.preemptions > 5 and big.preemptions == 0, (st, big)
    assert any(s.finish == FINISH_STOP for s in large)
    for a, b in zip(large, small):
        assert (a.ids, a.finish) == (b.ids, b.finish), a.index
        assert max(abs(x - y) for x, y in zip(a.logprobs, b.logprobs)) <= 1e-5, a.index


def test_a_request_longer_than_the_pool_is_an_error_naming_it(tiny: tuple[Model, Adapters]) -> None:
    m, ads = tiny
    reqs = [GenRequest(0, "", [4] * 10, 5, 1.0, False, 0), GenRequest(1, "a", [4] * 100, 100, 1.0, False, 1)]
    with pytest.raises(Fault) as e:
        slot_generate(m, ads, reqs, lambda **k: None, SlotOptions(pool_blocks=12))
    assert e.value.kind == "too_long"
    assert (
        "request 1: prompt of 100 tokens + 100 new tokens needs 14 KV blocks of 16 tokens but the pool holds 12"
        in str(e.value)
    )
    assert reqs[0].ids == []  # nothing ran


def test_generate_selects_the_backend(tiny: tuple[Model, Adapters], monkeypatch: pytest.MonkeyPatch) -> None:
    from marlow_torch.generation import generate

    m, ads = tiny
    msgs = [{"role": "user", "content": "abc"}]
    args = Args({"requests": [{"messages": msgs, "temperature": 1.0, "max_new_tokens": 3, "seed": 1}]}, "generate")
    calls: list[str] = []
    real: Callable[..., SlotStats] = slots.slot_generate

    def spy(*a: Any) -> SlotStats:
        calls.append("slots")
        return real(*a)

    monkeypatch.setattr(slots, "slot_generate", spy)
    monkeypatch.setattr(m, "gen_backend", "slots")
    a = generate(m, ads, args, lambda **k: None)
    monkeypatch.setattr(m, "gen_backend", "reference")
    b = generate(m, ads, args, lambda **k: None)
    assert calls == ["slots"] and len(a["completions"]) == len(b["completions"]) == 1


def test_buckets() -> None:
    assert buckets(64) == [4, 8, 16, 32, 64] and buckets(3) == [3] and buckets(100) == [4, 8, 16, 32, 64, 100]
    with pytest.raises(ValueError, match="at least one row"):
        buckets(0)


@pytest.mark.parametrize("attention", ["gather", "flex"])
def test_bucketed_step_pads_into_scratch(tiny: tuple[Model, Adapters], attention: str) -> None:
    """A step of 5 rows at bucket 8 on static buffers (eager on the CPU, as
    a CUDA graph would replay them): the same logits as the plain step, the
    same keys and values in the rows' blocks, the padded rows' writes in the
    scratch block only, and the next step reuses the bucket."""
    m, ads = tiny
    names = ["", "a", "b", "a", ""]
    prompts = [[3 + (5 * i + r) % 90 for i in range(7 + 9 * r)] for r in range(5)]
    with torch.no_grad():
        dec = Qwen3Decoder(m, ads, ["", "a", "b"], "mask", attention)
        pools = [KVPool(dec.pool_shape(), 30, m.device, reserve=1) for _ in range(2)]
        tables = [list(range(5 * r, 5 * r + 5)) for r in range(5)]
        for pool in pools:
            for r, p in enumerate(prompts):
                dec.prefill(p, names[r], pool, torch.tensor(slots_of(tables[r], 0, len(p))))
        state = DecodeRows(20, 5, pools[1].reserved[0], ["a", "b"], m.device)
        graphs = DecodeGraphs(dec, pools[1], state, capture=False)
        state.append(tables, [len(p) for p in prompts], names, [1.0] * 5, [p[0] for p in prompts])
        for j in range(2):
            toks = [p[j] for p in prompts]
            pos = [len(p) + j for p in prompts]
            sl = torch.tensor([slots_of(t, q, 1)[0] for t, q in zip(tables, pos)])
            want = dec.decode(
                torch.tensor(toks), torch.tensor(pos), RowAdapters(names, m.device), pools[0], torch.tensor(tables), sl
            )
            got = graphs.step(5)
            assert got.shape == want.shape and float((got - want).abs().max()) <= 1e-5
            state.advance(torch.tensor([p[j + 1] for p in prompts]))
        assert list(graphs.buckets) == [8] and graphs.captures == 0
        rows = 30 * BLOCK
        assert torch.allclose(pools[0].k[:, :rows], pools[1].k[:, :rows], atol=1e-6, rtol=0)
        assert torch.allclose(pools[0].v[:, :rows], pools[1].v[:, :rows], atol=1e-6, rtol=0)
        assert float(pools[1].k[:, rows:].abs().sum()) > 0 and float(pools[0].k[:, rows:].abs().sum()) == 0
    with pytest.raises(ValueError, match="lora_mode 'split'"):
        DecodeGraphs(Qwen3Decoder(m, ads, ["a"], "split"), pools[1], state, capture=False)
    with pytest.raises(ValueError, match="CUDA graphs need a cuda pool"):
        DecodeGraphs(dec, pools[1], state, capture=True)
    with pytest.raises(ValueError, match="a step of 6 rows, 5 are live"):
        graphs.step(6)


def test_slots_generate_at_buckets(tiny: tuple[Model, Adapters]) -> None:
    """slot_generate with bucketed steps (eager on the CPU) samples what the
    plain steps do on a queue with refill, shared prompts and stop tokens."""
    m, ads = tiny
    reqs = requests(48)
    plain, bucketed = copy.deepcopy(reqs), copy.deepcopy(reqs)
    slot_generate(m, ads, plain, lambda **k: None, SlotOptions(slots=12, pool_blocks=30))
    st = slot_generate(m, ads, bucketed, lambda **k: None, SlotOptions(slots=12, pool_blocks=30, graphs=True))
    assert st.block_reuses > 0 and any(s.finish == FINISH_STOP for s in plain)
    for a, b in zip(plain, bucketed):
        assert (a.ids, a.finish) == (b.ids, b.finish), a.index
        assert max(abs(x - y) for x, y in zip(a.logprobs, b.logprobs)) <= 1e-5, a.index


@pytest.mark.parametrize(
    ("env", "want"),
    [({}, "expandable_segments:True"), ({"PYTORCH_CUDA_ALLOC_CONF": "x"}, "x"), ({"PYTORCH_ALLOC_CONF": "y"}, None)],
)
def test_alloc_defaults(env: dict[str, str], want: str | None, monkeypatch: pytest.MonkeyPatch) -> None:
    from marlow_torch import cli

    for k in ("PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF"):
        monkeypatch.delenv(k, raising=False)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    cli.alloc_defaults()
    import os

    assert os.environ.get("PYTORCH_CUDA_ALLOC_CONF") == want


def optimizer_step(ads: Adapters, seed: int) -> None:
    """One AdamW step of every adapter at a random gradient (what a train step ends with)."""
    from marlow_torch.training import TrainOptions, adamw

    o = TrainOptions("seq-mean-token-mean", 1.0, 0.2, 0.28, {}, 1.0, 1e-2, 0.9, 0.999, 1e-8, 0.0)
    g = torch.Generator().manual_seed(seed)
    for name in ads.names():
        ad = ads.by_name[name]
        adamw(ad, torch.randn(ad.numel(), generator=g), o)


@pytest.mark.slow
def test_compiled_flex_compiles_once_across_generate_calls() -> None:
    """The flex attention compiled by Inductor (its C++ backend on the CPU)
    at buckets 4 and 8, through generate calls of 1 to 20 requests (so
    batches of every size from 1 to 8) with an optimizer step between calls:
    after the first call nothing compiles again and nothing falls back to
    eager (Dynamo's counters), and every completion equals the eager flex
    path's (log-probs within 3e-5: transformers' own float32 logits are up
    to 1.4e-5 off on this checkpoint, LOGIT_TOL). About two minutes on the
    CPU, most of it the first compile."""
    from torch._dynamo.utils import counters

    m = open_model(Args({"checkpoint": str(TINY), "device": "cpu"}, "open"))
    ads = Adapters(m)
    for i, name in enumerate(["a", "b"]):
        ads.add(name, 4 + 4 * i, 8.0, [], 7 + i)
    optimizer_step(ads, 0)
    torch._dynamo.reset()
    counters.clear()
    engines: dict[bool, slots.SlotEngine] = {}
    seen: list[tuple[int, int, int]] = []
    for call, n in enumerate([20, 3, 13, 5, 1, 8, 11]):
        reqs = requests(24)[:n]
        for q in reqs:
            q.seed += 100 * call
        got: dict[bool, list[GenRequest]] = {}
        for compiled in (True, False):
            m.slot_engine = engines.get(compiled)
            got[compiled] = copy.deepcopy(reqs)
            slot_generate(
                m,
                ads,
                got[compiled],
                lambda **k: None,
                SlotOptions(slots=8, pool_blocks=40, graphs=True, attention="flex", compile_flex=compiled),
            )
            engines[compiled] = m.slot_engine
        for a, b in zip(got[True], got[False]):
            assert (a.ids, a.finish) == (b.ids, b.finish), (call, a.index)
            # within transformers' own float32 error on this checkpoint (LOGIT_TOL)
            assert max(abs(x - y) for x, y in zip(a.logprobs, b.logprobs)) <= 3e-5, (call, a.index)
        seen.append((counters["frames"]["total"], counters["frames"]["ok"], counters["stats"]["unique_graphs"]))
        optimizer_step(ads, call + 1)
    graphs = engines[True].graphs
    assert graphs is not None and sorted(graphs.buckets) == [4, 8]
    print("compiled flex: frames total, ok, unique graphs after each call: %s" % seen)
    assert seen[0][2] >= 2, "the buckets did not compile: %s" % seen
    assert all(s == seen[0] for s in seen), "compiled again after the first call: %s" % seen
    assert seen[0][0] == seen[0][1] and not counters["graph_break"], (seen, dict(counters["graph_break"]))
