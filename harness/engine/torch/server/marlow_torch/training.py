"""Scoring and training: log-probs of turns, and the GRPO train step of the
native engine (grpo.go) with per-agent gradient buffers, its statistics
(grpoStats) and AdamW (adapter.go's adamState.update)."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import torch

from .adapters import Adapter, Adapters
from .model import Model, hidden, score64
from .protocol import Args, Fault, b64_floats
from .turns import (
    LOSS_AGGREGATIONS,
    Acc,
    Grouping,
    TokenStats,
    Turn,
    accumulate,
    by_length,
    group,
    loss_weights,
    micro_batches,
    parse_turns,
)

NAN = float("nan")


def check_temperature(temp: float, where: str = "") -> None:
    """A sampling or scoring temperature must be positive and finite."""
    if not (temp > 0) or math.isinf(temp):
        raise Fault("bad_request", "%stemperature %r must be positive and finite" % (where, temp))


def _batch(turns: Sequence[Turn], mb: Sequence[int]) -> tuple[list[list[int]], list[list[int]]]:
    return [turns[i].prompt for i in mb], [turns[i].completion for i in mb]


def logprobs(model: Model, adapters: Adapters, args: Args, progress: Callable[..., None]) -> dict[str, Any]:
    """The logprobs call: log-probs (float64, sent as float32) of each turn's
    completion under adapter args["adapter"] at a temperature."""
    name = args.get("adapter", "")
    adapters.lookup(name)
    temp = args.need_float("temperature")
    check_temperature(temp)
    turns = parse_turns(args.need_list("turns"), False, model.vocab, model.max_pos)
    sizes = [t.inputs() for t in turns]
    res: list[str | None] = [None] * len(turns)
    with torch.no_grad(), adapters.use(name), model.tf32_lora():
        for mb in micro_batches(by_length(range(len(turns)), sizes), sizes, model.train_budget):
            h = hidden(model, *_batch(turns, mb))
            tg = torch.tensor([x for i in mb for x in turns[i].completion], device=model.device)
            lp = score64(model, h, tg, temp).cpu().tolist()
            k = 0
            for i in mb:
                n = len(turns[i].completion)
                res[i] = b64_floats(lp[k : k + n])
                k += n
            progress(op="logprobs")
    return {"logprobs": res}


@dataclass(frozen=True)
class Coherence:
    """The per-role gradient EMA and the coherence regularizer
    (engine.Coherence): the EMA m of each role's past gradients,
    m <- ema_decay m + (1 - ema_decay) g, and each role's cosine to it;
    with lam > 0 each role's gradient g is scaled by 1 - lam max(0, cos(g, m)),
    with lam 0 (the measuring-only EMA every run keeps) it is left as it is.
    In the "step" form (engine.CoherenceStep) the role gradients are summed
    unscaled and the optimizer's step is multiplied by coherence_step_factor
    instead; form "" is the paper's form on the gradient."""

    lam: float
    ema_decay: float
    form: str = ""

    @staticmethod
    def parse(o: Args) -> Coherence:
        """The coherence object of a train_step's options."""
        form = o.get("form") or ""
        if form not in ("", COHERENCE_STEP):
            raise Fault(
                "bad_request",
                "%s: coherence form %r is unknown (want absent, the paper's form on the gradient, or %r)"
                % (o.where, form, COHERENCE_STEP),
            )
        c = Coherence(lam=o.need_float("lambda"), ema_decay=o.need_float("ema_decay"), form=form)
        if not (0 <= c.lam <= 1):
            raise Fault(
                "bad_request", "%s: coherence lambda %r is out of range (want 0 <= lambda <= 1)" % (o.where, c.lam)
            )
        if not (0 <= c.ema_decay < 1):
            raise Fault(
                "bad_request",
                "%s: coherence ema_decay %r is out of range (want 0 <= ema_decay < 1)" % (o.where, c.ema_decay),
            )
        return c


COHERENCE_STEP = "step"
"""engine.CoherenceStep: the coherence regularizer's factors act on the optimizer's step."""


def coherence_scale(lam: float, cos: float) -> float:
    """engine.CoherenceScale: 1 - lam max(0, cos); 1 for an undefined cosine."""
    if math.isnan(cos) or cos <= 0:
        return 1.0
    return 1.0 - lam * cos


def coherence_scales(
    ema: dict[str, torch.Tensor],
    roles: Sequence[str],
    role_grads: Sequence[torch.Tensor],
    lam: float,
    total: torch.Tensor,
) -> tuple[list[float], list[float], torch.Tensor]:
    """native coherenceScales: each role's cosine to its EMA (NaN without
    one), its scale, and the total: with lam > 0 the sum of the scaled role
    gradients in role order (fp32, as native's axpy), with lam 0 the
    unscaled total passed in, as it is."""
    cos: list[float] = []
    scale: list[float] = []
    for r, role in enumerate(roles):
        m = ema.get(role)
        c = _cos(role_grads[r], m) if m is not None else NAN
        cos.append(c)
        scale.append(coherence_scale(lam, c))
    if lam == 0:
        return cos, scale, total
    total = torch.zeros_like(role_grads[0])
    for r in range(len(roles)):
        total += float(np.float32(scale[r])) * role_grads[r]
    return cos, scale, total


def coherence_step_factor(roles: Sequence[RoleStats]) -> float:
    """engine.CoherenceStepFactor: the roles' factors weighted by their shares
    of the squared gradient norm, summed in role order; 1 when no share is
    defined (a zero gradient)."""
    f, w = 0.0, 0.0
    for rs in roles:
        if math.isnan(rs.grad_share) or math.isnan(rs.coherence_scale):
            continue
        f += rs.grad_share * rs.coherence_scale
        w += rs.grad_share
    return f if w > 0 else 1.0


def update_ema(
    ema: dict[str, torch.Tensor], roles: Sequence[str], role_grads: Sequence[torch.Tensor], decay: float
) -> None:
    """native updateEMA: fold each trained role's unscaled gradient into its
    EMA (fp32), starting from the first gradient."""
    d, w = float(np.float32(decay)), float(np.float32(1 - decay))
    for r, role in enumerate(roles):
        g = role_grads[r]
        m = ema.get(role)
        ema[role] = g.clone() if m is None else d * m + w * g


@dataclass(frozen=True)
class TrainOptions:
    """The GRPO and AdamW settings of one train step."""

    loss_agg: str
    temperature: float
    clip_low: float
    clip_high: float
    kl_coef: dict[str, float]
    """The KL coefficient per role (0 when absent)."""
    grad_clip: float
    lr: float
    beta1: float
    beta2: float
    eps: float
    weight_decay: float
    coherence: Coherence | None = None
    """The gradient EMA's and coherence regularizer's settings; None: no EMA."""

    @staticmethod
    def parse(o: Args) -> TrainOptions:
        """The options object of a train_step call."""
        agg = o.need("loss_agg")
        if agg not in LOSS_AGGREGATIONS:
            raise Fault("bad_request", "unknown loss aggregation %r" % agg)
        coherence = None if o.get("coherence") is None else Coherence.parse(o.need_obj("coherence"))
        klc = o.get("kl_coef") or {}
        if not isinstance(klc, dict):
            raise Fault("bad_request", "%s: kl_coef is %s, want an object by role" % (o.where, type(klc).__name__))
        return TrainOptions(
            loss_agg=agg,
            temperature=o.need_float("temperature"),
            clip_low=o.need_float("clip_low"),
            clip_high=o.need_float("clip_high"),
            kl_coef={str(k): float(v) for k, v in klc.items()},
            grad_clip=float(o.get("grad_clip") or 0),
            lr=o.need_float("lr"),
            beta1=o.need_float("beta1"),
            beta2=o.need_float("beta2"),
            eps=o.need_float("eps"),
            weight_decay=o.need_float("weight_decay"),
            coherence=coherence,
        )


@dataclass
class RoleStats:
    """The statistics of one role's turns (role "*": all turns) in a step."""

    role: str
    loss: float
    tokens: int
    seqs: int
    mean_len: float
    entropy: float
    perplexity: float
    ratio_mean: float
    ratio_max: float
    clip_frac: float
    kl: float
    grad_norm: float = 0.0
    grad_share: float = 0.0
    agent_cos_mean: float = NAN
    agent_cos_min: float = NAN
    role_cos: dict[str, float] = field(default_factory=dict)
    """Cosine of this role's gradient with each other role's."""
    agent_cos: dict[str, float] = field(default_factory=dict)
    """For each agent of a role with two or more agents: the mean cosine of
    its gradient with each other same-role agent's (native agentCos); empty
    with one agent."""
    coherence_cos: float = NAN
    """Cosine of the role's gradient with its EMA (NaN without a coherence
    option, or at the role's first step)."""
    coherence_scale: float = NAN
    """The factor the role's gradient was scaled by (1 with lambda 0; NaN
    without a coherence option)."""

    @staticmethod
    def of(name: str, a: Acc) -> RoleStats:
        """The per-token means of a role's sums."""
        n = float(a.toks)
        return RoleStats(
            role=name,
            loss=a.loss,
            tokens=a.toks,
            seqs=a.seqs,
            mean_len=n / a.seqs,
            entropy=a.ent / n,
            perplexity=math.exp(a.nll / n),
            ratio_mean=a.ratio / n,
            ratio_max=a.rmax,
            clip_frac=a.clipped / n,
            kl=a.kl / n,
        )


def _dot(a: torch.Tensor, b: torch.Tensor) -> float:
    return float(torch.dot(a.double(), b.double()))


def _cos(a: torch.Tensor, b: torch.Tensor) -> float:
    na, nb = _dot(a, a), _dot(b, b)
    if na == 0 or nb == 0:
        return NAN
    return _dot(a, b) / math.sqrt(na * nb)


def _mean(xs: Sequence[float]) -> float:
    return sum(xs) / len(xs) if xs else NAN


def _agent_mean(agent_grads: Sequence[torch.Tensor], members: Sequence[int], i: int) -> float:
    """The mean cosine of member i's gradient with each other member's,
    summed in member order (native agentCos)."""
    s = 0.0
    for j, b in enumerate(members):
        if j != i:
            s += _cos(agent_grads[members[i]], agent_grads[b])
    return s / (len(members) - 1)


def step_stats(
    turns: Sequence[Turn],
    g: Grouping,
    agent_grads: Sequence[torch.Tensor],
    role_grads: Sequence[torch.Tensor],
    total: torch.Tensor,
) -> tuple[RoleStats, list[RoleStats]]:
    """native grpoStats: the statistics of all turns and of each role, with
    gradient norms, shares and cosines between agents and between roles."""
    accs = accumulate(turns, g)
    norms = [_dot(x, x) for x in role_grads]
    sumsq = sum(norms)
    out: list[RoleStats] = []
    all_pairs: list[float] = []
    for r, name in enumerate(g.roles):
        rs = RoleStats.of(name, accs[r])
        rs.grad_norm = math.sqrt(norms[r])
        rs.grad_share = norms[r] / sumsq if sumsq > 0 else NAN
        members = [a for a in range(len(g.agents)) if g.agent_role[a] == r]
        pairs = [
            _cos(agent_grads[members[i]], agent_grads[members[j]])
            for i in range(len(members))
            for j in range(i + 1, len(members))
        ]
        rs.agent_cos_mean = _mean(pairs)
        rs.agent_cos_min = min(pairs) if pairs else NAN
        if len(members) >= 2:
            rs.agent_cos = {g.agents[a]: _agent_mean(agent_grads, members, i) for i, a in enumerate(members)}
        all_pairs += pairs
        rs.role_cos = {o: _cos(role_grads[r], role_grads[k]) for k, o in enumerate(g.roles) if k != r}
        out.append(rs)
    tot = RoleStats.of("*", accs[-1])
    tot.grad_norm = math.sqrt(_dot(total, total))
    tot.grad_share = 1.0
    tot.agent_cos_mean = _mean(all_pairs)
    tot.agent_cos_min = min(all_pairs) if all_pairs else NAN
    tot.role_cos = {}
    return tot, out


def adamw(ad: Adapter, g: torch.Tensor, o: TrainOptions, step_factor: float = 1.0) -> None:
    """native adamState.update: float64 arithmetic, moments stored in float32;
    the step (weight decay included) taken at lr times step_factor."""
    b1, b2, lr, eps, wd = o.beta1, o.beta2, o.lr, o.eps, o.weight_decay
    if step_factor != 1.0:
        lr *= step_factor
    m0, v0 = ad.moments()
    ad.step += 1
    bc1 = 1 - math.pow(b1, ad.step)
    bc2 = 1 - math.pow(b2, ad.step)
    gd = g.double()
    m = b1 * m0.double() + (1 - b1) * gd
    v = b2 * v0.double() + (1 - b2) * gd * gd
    ad.m, ad.v = m.float(), v.float()
    x = torch.cat([p.detach().reshape(-1) for p in ad.tensors()]).double()
    x = x - lr * wd * x
    x = x - lr * (m / bc1) / (torch.sqrt(v / bc2) + eps)
    ad.set_flat(x.float())


def train_step(model: Model, adapters: Adapters, args: Args, progress: Callable[..., None]) -> dict[str, Any]:
    """The train_step call: one GRPO step of adapter args["adapter"] on the
    turns with a non-zero advantage."""
    name = args.need_str("adapter")
    ad = adapters.lookup(name)
    if ad is None:
        raise Fault("bad_request", "train step needs an adapter (the base policy is frozen)")
    o = TrainOptions.parse(args.need_obj("options"))
    raw = args.need_list("turns")
    turns = parse_turns(raw, True, model.vocab, model.max_pos)
    for i, rt in enumerate(raw):
        t = Args(rt, "train_step: turn %d" % i)
        if t.need("adapter") != name:
            raise Fault("bad_request", "turn %d names adapter %r, not %r" % (i, t.need("adapter"), name))
        turns[i].role, turns[i].agent = t.need_str("role"), t.need_str("agent")
        turns[i].advantage = t.need_float("advantage")
    g = group(turns)
    skipped = len(turns) - len(g.kept)
    if not g.kept:
        return {"skipped": skipped, "total": None, "roles": [], "grad_norm_pre": 0.0}
    for i, w in zip(g.kept, loss_weights(o.loss_agg, [len(turns[i].completion) for i in g.kept])):
        turns[i].weight = w
    agent_grads = gradients(model, adapters, ad, turns, g, o, progress)
    role_grads = [torch.zeros_like(agent_grads[0]) for _ in g.roles]
    for a, ag in enumerate(agent_grads):
        role_grads[g.agent_role[a]] += ag
    total = torch.zeros_like(agent_grads[0])
    for rg in role_grads:
        total += rg
    cos: list[float] = []
    scale: list[float] = []
    on_step = o.coherence is not None and o.coherence.form == COHERENCE_STEP
    if o.coherence is not None:
        lam = o.coherence.lam
        if on_step:
            # The role gradients are summed unscaled: the factors act on the step.
            cos, scale, total = coherence_scales(ad.ema, g.roles, role_grads, 0.0, total)
            scale = [coherence_scale(lam, c) for c in cos]
        else:
            cos, scale, total = coherence_scales(ad.ema, g.roles, role_grads, lam, total)
    tot, roles = step_stats(turns, g, agent_grads, role_grads, total)
    for r, rs in enumerate(roles[: len(cos)]):
        rs.coherence_cos, rs.coherence_scale = cos[r], scale[r]
    factor = 1.0
    if on_step:
        factor = coherence_step_factor(roles)
        tot.coherence_scale = factor
    pre = tot.grad_norm
    with torch.no_grad():
        grad = total
        if o.grad_clip > 0 and pre > o.grad_clip:
            grad = total * float(np.float32(o.grad_clip / pre))
        adamw(ad, grad, o, factor)
        if o.coherence is not None:
            update_ema(ad.ema, g.roles, role_grads, o.coherence.ema_decay)
    return {"total": asdict(tot), "roles": [asdict(r) for r in roles], "skipped": skipped, "grad_norm_pre": pre}


def gradients(
    model: Model,
    adapters: Adapters,
    ad: Adapter,
    turns: Sequence[Turn],
    g: Grouping,
    o: TrainOptions,
    progress: Callable[..., None],
) -> list[torch.Tensor]:
    """The loss gradient of each agent's turns (flat fp32, native order),
    agent by agent in separate buffers, each summed over its micro-batches
    (longest turns first, by_length); sets every kept turn's TokenStats.
    The base policy's forward (for the KL term) runs only when some kept
    turn's role has a KL coefficient; otherwise k3 and KL are NaN (not
    measured)."""
    if model.grad_ckpt:
        model.hf.train()
    params = ad.tensors()
    sizes = [t.inputs() for t in turns]
    with_ref = any(o.kl_coef.get(turns[i].role, 0.0) != 0 for i in g.kept)
    agent_grads = []
    for a in range(len(g.agents)):
        idx = by_length([i for i in g.kept if turns[i].agent_index == a], sizes)
        for p in params:
            p.grad = None
        for mb in micro_batches(idx, sizes, model.train_budget):
            with model.tf32_lora():
                micro_batch_backward(model, adapters, ad.name, turns, mb, o, with_ref)
            progress(op="train_step", agent=g.agents[a])
        flat = torch.cat([(p.grad if p.grad is not None else torch.zeros_like(p)).reshape(-1).float() for p in params])
        agent_grads.append(flat)
        for p in params:
            p.grad = None
    model.hf.eval()
    return agent_grads


def micro_batch_backward(
    model: Model,
    adapters: Adapters,
    name: str,
    turns: Sequence[Turn],
    mb: Sequence[int],
    o: TrainOptions,
    with_ref: bool = True,
) -> None:
    """Adds the gradient of micro-batch mb's weighted loss (clipped policy
    gradient plus k3 KL to the base) to the adapter's .grad and sets the
    turns' TokenStats. Without with_ref (no role has a KL coefficient) the
    base policy's forward is skipped, the loss has no KL term and k3 is
    NaN."""
    dev = model.device
    temp = o.temperature
    hr = model.head_rows()
    tg = torch.tensor([x for i in mb for x in turns[i].completion], device=dev)
    lpb: torch.Tensor | None = None
    if with_ref:
        with torch.no_grad(), adapters.use(""):
            lpb = score64(model, hidden(model, *_batch(turns, mb)), tg, temp)
    with adapters.use(name):
        h = hidden(model, *_batch(turns, mb))
        lp_parts, ent_parts = [], []

        def head_chunk(hc: torch.Tensor, tc: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            logp = torch.log_softmax(model.logits(hc) / temp, dim=-1)
            with torch.no_grad():
                ent = -(logp.exp() * logp).sum(-1).double()
            return logp.gather(1, tc.unsqueeze(1)).squeeze(1), ent

        for s in range(0, h.shape[0], hr):
            if model.grad_ckpt:
                # Keep only the hidden rows; the chunk's logits are
                # recomputed in the backward pass.
                from torch.utils.checkpoint import checkpoint

                lpc, entc = checkpoint(head_chunk, h[s : s + hr], tg[s : s + hr], use_reentrant=False)
            else:
                lpc, entc = head_chunk(h[s : s + hr], tg[s : s + hr])
            lp_parts.append(lpc)
            ent_parts.append(entc)
        lp = torch.cat(lp_parts)
        ent = torch.cat(ent_parts)

        def per_token(f: Callable[[Turn], float]) -> torch.Tensor:
            return torch.tensor([f(turns[i]) for i in mb for _ in turns[i].completion], dtype=torch.float64, device=dev)

        old = torch.tensor([x for i in mb for x in turns[i].old], dtype=torch.float64, device=dev)
        adv = per_token(lambda t: t.advantage)
        w = per_token(lambda t: t.weight)
        coef = per_token(lambda t: float(o.kl_coef.get(t.role, 0.0)))
        lp64 = lp.double()
        r = torch.exp(lp64 - old)
        cr = r.detach().clamp(1 - o.clip_low, 1 + o.clip_high)
        unclipped = (r.detach() * adv) <= (cr * adv)
        # -min(r A, clip(r) A): the gradient flows through r only where r A is the min.
        pg = torch.where(unclipped, -adv * r, -adv * cr)
        if lpb is not None:
            x = lpb - lp64
            k3 = torch.exp(x) - x - 1
            tok_loss = pg + coef * k3
        else:
            k3 = torch.full_like(lp64, NAN)
            tok_loss = pg
        loss = (w * tok_loss).sum()
        loss.backward()  # type: ignore[no-untyped-call]  # torch leaves Tensor.backward untyped
        k = 0
        lpd, k3d, rd, ld = lp64.detach(), k3.detach(), r.detach(), tok_loss.detach()
        clipped = (-cr * adv) > (-rd * adv)
        for i in mb:
            n = len(turns[i].completion)
            turns[i].stats = TokenStats(
                logprob=lpd[k : k + n].cpu().numpy(),
                entropy=ent[k : k + n].cpu().numpy(),
                ratio=rd[k : k + n].cpu().numpy(),
                k3=k3d[k : k + n].cpu().numpy(),
                loss=ld[k : k + n].cpu().numpy(),
                clipped=int(clipped[k : k + n].sum().item()),
            )
            k += n
