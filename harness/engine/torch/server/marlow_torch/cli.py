"""The command line: the protocol's file descriptors, stdout pointed at
stderr, then the request loop."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from .protocol import Channel
from .server import serve

ALLOC_CONF = "expandable_segments:True"
"""The cuda caching allocator's setting for long runs: segments that grow in
place instead of fragmenting between generation (a KV pool of most of the
memory, freed on return) and training. Set unless the caller set one; read
by torch at its first cuda allocation, so before any."""


def alloc_defaults() -> None:
    """Sets PYTORCH_CUDA_ALLOC_CONF to ALLOC_CONF when neither it nor
    PYTORCH_ALLOC_CONF is set (torch is imported later, by the ops)."""
    if not os.environ.get("PYTORCH_CUDA_ALLOC_CONF") and not os.environ.get("PYTORCH_ALLOC_CONF"):
        os.environ["PYTORCH_CUDA_ALLOC_CONF"] = ALLOC_CONF


def main(argv: Sequence[str] | None = None) -> None:
    """Parses --in-fd and --out-fd and serves requests on them."""
    ap = argparse.ArgumentParser(prog="marlow_torch", description="marlow's torch engine server")
    ap.add_argument("--in-fd", type=int, required=True, help="file descriptor the requests arrive on")
    ap.add_argument("--out-fd", type=int, required=True, help="file descriptor the replies leave on")
    a = ap.parse_args(argv)
    alloc_defaults()
    # Library prints go to stderr: the protocol has its own descriptors, and
    # stdout (fd 1) is pointed at stderr too.
    sys.stdout.flush()
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    serve(Channel(a.in_fd, a.out_fd))
