"""The Python port of the keyed stream against the golden table the Go side
writes (keyed/testdata/golden.json at the repository root)."""

from __future__ import annotations

import json
import struct
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from marlow_torch import keyed
from marlow_torch.sampling import sample_key

SECTIONS = ("mix64", "hash_key", "uniform01", "uniform_at", "sample_uniform")
EDGES = {0, 1, (1 << 64) - 1, keyed.PURPOSE_INIT, keyed.PURPOSE_LORA, keyed.PURPOSE_SAMPLE}


def repo_root() -> Path:
    """The folder above this one that holds go.mod."""
    here = Path(__file__).resolve()
    for d in here.parents:
        if (d / "go.mod").is_file():
            return d
    raise AssertionError("no go.mod above %s: the tests must run inside the marlow repository" % here)


GOLDEN = repo_root() / "keyed" / "testdata" / "golden.json"


@pytest.fixture(scope="module")
def golden() -> dict[str, Any]:
    if not GOLDEN.is_file():
        pytest.fail(
            "%s is missing: the Go test of package keyed writes it (go test ./keyed -run TestGolden -update)" % GOLDEN
        )
    with GOLDEN.open() as f:
        table: dict[str, Any] = json.load(f)
    return table


def u64(s: str) -> int:
    assert isinstance(s, str) and s.startswith("0x") and len(s) == 18, "not a 0x + 16 hex digits word: %r" % s
    return int(s, 16)


def f64(s: str) -> float:
    """The float64 with these IEEE-754 bits."""
    v: float = struct.unpack("<d", struct.pack("<Q", u64(s)))[0]
    return v


def bits(x: float) -> str:
    return "0x%016x" % struct.unpack("<Q", struct.pack("<d", x))[0]


def test_table_has_every_section_and_the_edges(golden: dict[str, Any]) -> None:
    for sec in SECTIONS:
        assert len(golden.get(sec) or []) >= 16, "section %s has fewer than 16 cases" % sec
    seen = {u64(c["in"]) for c in golden["mix64"]}
    assert seen >= EDGES, "mix64 lacks the edge inputs %s" % sorted(EDGES - seen)
    assert any(not c["words"] for c in golden["hash_key"]), "hash_key has no case of no words"


def test_mix64(golden: dict[str, Any]) -> None:
    for c in golden["mix64"]:
        assert keyed.mix64(u64(c["in"])) == u64(c["out"]), c


def test_hash_key(golden: dict[str, Any]) -> None:
    for c in golden["hash_key"]:
        assert keyed.hash_key(*[u64(w) for w in c["words"]]) == u64(c["out"]), c


def test_uniform01(golden: dict[str, Any]) -> None:
    for c in golden["uniform01"]:
        got = keyed.uniform01(u64(c["in"]))
        assert bits(got) == c["out"], (c, got, f64(c["out"]))
        assert 0.0 <= got < 1.0


def test_uniform_at(golden: dict[str, Any]) -> None:
    for c in golden["uniform_at"]:
        got = keyed.uniform_at(u64(c["key"]), int(c["i"]))
        assert bits(got) == c["out"], (c, got, f64(c["out"]))


def test_uniform_at_array_is_the_same_stream(golden: dict[str, Any]) -> None:
    """The vectorised form LoRA initialisation uses, element by element."""
    by_key: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for c in golden["uniform_at"]:
        if int(c["i"]) < 1 << 22:  # the array starts at element 0: keep it small
            by_key[u64(c["key"])].append(c)
    assert by_key, "no uniform_at case with a small index"
    for key, cases in by_key.items():
        n = max(int(c["i"]) for c in cases) + 1
        arr = keyed.uniform_at_array(key, n)
        assert arr.dtype.name == "float64" and arr.shape == (n,)
        for c in cases:
            assert bits(float(arr[int(c["i"])])) == c["out"], c
        for i in range(min(n, 64)):
            assert float(arr[i]) == keyed.uniform_at(key, i)


def test_sample_uniform(golden: dict[str, Any]) -> None:
    for c in golden["sample_uniform"]:
        seed, pos = u64(c["seed"]), int(c["position"])
        assert bits(keyed.sample_uniform(seed, pos)) == c["out"], c
        assert bits(keyed.uniform01(keyed.mix64(sample_key(seed, pos)))) == c["out"], c


def test_words_wrap_to_64_bits() -> None:
    assert keyed.hash_key(-1) == keyed.hash_key((1 << 64) - 1)
    assert keyed.mix64(1 << 64) == keyed.mix64(0)
