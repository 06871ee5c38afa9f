"""The model-free arithmetic of a train step: decoding turns, grouping,
aggregation weights, micro-batches and the per-role sums."""

from __future__ import annotations

import math

import numpy as np
import pytest

from marlow_torch.protocol import Fault, b64_floats, b64_ints
from marlow_torch.turns import Acc, TokenStats, Turn, accumulate, group, loss_weights, micro_batches, parse_turns


def raw_turn(prompt: list[int], completion: list[int], old: list[float] | None = None) -> dict[str, str]:
    t = {"prompt_ids": b64_ints(prompt), "completion_ids": b64_ints(completion)}
    if old is not None:
        t["old_logprobs"] = b64_floats(old)
    return t


def test_parse_turns() -> None:
    turns = parse_turns([raw_turn([1, 2], [3], [-0.5]), raw_turn([4], [5, 6], [-1.0, -2.0])], True, 10, 8)
    assert [(t.prompt, t.completion, t.old) for t in turns] == [([1, 2], [3], [-0.5]), ([4], [5, 6], [-1.0, -2.0])]
    assert [t.inputs() for t in turns] == [2, 2]
    assert parse_turns([raw_turn([1], [2])], False, 10, 8)[0].old == []


@pytest.mark.parametrize(
    ("raw", "says"),
    [
        ([raw_turn([], [1], [0.0])], "turn 0 needs a prompt and a completion"),
        ([raw_turn([1], [], [])], "turn 0 needs a prompt and a completion"),
        ([raw_turn([1] * 5, [2] * 5, [0.0] * 5)], "turn 0 has 9 input tokens, more than max_position_embeddings 8"),
        ([raw_turn([1], [10], [0.0])], "turn 0 completion: token 10 at index 0 is outside the vocabulary [0, 10)"),
        ([raw_turn([1, -1], [2], [0.0])], "turn 0 prompt: token -1 at index 1"),
        ([raw_turn([1], [2, 3], [0.0])], "turn 0 has 1 old log-probs for 2 completion tokens"),
        ([raw_turn([1], [2])], "turn 0: argument 'old_logprobs' is missing"),
        (["x"], "turn 0 is str, want an object"),
    ],
)
def test_bad_turns(raw: list[object], says: str) -> None:
    with pytest.raises(Fault) as e:
        parse_turns(raw, True, 10, 8)
    assert e.value.kind == "bad_request"
    assert says in str(e.value)


def turn(role: str, agent: str, adv: float, n: int = 1) -> Turn:
    return Turn([1], [2] * n, [0.0] * n, role=role, agent=agent, advantage=adv)


def test_group_orders_by_role_then_agent() -> None:
    turns = [turn("solver", "b", 1), turn("critic", "a", -1), turn("solver", "a", 0), turn("solver", "a", 2)]
    turns.append(turn("critic", "b", 0.5))
    turns.append(turn("solver", "b", -0.5))
    g = group(turns)
    assert g.kept == [1, 4, 3, 0, 5]  # index 2 has no advantage; ties keep input order
    assert g.roles == ["critic", "solver"]
    assert g.agents == ["a", "b", "a", "b"]  # an agent under two roles counts once per role
    assert g.agent_role == [0, 0, 1, 1]
    assert [(turns[i].role_index, turns[i].agent_index) for i in g.kept] == [(0, 0), (0, 1), (1, 2), (1, 3), (1, 3)]


def test_group_of_nothing_to_train() -> None:
    g = group([turn("r", "a", 0.0)])
    assert (g.kept, g.roles, g.agents) == ([], [], [])


def test_loss_weights() -> None:
    lengths = [1, 3, 4]
    tm = loss_weights("token-mean", lengths)
    assert tm == [1 / 8] * 3
    smtm = loss_weights("seq-mean-token-mean", lengths)
    assert smtm == [1.0 / (3.0 * n) for n in lengths]
    assert sum(w * n for w, n in zip(smtm, lengths)) == pytest.approx(1.0)
    assert loss_weights("seq-mean-token-sum", lengths) == [1.0 / 3.0] * 3
    with pytest.raises(Fault, match="unknown loss aggregation 'mean'"):
        loss_weights("mean", lengths)


def test_micro_batches_fit_the_padded_budget() -> None:
    sizes = [4, 4, 4, 10, 1, 1, 30]
    assert micro_batches(range(7), sizes, 12) == [[0, 1, 2], [3], [4, 5], [6]]
    assert micro_batches([6, 0], sizes, 12) == [[6], [0]]  # a turn alone may exceed the budget
    assert micro_batches([], sizes, 12) == []
    for mb in micro_batches(range(6), sizes, 20):
        assert len(mb) == 1 or max(sizes[i] for i in mb) * len(mb) <= 20


def with_stats(t: Turn, lp: list[float], ratio: list[float], weight: float, clipped: int) -> Turn:
    n = len(lp)
    t.weight = weight
    t.stats = TokenStats(
        logprob=np.array(lp),
        entropy=np.full(n, 0.5),
        ratio=np.array(ratio),
        k3=np.full(n, 0.01),
        loss=np.full(n, 2.0),
        clipped=clipped,
    )
    return t


def test_accumulate_per_role_and_overall() -> None:
    turns = [
        with_stats(turn("a", "x", 1, 2), [-1.0, -2.0], [1.0, 1.5], 0.25, 1),
        with_stats(turn("b", "y", 1, 1), [-0.5], [0.5], 0.5, 0),
    ]
    g = group(turns)
    accs = accumulate(turns, g)
    assert len(accs) == 3
    a, b, tot = accs
    assert (a.seqs, a.toks, a.clipped, a.loss, a.nll, a.ent, a.ratio, a.rmax) == (1, 2, 1, 1.0, 3.0, 1.0, 2.5, 1.5)
    assert (b.seqs, b.toks, b.loss, b.nll, b.rmax) == (1, 1, 1.0, 0.5, 0.5)
    assert (tot.seqs, tot.toks, tot.clipped, tot.loss, tot.nll, tot.rmax) == (2, 3, 1, 2.0, 3.5, 1.5)
    assert math.isclose(tot.kl, 0.03)


def test_acc_needs_statistics() -> None:
    with pytest.raises(Fault, match="no statistics"):
        Acc().add(turn("a", "x", 1))
