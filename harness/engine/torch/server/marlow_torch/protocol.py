"""The wire protocol between the Go client and this server.

A frame is a 4-byte little-endian length followed by that many bytes of
JSON. A request is {"id": N, "op": NAME, "args": {...}}; the server answers
each with exactly one final frame, {"id": N, "result": {...}} or
{"id": N, "error": {"kind", "message", "traceback"}}, and may send
{"id": N, "progress": {...}} frames before it during long calls. Token
arrays travel as base64 of little-endian int32, log-probs as base64 of
little-endian float32, and non-finite statistics as null.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
import os
import struct
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import IO, Any

PROTOCOL = 1
"""The protocol version; the Go client's torch.Protocol must be the same."""

MAX_FRAME = 1 << 31
"""The longest frame accepted (the Go side's maxFrame)."""


class Fault(Exception):
    """An error with a kind the Go client reports (bad_request,
    bad_checkpoint, not_open, no_cuda, internal)."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


@dataclass(frozen=True)
class Request:
    """One decoded request frame."""

    id: int
    op: str
    args: Args


class Malformed(Exception):
    """A request frame that is not {"id": int, "op": str, "args": object};
    id is the frame's id where it had a usable one (else 0)."""

    def __init__(self, id: int, message: str) -> None:
        super().__init__(message)
        self.id = id


class Args:
    """The arguments of one request, with typed accessors that name the
    missing or mistyped argument in their error."""

    def __init__(self, raw: Mapping[str, Any], where: str) -> None:
        self.raw = raw
        self.where = where

    def __contains__(self, key: str) -> bool:
        return key in self.raw

    def get(self, key: str, default: Any = None) -> Any:
        """The raw value of key, default when absent."""
        return self.raw.get(key, default)

    def need(self, key: str) -> Any:
        """The raw value of key, which must be present."""
        if key not in self.raw:
            raise Fault("bad_request", "%s: argument %r is missing" % (self.where, key))
        return self.raw[key]

    def need_int(self, key: str) -> int:
        """int() of the required argument key."""
        v = self._number(key)
        try:
            return int(v)
        except (TypeError, ValueError) as e:
            raise Fault("bad_request", "%s: argument %r: %s" % (self.where, key, e)) from None

    def need_float(self, key: str) -> float:
        """float() of the required argument key."""
        v = self._number(key)
        try:
            return float(v)
        except (TypeError, ValueError) as e:
            raise Fault("bad_request", "%s: argument %r: %s" % (self.where, key, e)) from None

    def need_str(self, key: str) -> str:
        """The required string argument key."""
        v = self.need(key)
        if not isinstance(v, str):
            raise Fault("bad_request", "%s: argument %r is %s, want a string" % (self.where, key, type(v).__name__))
        return v

    def need_list(self, key: str) -> list[Any]:
        """The required list argument key."""
        v = self.need(key)
        if not isinstance(v, list):
            raise Fault("bad_request", "%s: argument %r is %s, want a list" % (self.where, key, type(v).__name__))
        return v

    def need_obj(self, key: str) -> Args:
        """The required object argument key, as Args."""
        v = self.need(key)
        if not isinstance(v, dict):
            raise Fault("bad_request", "%s: argument %r is %s, want an object" % (self.where, key, type(v).__name__))
        return Args(v, "%s.%s" % (self.where, key))

    def _number(self, key: str) -> Any:
        v = self.need(key)
        if isinstance(v, (bool, dict, list)) or v is None:
            raise Fault("bad_request", "%s: argument %r is %r, want a number" % (self.where, key, v))
        return v


def decode_request(body: bytes) -> Request:
    """Decodes one request frame's JSON body; a malformed one raises Malformed."""
    try:
        obj = json.loads(body)
    except (UnicodeDecodeError, ValueError) as e:
        raise Malformed(0, "request frame of %d bytes is not JSON: %s" % (len(body), e)) from None
    if not isinstance(obj, dict):
        raise Malformed(0, "request frame is a JSON %s, want an object" % type(obj).__name__)
    rid = obj.get("id")
    if not isinstance(rid, int) or isinstance(rid, bool):
        raise Malformed(0, "request frame has id %r, want an integer" % (rid,))
    op = obj.get("op", "")
    if not isinstance(op, str):
        raise Malformed(rid, "request %d has op %r, want a string" % (rid, op))
    args = obj.get("args") or {}
    if not isinstance(args, dict):
        raise Malformed(rid, "request %d (%s) has args of type %s, want an object" % (rid, op, type(args).__name__))
    return Request(rid, op, Args(args, op))


def encode_frame(obj: Any) -> bytes:
    """The frame of a reply: length prefix and compact JSON, with non-finite
    floats as null."""
    body = json.dumps(clean(obj), allow_nan=False, separators=(",", ":")).encode()
    return struct.pack("<I", len(body)) + body


def clean(x: Any) -> Any:
    """Replaces non-finite floats by None (NaN travels as null)."""
    if isinstance(x, float):
        return x if math.isfinite(x) else None
    if isinstance(x, dict):
        return {k: clean(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [clean(v) for v in x]
    return x


class Channel:
    """The two protocol pipes: frames in on one file descriptor, out on the
    other, and the progress frames of the request being served."""

    def __init__(self, rfd: int, wfd: int) -> None:
        self.r: IO[bytes] = os.fdopen(rfd, "rb", buffering=0)
        self.w: IO[bytes] = os.fdopen(wfd, "wb", buffering=0)
        self.req_id: int | None = None
        self.last_progress = 0.0

    def _read_exact(self, n: int) -> bytes | None:
        buf = bytearray()
        while len(buf) < n:
            chunk = self.r.read(n - len(buf))
            if not chunk:
                return None
            buf += chunk
        return bytes(buf)

    def read(self) -> bytes | None:
        """The body of the next frame, None at the end of the stream."""
        head = self._read_exact(4)
        if head is None:
            return None
        (n,) = struct.unpack("<I", head)
        return self._read_exact(n)

    def write(self, obj: Any) -> None:
        """Sends obj as one frame."""
        self.w.write(encode_frame(obj))

    def begin(self, rid: int | None) -> None:
        """Marks the start of serving request rid (None: between requests)."""
        self.req_id = rid
        self.last_progress = time.monotonic()

    def progress(self, **what: Any) -> None:
        """Sends a progress frame, at most one per second."""
        now = time.monotonic()
        if self.req_id is None or now - self.last_progress < 1.0:
            return
        self.last_progress = now
        self.write({"id": self.req_id, "progress": what})


def b64_ints(ids: Sequence[int]) -> str:
    """base64 of little-endian int32."""
    return base64.b64encode(struct.pack("<%di" % len(ids), *ids)).decode()


def b64_floats(vals: Sequence[float]) -> str:
    """base64 of little-endian float32."""
    return base64.b64encode(struct.pack("<%df" % len(vals), *vals)).decode()


def decode_b64(s: Any, what: str) -> bytes:
    """The bytes of the base64 string s (a what array), strictly decoded."""
    if not isinstance(s, str):
        raise Fault("bad_request", "%s array is %s, want a base64 string" % (what, type(s).__name__))
    try:
        return base64.b64decode(s, validate=True)
    except (binascii.Error, ValueError) as e:
        raise Fault("bad_request", "%s array is not base64: %s" % (what, e)) from None


def ints_b64(s: Any) -> list[int]:
    """Decodes base64 of little-endian int32."""
    raw = decode_b64(s, "token")
    if len(raw) % 4:
        raise Fault("bad_request", "token array of %d bytes is not a multiple of 4" % len(raw))
    return list(struct.unpack("<%di" % (len(raw) // 4), raw))


def floats_b64(s: Any) -> list[float]:
    """Decodes base64 of little-endian float32."""
    raw = decode_b64(s, "float")
    if len(raw) % 4:
        raise Fault("bad_request", "float array of %d bytes is not a multiple of 4" % len(raw))
    return list(struct.unpack("<%df" % (len(raw) // 4), raw))
