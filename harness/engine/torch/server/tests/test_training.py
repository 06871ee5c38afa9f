"""Train-step arithmetic that needs torch but no model: options, the
statistics of grpoStats and AdamW."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
import torch

from marlow_torch.adapters import Adapter, Param
from marlow_torch.protocol import Args, Fault
from marlow_torch.training import (
    COHERENCE_STEP,
    NAN,
    Coherence,
    RoleStats,
    TrainOptions,
    adamw,
    coherence_scale,
    coherence_scales,
    coherence_step_factor,
    step_stats,
    update_ema,
)
from marlow_torch.turns import Acc, TokenStats, Turn, group

OPTIONS: dict[str, Any] = {
    "loss_agg": "token-mean",
    "temperature": 1.0,
    "clip_low": 0.2,
    "clip_high": 0.28,
    "kl_coef": {"solver": 0.05},
    "grad_clip": 1.0,
    "lr": 1e-3,
    "beta1": 0.9,
    "beta2": 0.999,
    "eps": 1e-8,
    "weight_decay": 0.01,
}


def test_options() -> None:
    o = TrainOptions.parse(Args(OPTIONS, "train_step.options"))
    assert o.kl_coef == {"solver": 0.05} and o.grad_clip == 1.0 and o.lr == 1e-3
    assert TrainOptions.parse(Args({**OPTIONS, "kl_coef": None, "grad_clip": None}, "o")).grad_clip == 0.0
    with pytest.raises(Fault, match="unknown loss aggregation 'sum'"):
        TrainOptions.parse(Args({**OPTIONS, "loss_agg": "sum"}, "o"))
    with pytest.raises(Fault, match="argument 'lr' is missing"):
        TrainOptions.parse(Args({k: v for k, v in OPTIONS.items() if k != "lr"}, "o"))


def test_role_stats_are_per_token_means() -> None:
    a = Acc(loss=0.5, nll=6.0, ent=3.0, ratio=4.0, rmax=1.2, kl=0.4, clipped=1, toks=4, seqs=2)
    s = RoleStats.of("solver", a)
    assert (s.tokens, s.seqs, s.mean_len, s.entropy, s.ratio_mean, s.ratio_max, s.clip_frac, s.kl) == (
        4,
        2,
        2.0,
        0.75,
        1.0,
        1.2,
        0.25,
        0.1,
    )
    assert s.perplexity == math.exp(1.5)
    assert math.isnan(s.agent_cos_mean) and s.role_cos == {}


def trained(role: str, agent: str) -> Turn:
    t = Turn([1], [2], [0.0], role=role, agent=agent, advantage=1.0, weight=1.0)
    one = np.ones(1)
    t.stats = TokenStats(logprob=-one, entropy=one, ratio=one, k3=0 * one, loss=one, clipped=0)
    return t


def test_step_stats_norms_shares_and_cosines() -> None:
    turns = [trained("critic", "c"), trained("solver", "a"), trained("solver", "b")]
    g = group(turns)
    agent_grads = [torch.tensor([0.0, 2.0]), torch.tensor([3.0, 0.0]), torch.tensor([3.0, 4.0])]
    role_grads = [agent_grads[0], agent_grads[1] + agent_grads[2]]
    total = role_grads[0] + role_grads[1]
    tot, roles = step_stats(turns, g, agent_grads, role_grads, total)
    critic, solver = roles
    assert (critic.role, solver.role, tot.role) == ("critic", "solver", "*")
    assert critic.grad_norm == 2.0 and solver.grad_norm == math.sqrt(52.0)
    assert critic.grad_share == 4.0 / 56.0 and solver.grad_share == 52.0 / 56.0
    assert math.isnan(critic.agent_cos_mean) and math.isnan(critic.agent_cos_min)  # one agent: no pairs
    assert solver.agent_cos_mean == solver.agent_cos_min == 3.0 / 5.0
    assert critic.role_cos == {"solver": 8.0 / (2.0 * math.sqrt(52.0))}
    assert tot.grad_norm == math.sqrt(36.0 + 36.0) and tot.grad_share == 1.0 and tot.role_cos == {}
    assert tot.agent_cos_mean == 3.0 / 5.0 and tot.tokens == 3 and tot.seqs == 3
    assert critic.agent_cos == {} and tot.agent_cos == {}  # one agent; the total
    assert solver.agent_cos == {"a": 3.0 / 5.0, "b": 3.0 / 5.0}


def test_agent_cos_is_each_agents_mean_with_the_others() -> None:
    turns = [trained("g", "g0"), trained("g", "g1"), trained("g", "g2")]
    grads = [torch.tensor([1.0, 0.0]), torch.tensor([0.0, 1.0]), torch.tensor([1.0, 1.0])]
    _, (r,) = step_stats(turns, group(turns), grads, [grads[0] + grads[1] + grads[2]], grads[0] + grads[1] + grads[2])
    h = 1.0 / math.sqrt(2.0)
    assert r.agent_cos == pytest.approx({"g0": h / 2, "g1": h / 2, "g2": h})
    assert sum(r.agent_cos.values()) / 3 == pytest.approx(r.agent_cos_mean)


def test_zero_gradient_has_no_cosine_or_share() -> None:
    turns = [trained("r", "a"), trained("r", "b")]
    z = torch.zeros(3)
    _, (r,) = step_stats(turns, group(turns), [z, z], [z], z)
    assert math.isnan(r.agent_cos_mean) and math.isnan(r.grad_share) and r.grad_norm == 0.0


def test_adamw_is_the_native_update() -> None:
    w = torch.nn.Parameter(torch.tensor([[0.5, -1.0], [2.0, 0.0]]))
    ad = Adapter("x", 1, 1.0, ["q_proj"], 0, [Param("w", 0, "q_proj", False, w)])
    ad.m, ad.v = torch.zeros(4), torch.zeros(4)
    o = TrainOptions.parse(Args(OPTIONS, "o"))
    x = [0.5, -1.0, 2.0, 0.0]
    m, v = [0.0] * 4, [0.0] * 4
    for step, g in enumerate([[0.1, -0.2, 0.0, 1.0], [0.3, 0.3, -0.5, 0.0]], start=1):
        adamw(ad, torch.tensor(g), o)
        for i in range(4):
            m[i] = float(np.float32(0.9 * m[i] + 0.1 * g[i]))
            v[i] = float(np.float32(0.999 * v[i] + 0.001 * g[i] * g[i]))
        assert ad.step == step
        assert ad.m.tolist() == pytest.approx(m, rel=1e-6) and ad.v.tolist() == pytest.approx(v, rel=1e-6)
        for i in range(4):
            mh, vh = m[i] / (1 - 0.9**step), v[i] / (1 - 0.999**step)
            x[i] = x[i] - 1e-3 * 0.01 * x[i]
            x[i] = x[i] - 1e-3 * mh / (math.sqrt(vh) + 1e-8)
        assert w.detach().reshape(-1).tolist() == pytest.approx(x, rel=1e-6)


def test_coherence_options() -> None:
    o = TrainOptions.parse(Args({**OPTIONS, "coherence": {"lambda": 0.5, "ema_decay": 0.9}}, "o"))
    assert o.coherence == Coherence(lam=0.5, ema_decay=0.9)
    assert TrainOptions.parse(Args(OPTIONS, "o")).coherence is None
    monitor = TrainOptions.parse(Args({**OPTIONS, "coherence": {"lambda": 0.0, "ema_decay": 0.9}}, "o"))
    assert monitor.coherence == Coherence(lam=0.0, ema_decay=0.9)
    with pytest.raises(Fault, match=r"coherence lambda -0\.1 is out of range"):
        TrainOptions.parse(Args({**OPTIONS, "coherence": {"lambda": -0.1, "ema_decay": 0.9}}, "o"))
    with pytest.raises(Fault, match=r"coherence lambda 1\.5 is out of range"):
        TrainOptions.parse(Args({**OPTIONS, "coherence": {"lambda": 1.5, "ema_decay": 0.9}}, "o"))
    with pytest.raises(Fault, match=r"coherence ema_decay 1\.0 is out of range"):
        TrainOptions.parse(Args({**OPTIONS, "coherence": {"lambda": 0.5, "ema_decay": 1.0}}, "o"))
    with pytest.raises(Fault, match="argument 'lambda' is missing"):
        TrainOptions.parse(Args({**OPTIONS, "coherence": {"ema_decay": 0.9}}, "o"))
    step = TrainOptions.parse(Args({**OPTIONS, "coherence": {"lambda": 0.5, "ema_decay": 0.9, "form": "step"}}, "o"))
    assert step.coherence == Coherence(lam=0.5, ema_decay=0.9, form=COHERENCE_STEP)
    with pytest.raises(Fault, match="coherence form 'grad' is unknown"):
        TrainOptions.parse(Args({**OPTIONS, "coherence": {"lambda": 0.5, "ema_decay": 0.9, "form": "grad"}}, "o"))


def test_coherence_step_factor() -> None:
    """engine.CoherenceStepFactor: the roles' factors weighted by their
    gradient shares; 1 without a defined share."""
    acc = Acc(loss=0.5, nll=6.0, ent=3.0, ratio=4.0, rmax=1.2, kl=0.4, clipped=1, toks=4, seqs=2)
    a, b = RoleStats.of("a", acc), RoleStats.of("b", acc)
    a.grad_share, a.coherence_scale = 0.25, 0.5
    b.grad_share, b.coherence_scale = 0.75, 1.0
    assert coherence_step_factor([a, b]) == 0.25 * 0.5 + 0.75 * 1.0
    assert coherence_step_factor([a]) == 0.125  # shares as given: one role's share is 1 in a step
    a.grad_share = b.grad_share = NAN
    assert coherence_step_factor([a, b]) == 1.0


def test_adamw_step_factor_scales_the_update() -> None:
    """The step form multiplies AdamW's step (weight decay included) by the
    factor and leaves the moments as the plain step's."""
    w0 = torch.tensor([[0.5, -1.0], [2.0, 0.0]])
    o = TrainOptions.parse(Args(OPTIONS, "o"))
    g = torch.tensor([0.1, -0.2, 0.0, 1.0])
    after: list[list[float]] = []
    moments: list[tuple[list[float], list[float]]] = []
    for factor in (1.0, 0.375):
        w = torch.nn.Parameter(w0.clone())
        ad = Adapter("x", 1, 1.0, ["q_proj"], 0, [Param("w", 0, "q_proj", False, w)])
        ad.m, ad.v = torch.full((4,), 0.01), torch.full((4,), 1e-4)
        ad.step = 3
        adamw(ad, g, o, factor)
        after.append(w.detach().reshape(-1).double().tolist())
        moments.append((ad.m.tolist(), ad.v.tolist()))
    x0 = w0.reshape(-1).double().tolist()
    for i in range(4):
        assert after[1][i] - x0[i] == pytest.approx(
            0.375 * (after[0][i] - x0[i]), abs=4e-7
        )  # float32 weights near 2: ulp 2.4e-7
    assert moments[0] == moments[1]


@pytest.mark.parametrize(
    "grad,ema,cos,scale",
    [
        ([1.0, 2.0, 0.0], [2.0, 4.0, 0.0], 1.0, 0.6),  # aligned: 1 - lambda
        ([1.0, 0.0, 0.0], [0.0, 3.0, 0.0], 0.0, 1.0),  # orthogonal: not scaled
        ([1.0, 1.0, 0.0], [-1.0, -1.0, 0.0], -1.0, 1.0),  # opposed: not scaled
        ([1.0, 0.0, 0.0], [1.0, math.sqrt(3), 0.0], 0.5, 0.8),  # 1 - lambda cos
        ([0.0, 1.0, 1.0], None, NAN, 1.0),  # no EMA yet
    ],
)
def test_coherence_scales(grad: list[float], ema: list[float] | None, cos: float, scale: float) -> None:
    lam = 0.4
    g = torch.tensor(grad)
    other = torch.tensor([0.0, 0.0, 5.0])  # a second role without an EMA: scale 1
    emas = {} if ema is None else {"a": torch.tensor(ema)}
    unscaled = g + other
    c, s, total = coherence_scales(emas, ["a", "b"], [g, other], lam, unscaled)
    assert (math.isnan(c[0]) and math.isnan(cos)) or c[0] == pytest.approx(cos, abs=1e-6)
    assert s[0] == pytest.approx(scale, abs=1e-6) and s[1] == 1.0 and math.isnan(c[1])
    assert torch.allclose(total, float(np.float32(s[0])) * g + other)
    assert coherence_scale(lam, cos) == pytest.approx(scale, abs=1e-6)
    # lambda 0 measures only: the same cosines, every scale 1, and the
    # total passed in returned as it is (the very tensor, so bit for bit).
    c0, s0, total0 = coherence_scales(emas, ["a", "b"], [g, other], 0.0, unscaled)
    assert c0 == pytest.approx(c, nan_ok=True) and s0 == [1.0, 1.0]
    assert total0 is unscaled


def test_update_ema() -> None:
    ema: dict[str, torch.Tensor] = {}
    update_ema(ema, ["a"], [torch.tensor([2.0, 0.0])], 0.75)
    assert ema["a"].tolist() == [2.0, 0.0]
    update_ema(ema, ["b"], [torch.tensor([0.0, 4.0])], 0.75)
    update_ema(ema, ["a", "b"], [torch.tensor([6.0, 4.0]), torch.tensor([4.0, 0.0])], 0.75)
    assert ema["a"].tolist() == [3.0, 1.0] and ema["b"].tolist() == [1.0, 3.0]
