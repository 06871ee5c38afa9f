"""Requests of a generate call and their waves (no model needed)."""

from __future__ import annotations

from typing import Any

import pytest

from marlow_torch.generation import FINISH_LENGTH, FINISH_STOP, GenRequest, completion, parse_request, plan_waves
from marlow_torch.protocol import Args, Fault, b64_ints, ints_b64


def encode(messages: list[dict[str, Any]]) -> list[int]:
    return [len(m["content"]) for m in messages]


def req(**kw: Any) -> Args:
    r = {"messages": [{"role": "user", "content": "abc"}], "temperature": 0.7, "max_new_tokens": 4, "seed": 3}
    r.update(kw)
    return Args(r, "generate: request 0")


def test_parse_request() -> None:
    s = parse_request(2, req(adapter="x", ignore_end_of_turn=True), encode, 16)
    assert (s.index, s.adapter, s.prompt, s.max_new, s.temperature, s.seed) == (2, "x", [3], 4, 0.7, 3)
    assert s.ignore_end_of_turn and s.finish == ""
    assert parse_request(0, req(max_new_tokens=0), encode, 16).finish == FINISH_LENGTH


@pytest.mark.parametrize(
    ("kw", "says"),
    [
        ({"temperature": 0}, "request 0: temperature 0.0 must be positive and finite"),
        ({"temperature": float("inf")}, "temperature inf must be positive"),
        ({"max_new_tokens": -1}, "request 0: max new tokens -1 is negative"),
        ({"messages": []}, "request 0: empty prompt"),
        ({"max_new_tokens": 16}, "prompt of 1 tokens + 16 new tokens exceeds max_position_embeddings 16"),
        ({"seed": "x"}, "argument 'seed'"),
    ],
)
def test_bad_requests(kw: dict[str, Any], says: str) -> None:
    with pytest.raises(Fault) as e:
        parse_request(0, req(**kw), encode, 16)
    assert e.value.kind == "bad_request"
    assert says in str(e.value)


def seq(adapter: str, prompt: int, new: int) -> GenRequest:
    return GenRequest(0, adapter, [1] * prompt, new, 1.0, False, 0)


def test_waves_group_adapters_in_name_order_within_the_budget() -> None:
    seqs = [seq("b", 2, 2), seq("", 3, 3), seq("a", 4, 4), seq("b", 5, 5), seq("", 1, 1), seq("b", 1, 1)]
    assert plan_waves(seqs, 100) == [[1, 4], [2], [0, 3, 5]]
    assert plan_waves(seqs, 12) == [[1, 4], [2], [0], [3, 5]]  # costs 4 + 10 > 12, then 10 + 2
    assert plan_waves([seq("", 50, 50), seq("", 1, 1)], 10) == [[0], [1]]  # one request alone may exceed it
    assert plan_waves([], 10) == []


def test_completion_drops_the_stop_token_from_the_text() -> None:
    s = seq("", 2, 3)
    s.ids, s.logprobs, s.finish = [5, 6, 9], [-0.5, -0.25, -1.0], FINISH_STOP
    c = completion(s, lambda ids: ",".join(map(str, ids)))
    assert c["text"] == "5,6" and ints_b64(c["ids"]) == [5, 6, 9] and c["finish"] == "stop"
    assert c["prompt_ids"] == b64_ints([1, 1])
    s.finish = FINISH_LENGTH
    assert completion(s, lambda ids: ",".join(map(str, ids)))["text"] == "5,6,9"
