"""Turns as scoring and training receive them, decoded and checked, and the
pure arithmetic of a GRPO step that needs no model: grouping by role and
agent, the loss aggregation weights and the micro-batches."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from .protocol import Args, Fault, floats_b64, ints_b64

LOSS_AGGREGATIONS = ("token-mean", "seq-mean-token-mean", "seq-mean-token-sum")
"""The loss aggregations, as the native engine names them."""

F64 = npt.NDArray[np.float64]


@dataclass
class TokenStats:
    """What a train step measured on each completion token of a turn."""

    logprob: F64
    entropy: F64
    ratio: F64
    k3: F64
    """The k3 estimate of KL(policy || base) per token."""
    loss: F64
    """The token's loss term before its aggregation weight."""
    clipped: int
    """Tokens whose probability ratio was clipped."""


@dataclass
class Turn:
    """One turn: prompt and completion tokens, and (for training) the
    completion's log-probs at sampling, its role, agent and advantage."""

    prompt: list[int]
    completion: list[int]
    old: list[float] = field(default_factory=list)
    role: str = ""
    agent: str = ""
    advantage: float = 0.0
    weight: float = 0.0
    """Its tokens' aggregation weight in the loss."""
    role_index: int = 0
    agent_index: int = 0
    stats: TokenStats | None = None

    def inputs(self) -> int:
        """Its input length: the prompt and all but the last completion token."""
        return len(self.prompt) + len(self.completion) - 1


def parse_turns(raw: Sequence[Any], need_old: bool, vocab: int, max_pos: int) -> list[Turn]:
    """Decodes the turns of a logprobs or train_step call and checks their
    tokens against the vocabulary and the context length."""
    out = []
    for i, rt in enumerate(raw):
        if not isinstance(rt, dict):
            raise Fault("bad_request", "turn %d is %s, want an object" % (i, type(rt).__name__))
        t = Args(rt, "turn %d" % i)
        p, c = ints_b64(t.need("prompt_ids")), ints_b64(t.need("completion_ids"))
        if not p or not c:
            raise Fault("bad_request", "turn %d needs a prompt and a completion" % i)
        if len(p) + len(c) - 1 > max_pos:
            raise Fault(
                "bad_request",
                "turn %d has %d input tokens, more than max_position_embeddings %d" % (i, len(p) + len(c) - 1, max_pos),
            )
        for what, ids in (("prompt", p), ("completion", c)):
            for j, x in enumerate(ids):
                if x < 0 or x >= vocab:
                    raise Fault(
                        "bad_request",
                        "turn %d %s: token %d at index %d is outside the vocabulary [0, %d)" % (i, what, x, j, vocab),
                    )
        turn = Turn(p, c)
        if need_old:
            old = floats_b64(t.need("old_logprobs"))
            if len(old) != len(c):
                msg = "turn %d has %d old log-probs for %d completion tokens" % (i, len(old), len(c))
                raise Fault("bad_request", msg)
            turn.old = old
        out.append(turn)
    return out


@dataclass
class Grouping:
    """The turns a step trains on, ordered by (role, agent), with the roles
    and agents in that order; agent_role[a] is agent a's role index."""

    kept: list[int]
    roles: list[str]
    agents: list[str]
    agent_role: list[int]


def group(turns: Sequence[Turn]) -> Grouping:
    """Keeps the turns with a non-zero advantage, sorts them by (role, agent)
    and sets each one's role and agent index (an agent under two roles
    counts once per role)."""
    kept = [i for i, t in enumerate(turns) if t.advantage != 0]
    kept.sort(key=lambda i: (turns[i].role, turns[i].agent))
    g = Grouping(kept, [], [], [])
    for i in kept:
        t = turns[i]
        if not g.roles or g.roles[-1] != t.role:
            g.roles.append(t.role)
        if not g.agents or g.agents[-1] != t.agent or g.agent_role[-1] != len(g.roles) - 1:
            g.agents.append(t.agent)
            g.agent_role.append(len(g.roles) - 1)
        t.role_index, t.agent_index = len(g.roles) - 1, len(g.agents) - 1
    return g


def loss_weights(agg: str, lengths: Sequence[int]) -> list[float]:
    """The per-token loss weight of each kept turn (completion lengths given):
    token-mean 1/(all tokens), seq-mean-token-mean 1/(turns x its tokens),
    seq-mean-token-sum 1/turns."""
    if agg not in LOSS_AGGREGATIONS:
        raise Fault("bad_request", "unknown loss aggregation %r" % agg)
    nt = float(len(lengths))
    ntok = sum(lengths)
    out = []
    for n in lengths:
        if agg == "token-mean":
            out.append(1.0 / ntok)
        elif agg == "seq-mean-token-mean":
            out.append(1.0 / (nt * n))
        else:
            out.append(1.0 / nt)
    return out


def micro_batches(idx: Sequence[int], sizes: Sequence[int], budget: int) -> list[list[int]]:
    """Splits turn indices idx into runs whose padded size (the longest input
    sizes[i] times the run's length) fits budget; a turn alone may exceed it.
    Callers pass idx through by_length first so that a run holds turns of
    similar length."""
    out: list[list[int]] = []
    cur: list[int] = []
    longest = 0
    for i in idx:
        n = sizes[i]
        if cur and max(longest, n) * (len(cur) + 1) > budget:
            out.append(cur)
            cur, longest = [], 0
        cur.append(i)
        longest = max(longest, n)
    if cur:
        out.append(cur)
    return out


def by_length(idx: Sequence[int], sizes: Sequence[int]) -> list[int]:
    """Turn indices idx longest input first (ties by index): a function of
    the set of turns alone, so micro-batches, and the order in which their
    gradients add up, do not depend on the order the turns came in."""
    return sorted(idx, key=lambda i: (-sizes[i], i))


@dataclass
class Acc:
    """Sums over the turns of one role (or of all)."""

    loss: float = 0.0
    nll: float = 0.0
    ent: float = 0.0
    ratio: float = 0.0
    rmax: float = -float("inf")
    kl: float = 0.0
    clipped: int = 0
    toks: int = 0
    seqs: int = 0

    def add(self, t: Turn) -> None:
        """Adds a trained turn's token statistics."""
        s = t.stats
        if s is None:
            raise Fault("internal", "turn of role %r agent %r has no statistics" % (t.role, t.agent))
        self.seqs += 1
        self.loss += float((t.weight * s.loss).sum())
        self.nll -= float(s.logprob.sum())
        self.ent += float(s.entropy.sum())
        self.ratio += float(s.ratio.sum())
        self.rmax = max(self.rmax, float(s.ratio.max()))
        self.kl += float(s.k3.sum())
        self.clipped += s.clipped
        self.toks += len(t.completion)


def accumulate(turns: Sequence[Turn], g: Grouping) -> list[Acc]:
    """One Acc per role of g, then one over all kept turns."""
    accs = [Acc() for _ in range(len(g.roles) + 1)]
    for i in g.kept:
        t = turns[i]
        for a in (accs[t.role_index], accs[-1]):
            a.add(t)
    return accs
