"""The request loop over real pipes: replies, errors and malformed frames,
with no checkpoint loaded."""

from __future__ import annotations

import json
import os
import struct
import threading
from typing import Any

import numpy as np

from marlow_torch.protocol import PROTOCOL, Channel, b64_floats, ints_b64
from marlow_torch.sampling import sample_key, sample_row
from marlow_torch.server import serve


class Peer:
    """The Go client's end of the two pipes, with serve running in a thread."""

    def __init__(self) -> None:
        req_r, self.req_w = os.pipe()
        self.rep_r, rep_w = os.pipe()
        self.thread = threading.Thread(target=serve, args=(Channel(req_r, rep_w),), daemon=True)
        self.thread.start()

    def send(self, body: bytes) -> None:
        os.write(self.req_w, struct.pack("<I", len(body)) + body)

    def reply(self) -> dict[str, Any]:
        head = self._read(4)
        out: dict[str, Any] = json.loads(self._read(struct.unpack("<I", head)[0]))
        return out

    def call(self, rid: int, op: str, args: Any = None) -> dict[str, Any]:
        self.send(json.dumps({"id": rid, "op": op, "args": args}).encode())
        return self.reply()

    def _read(self, n: int) -> bytes:
        buf = b""
        while len(buf) < n:
            chunk = os.read(self.rep_r, n - len(buf))
            assert chunk, "server closed its reply pipe"
            buf += chunk
        return buf


def test_requests_replies_and_errors() -> None:
    p = Peer()
    hello = p.call(1, "hello")
    assert hello["id"] == 1 and hello["result"]["protocol"] == PROTOCOL
    assert hello["result"]["pid"] == os.getpid() and "numpy" in hello["result"]["versions"]

    err = p.call(2, "fly")["error"]
    assert err["kind"] == "bad_request" and err["message"] == "unknown op 'fly'"

    p.send(b"{oops")
    bad = p.reply()
    assert bad["id"] == 0 and bad["error"]["kind"] == "bad_request" and "not JSON" in bad["error"]["message"]

    err = p.call(3, "generate", {"requests": []})["error"]
    assert err["kind"] == "not_open" and "Traceback" in err["traceback"]

    err = p.call(4, "open", {})["error"]
    assert err["kind"] == "bad_request" and err["message"] == "open: argument 'checkpoint' is missing"

    logits = np.array([0.0, 1.0, 2.0, 0.5, 0.5], dtype=np.float32)
    res = p.call(
        5,
        "sample_rows",
        {
            "logits": b64_floats(logits.tolist()),
            "lengths": [3, 2],
            "temps": [1.0, 2.0],
            "seeds": [7, 8],
            "positions": [0, 5],
        },
    )["result"]
    assert ints_b64(res["tokens"]) == [
        sample_row(logits[:3], 1.0, sample_key(7, 0))[0],
        sample_row(logits[3:], 2.0, sample_key(8, 5))[0],
    ]
    err = p.call(
        6, "sample_rows", {"logits": b64_floats([1.0]), "lengths": [2], "temps": [1], "seeds": [1], "positions": [0]}
    )
    assert err["error"]["message"] == "logits hold 4 bytes, want 4 x 2"

    assert p.call(7, "close") == {"id": 7, "result": {}}
    p.thread.join(5)
    assert not p.thread.is_alive()


def test_end_of_stream_ends_the_loop() -> None:
    p = Peer()
    os.close(p.req_w)
    p.thread.join(5)
    assert not p.thread.is_alive()
