"""JSON files as the Go side writes them, replaced atomically."""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable
from typing import Any


def go_json(x: Any, indent: int = 0, sort: bool = True) -> str:
    """JSON as Go's json.MarshalIndent(v, "", "  ") writes it (floats and
    strings as go_float and go_string write them); keys sorted (a Go map)
    unless sort is false (a Go struct in field order)."""
    pad, inner = "  " * indent, "  " * (indent + 1)
    if isinstance(x, dict):
        if not x:
            return "{}"
        keys = sorted(x) if sort else list(x)
        items = (inner + go_string(k) + ": " + go_json(x[k], indent + 1, sort) for k in keys)
        return "{\n" + ",\n".join(items) + "\n" + pad + "}"
    if isinstance(x, list):
        if not x:
            return "[]"
        return "[\n" + ",\n".join(inner + go_json(v, indent + 1, sort) for v in x) + "\n" + pad + "]"
    if isinstance(x, str):
        return go_string(x)
    if isinstance(x, float):
        return go_float(x)
    return json.dumps(x)


_GO_ESCAPES = {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028", "\u2029": "\\u2029"}


def go_string(s: str) -> str:
    """A JSON string as Go's encoding/json writes it: UTF-8 kept, control
    characters, <, >, & and the line and paragraph separators escaped."""
    out = json.dumps(s, ensure_ascii=False)
    for c, e in _GO_ESCAPES.items():
        out = out.replace(c, e)
    return out


def go_float(x: float) -> str:
    """A finite float64 as Go's encoding/json writes it: the shortest digits
    that read back to x, positional for 1e-6 <= |x| < 1e21 (integral values
    without a fraction), else with an exponent (e-7, not Python's e-07)."""
    if not math.isfinite(x):
        raise ValueError("JSON has no value for %r" % x)
    if x == 0:
        return "-0" if math.copysign(1.0, x) < 0 else "0"
    r = repr(x)  # the shortest digits, as Go's strconv finds them
    a = abs(x)
    if a < 1e-6 or a >= 1e21:
        mant, exp = r.split("e")
        if exp.startswith("-0"):
            exp = "-" + exp[2:]
        return mant + "e" + exp
    if "e" not in r:
        return r[:-2] if r.endswith(".0") else r
    # Python writes an exponent below 1e-4 and from 1e16 on; Go does not.
    mant, exp = r.split("e")
    sign = "-" if mant.startswith("-") else ""
    digits = mant.lstrip("-").replace(".", "")
    point = 1 + int(exp)  # digits d.ddd x 10^exp: the point after this many digits
    if point <= 0:
        return sign + "0." + "0" * -point + digits
    if point >= len(digits):
        return sign + digits + "0" * (point - len(digits))
    return sign + digits[:point] + "." + digits[point:]


def write_json(path: str, obj: Any, sort: bool = True) -> None:
    """Writes go_json(obj) and a newline to path atomically."""
    data = (go_json(obj, 0, sort) + "\n").encode()

    def w(p: str) -> None:
        with open(p, "wb") as f:
            f.write(data)

    atomic(path, w)


def atomic(path: str, write: Callable[[str], None]) -> None:
    """Calls write on path + ".tmp", then renames that file to path."""
    tmp = path + ".tmp"
    write(tmp)
    os.replace(tmp, path)
