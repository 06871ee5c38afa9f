"""Framing, the wire encodings and request decoding."""

from __future__ import annotations

import json
import math
import os
import struct
from collections.abc import Callable

import pytest

from marlow_torch.protocol import (
    Args,
    Channel,
    Fault,
    Malformed,
    b64_floats,
    b64_ints,
    clean,
    decode_request,
    encode_frame,
    floats_b64,
    ints_b64,
)


def test_frame_is_length_and_compact_json() -> None:
    f = encode_frame({"id": 3, "result": {"a": [1, 2.5], "s": "é"}})
    (n,) = struct.unpack("<I", f[:4])
    assert n == len(f) - 4
    assert f[4:] == b'{"id":3,"result":{"a":[1,2.5],"s":"\\u00e9"}}'


def test_non_finite_floats_travel_as_null() -> None:
    assert clean({"a": math.nan, "b": [math.inf, 1.0, (-math.inf,)], "c": 2}) == {
        "a": None,
        "b": [None, 1.0, [None]],
        "c": 2,
    }
    body = encode_frame({"x": math.nan})[4:]
    assert json.loads(body) == {"x": None}


def test_channel_round_trip() -> None:
    r1, w1 = os.pipe()
    r2, w2 = os.pipe()
    ch = Channel(r1, w2)
    peer_in = os.fdopen(r2, "rb", buffering=0)
    with os.fdopen(w1, "wb", buffering=0) as peer_out:
        for obj in ({"id": 1, "op": "hello"}, {"id": 2, "op": "x" * 50_000}):
            body = json.dumps(obj).encode()
            peer_out.write(struct.pack("<I", len(body)) + body)
        peer_out.write(b"\x05\x00")  # a torn frame at the end
    assert json.loads(ch.read() or b"") == {"id": 1, "op": "hello"}
    assert len(ch.read() or b"") > 50_000  # arrives in several reads
    assert ch.read() is None
    ch.write({"id": 7, "result": {}})
    head = peer_in.read(4)
    assert peer_in.read(struct.unpack("<I", head)[0]) == b'{"id":7,"result":{}}'


def test_progress_only_during_a_request_and_at_most_once_a_second() -> None:
    r, w = os.pipe()
    ch = Channel(os.open(os.devnull, os.O_RDONLY), w)
    ch.progress(op="x")  # between requests: nothing
    ch.begin(5)
    ch.last_progress -= 2.0
    ch.progress(op="generate", tokens=3)
    ch.progress(op="generate", tokens=4)  # within the second: dropped
    ch.w.close()
    with os.fdopen(r, "rb") as f:
        data = f.read()
    assert data[4:] == b'{"id":5,"progress":{"op":"generate","tokens":3}}'


def test_base64_arrays_round_trip() -> None:
    ids = [0, 1, -1, 151_642, 2**31 - 1]
    assert ints_b64(b64_ints(ids)) == ids
    vals = [0.0, -1.5, 3.25e-8]
    assert floats_b64(b64_floats(vals)) == [struct.unpack("<f", struct.pack("<f", v))[0] for v in vals]
    assert b64_ints([1]) == "AQAAAA=="
    assert ints_b64("") == []


@pytest.mark.parametrize("bad", ["AQAA", "AQ==", 5, None, "!!!"])
def test_bad_arrays_are_bad_requests(bad: object) -> None:
    with pytest.raises(Fault) as e:
        ints_b64(bad)
    assert e.value.kind == "bad_request"
    with pytest.raises(Fault):
        floats_b64(bad)


def test_decode_request() -> None:
    req = decode_request(b'{"id": 4, "op": "open", "args": {"checkpoint": "/x"}}')
    assert (req.id, req.op, req.args.need_str("checkpoint")) == (4, "open", "/x")
    req = decode_request(b'{"id": 5, "op": "close", "args": null}')
    assert req.args.raw == {}


@pytest.mark.parametrize(
    ("body", "rid", "says"),
    [
        (b"{not json", 0, "not JSON"),
        (b"\xff\xfe", 0, "not JSON"),
        (b"[1, 2]", 0, "want an object"),
        (b'{"op": "hello"}', 0, "want an integer"),
        (b'{"id": true, "op": "hello"}', 0, "want an integer"),
        (b'{"id": 9, "op": 3}', 9, "want a string"),
        (b'{"id": 9, "op": "open", "args": [1]}', 9, "want an object"),
    ],
)
def test_malformed_frames(body: bytes, rid: int, says: str) -> None:
    with pytest.raises(Malformed) as e:
        decode_request(body)
    assert e.value.id == rid
    assert says in str(e.value)


def test_args_name_what_is_missing_or_mistyped() -> None:
    a = Args({"n": 3, "x": "1.5", "s": 4, "b": True, "l": {}, "o": {"k": 1}}, "train_step")
    assert a.need_int("n") == 3 and a.need_float("x") == 1.5
    assert a.need_obj("o").need_int("k") == 1
    cases: list[tuple[Callable[[], object], str]] = [
        (lambda: a.need_int("missing"), "train_step: argument 'missing' is missing"),
        (lambda: a.need_str("s"), "argument 's' is int, want a string"),
        (lambda: a.need_int("b"), "argument 'b' is True, want a number"),
        (lambda: a.need_list("l"), "argument 'l' is dict, want a list"),
        (lambda: a.need_obj("n"), "argument 'n' is int, want an object"),
        (lambda: a.need_int("x"), "argument 'x': invalid literal"),
        (lambda: a.need_obj("o").need_int("z"), "train_step.o: argument 'z' is missing"),
    ]
    for call, says in cases:
        with pytest.raises(Fault) as e:
            call()
        assert e.value.kind == "bad_request"
        assert says in str(e.value)
