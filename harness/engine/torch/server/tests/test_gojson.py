"""go_json against what Go's encoding/json wrote for the same values."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from marlow_torch.gojson import go_float, go_json, go_string, write_json

# json.MarshalIndent(v, "", "  ") of the same map, from Go 1.26.
GO_MAP = (
    '{\n  "alpha": 16,\n  "big": 1e+21,\n  "half": 0.5,\n  "list": [],\n  "neg": -3.25,\n  "null": null,\n'
    '  "obj": {},\n  "s": "a\\"b\\u003cé\\u003e",\n  "t": true,\n  "third": 0.3333333333333333,\n'
    '  "tiny": 1e-7,\n  "xs": [\n    1,\n    "x",\n    [\n      2\n    ]\n  ]\n}'
)


def test_map_like_go() -> None:
    m = {
        "alpha": 16.0,
        "half": 0.5,
        "tiny": 1e-7,
        "big": 1e21,
        "neg": -3.25,
        "list": [],
        "obj": {},
        "null": None,
        "t": True,
        "s": 'a"b<é>',
        "xs": [1.0, "x", [2.0]],
        "third": 1.0 / 3,
    }
    assert go_json(m) == GO_MAP


def test_struct_keeps_field_order() -> None:
    st = {"name": "a/b", "seed": (1 << 64) - 1, "step": 3}
    assert go_json(st, sort=False) == '{\n  "name": "a/b",\n  "seed": 18446744073709551615,\n  "step": 3\n}'
    assert go_json({"z": 1, "a": 2}, sort=False).index('"z"') < go_json({"z": 1, "a": 2}).index('"z"')


@pytest.mark.parametrize(
    ("x", "go"),
    [
        (5e-05, "0.00005"),
        (-1.2345e-05, "-0.000012345"),
        (1e-6, "0.000001"),
        (9.99e-7, "9.99e-7"),
        (1.5e300, "1.5e+300"),
        (123.25, "123.25"),
        (1e20, "100000000000000000000"),
        (2.5e-4, "0.00025"),
        (-0.0, "-0"),
        (0.0, "0"),
        (1e-320, "1e-320"),
        (0.1, "0.1"),
        (1e21, "1e+21"),
        (123456789012345680000.0, "123456789012345680000"),
        (1e16, "10000000000000000"),
        (12345678.5, "12345678.5"),
    ],
)
def test_float_like_go(x: float, go: str) -> None:
    assert go_float(x) == go
    assert float(go) == x


def test_float_rejects_non_finite() -> None:
    for x in (math.nan, math.inf, -math.inf):
        with pytest.raises(ValueError):
            go_float(x)


def test_string_like_go() -> None:
    assert go_string("tab\t nl\n \x01 \u2028 & \x7f") == '"tab\\t nl\\n \\u0001 \\u2028 \\u0026 \x7f"'
    assert json.loads(go_string("<a & b>\u2029")) == "<a & b>\u2029"


def test_write_json_is_atomic_and_ends_in_newline(tmp_path: Path) -> None:
    p = tmp_path / "state.json"
    write_json(str(p), {"step": 2, "name": "x"}, sort=False)
    assert p.read_text() == '{\n  "step": 2,\n  "name": "x"\n}\n'
    assert not (tmp_path / "state.json.tmp").exists()
