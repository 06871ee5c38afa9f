"""The train step's forward on a committed tiny checkpoint: right-padded
rows without an attention mask, the float32 head, micro-batches by length
(order-independent gradients) and the skipped base-policy forward."""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch

from marlow_torch.adapters import Adapters
from marlow_torch.model import Model, hidden, open_model
from marlow_torch.protocol import Args
from marlow_torch.training import TrainOptions, gradients, micro_batch_backward
from marlow_torch.turns import Turn, by_length, group, loss_weights, micro_batches

TINY = Path(__file__).resolve().parents[5] / "seeds" / "models" / "s-862b5de974d5"

OPTIONS: dict[str, Any] = {
    "loss_agg": "seq-mean-token-mean",
    "temperature": 0.7,
    "clip_low": 0.2,
    "clip_high": 0.28,
    "kl_coef": {},
    "grad_clip": 1.0,
    "lr": 1e-3,
    "beta1": 0.9,
    "beta2": 0.999,
    "eps": 1e-8,
    "weight_decay": 0.01,
}


def open_tiny(dtype: str = "float32", **kw: Any) -> tuple[Model, Adapters]:
    m = open_model(Args({"checkpoint": str(TINY), "device": "cpu", "dtype": dtype, **kw}, "open"))
    ads = Adapters(m)
    ad = ads.add("p", 4, 8.0, [], 7)
    g = torch.Generator().manual_seed(3)
    with torch.no_grad():
        for p in ad.params:
            if p.is_b:
                p.tensor.copy_(torch.randn(p.tensor.shape, generator=g) * 0.05)
    return m, ads


@pytest.fixture(scope="module")
def tiny() -> Iterator[tuple[Model, Adapters]]:
    yield open_tiny()


def make_turns(lengths: list[tuple[int, int]], seed: int = 5) -> list[Turn]:
    g = torch.Generator().manual_seed(seed)
    out = []
    for k, (p, c) in enumerate(lengths):
        t = Turn(
            torch.randint(0, 95, (p,), generator=g).tolist(),
            torch.randint(0, 95, (c,), generator=g).tolist(),
        )
        t.old = (-4.0 + torch.rand(c, generator=g, dtype=torch.float64)).tolist()
        t.role = ["generator", "evaluator"][k % 2]
        t.agent = t.role + str(k % 3 // 2)
        t.advantage = [1.0, -0.5, 0.8, -1.2][k % 4]
        out.append(t)
    return out


LENGTHS = [(11, 7), (3, 20), (15, 5), (9, 6), (4, 2), (30, 9), (6, 13), (2, 3)]


def masked_hidden(model: Model, turns: list[Turn]) -> torch.Tensor:
    """The earlier forward: right padding with its 2-D attention mask (a 4-D
    mask inside sdpa), each row alone, completion-predicting rows only."""
    out = []
    for t in turns:
        seq = t.prompt + t.completion[:-1]
        ids = torch.tensor([seq + [0] * 5])
        mask = torch.tensor([[1] * len(seq) + [0] * 5])
        h = model.base().model(input_ids=ids, attention_mask=mask, use_cache=False).last_hidden_state[0]
        out.append(h[len(t.prompt) - 1 : len(seq)])
    return torch.cat(out)


def test_right_padding_needs_no_mask(tiny: tuple[Model, Adapters]) -> None:
    m, ads = tiny
    turns = make_turns(LENGTHS)
    with torch.no_grad(), ads.use("p"):
        h = hidden(m, [t.prompt for t in turns], [t.completion for t in turns])
        ref = masked_hidden(m, turns)
    assert h.shape == ref.shape
    assert float((h - ref).abs().max()) <= 1e-5 * max(1.0, float(ref.abs().max()))


def test_float32_head_is_the_head_in_float32(tiny: tuple[Model, Adapters]) -> None:
    m, _ = tiny
    h = torch.randn(5, m.base().lm_head.weight.shape[1])
    assert torch.equal(m.logits(h), m.base().lm_head(h))  # float32: the same product
    b, _ = open_tiny("bfloat16")
    hb = h.to(torch.bfloat16)
    w = b.base().lm_head.weight
    assert w.dtype == torch.bfloat16 and b.info()["head_dtype"] == "float32"
    assert b.logits(hb).dtype == torch.float32
    assert torch.equal(b.logits(hb), hb.float() @ w.float().T)
    lo, _ = open_tiny("bfloat16", head_dtype="model")
    assert lo.info()["head_dtype"] == "bfloat16"
    assert torch.equal(lo.logits(hb), (hb @ w.T).float())


def step_grads(m: Model, ads: Adapters, turns: list[Turn], kl: dict[str, float]) -> list[torch.Tensor]:
    o = TrainOptions.parse(Args({**OPTIONS, "kl_coef": kl}, "options"))
    g = group(turns)
    for i, w in zip(g.kept, loss_weights(o.loss_agg, [len(turns[i].completion) for i in g.kept])):
        turns[i].weight = w
    ad = ads.lookup("p")
    assert ad is not None
    return gradients(m, ads, ad, turns, g, o, lambda **kw: None)


def test_gradients_do_not_depend_on_turn_order(tiny: tuple[Model, Adapters]) -> None:
    m, ads = tiny
    m.train_budget = 60  # several micro-batches per agent
    try:
        a = step_grads(m, ads, make_turns(LENGTHS), {"evaluator": 0.05})
        rev = make_turns(LENGTHS)[::-1]
        b = step_grads(m, ads, rev, {"evaluator": 0.05})
    finally:
        m.train_budget = 1 << 14
    assert len(a) == len(b)
    for x, y in zip(a, b):
        assert torch.equal(x, y)


def test_no_kl_coefficient_skips_the_base_forward(tiny: tuple[Model, Adapters], monkeypatch: Any) -> None:
    m, ads = tiny
    o = TrainOptions.parse(Args(OPTIONS, "options"))
    ad = ads.lookup("p")
    assert ad is not None
    calls: list[str] = []
    real = ads.use

    def spy(name: str) -> Any:
        calls.append(name)
        return real(name)

    monkeypatch.setattr(ads, "use", spy)
    runs = []
    for with_ref in (True, False):
        turns = make_turns(LENGTHS)
        for t in turns:
            t.weight = 0.1
        for p in ad.tensors():
            p.grad = None
        calls.clear()
        micro_batch_backward(m, ads, "p", turns, range(len(turns)), o, with_ref)
        assert ("" in calls) == with_ref
        runs.append((turns, [p.grad.clone() for p in ad.tensors() if p.grad is not None]))
    (a, ga), (b, gb) = runs
    assert len(ga) == len(gb) == len(ad.tensors())
    for x, y in zip(ga, gb):
        assert torch.equal(x, y)  # a zero coefficient adds exactly nothing
    for t, u in zip(a, b):
        assert t.stats is not None and u.stats is not None
        assert (t.stats.loss == u.stats.loss).all() and (t.stats.ratio == u.stats.ratio).all()
        assert all(math.isnan(k) for k in u.stats.k3) and not any(math.isnan(k) for k in t.stats.k3)
    turns = make_turns(LENGTHS)
    calls.clear()
    step_grads(m, ads, turns, {"aggregator": 0.05, "evaluator": 0.0})  # no kept turn's role has one
    assert calls and "" not in calls
    calls.clear()
    step_grads(m, ads, make_turns(LENGTHS), {"evaluator": 0.05})
    assert "" in calls


def test_micro_batches_by_length() -> None:
    sizes = [4, 9, 4, 1, 9, 30]
    assert by_length(range(6), sizes) == [5, 1, 4, 0, 2, 3]
    assert by_length([3, 2, 1, 0], sizes) == [1, 0, 2, 3]
    assert micro_batches(by_length(range(6), sizes), sizes, 20) == [[5], [1, 4], [0, 2, 3]]
