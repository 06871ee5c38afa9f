"""Out-of-memory errors at the server boundary.

A CUDA out-of-memory (torch.OutOfMemoryError; torch.cuda.OutOfMemoryError
before torch 2.5) or the CPU allocator's "can't allocate memory" during a
call becomes the typed error kind "out_of_memory" whose message names the
operation, the batch (rows and tokens of the call) and the budget to lower:
gen_tokens or kv_cache_fraction for generation, train_tokens for training
and log-probs (the spec's model section). The server frees the allocator's
cache once the reply is sent, so the error reaches the client as a run
failure instead of a traceback.

For tests, MARLOW_TORCH_INJECT_OOM=OP[:N] raises torch.OutOfMemoryError at
the start of the N-th call (default the first) of operation OP, e.g.
train_step:2.
"""

from __future__ import annotations

import gc
import os
import sys
from typing import TYPE_CHECKING, Any

from .protocol import Args, Fault

if TYPE_CHECKING:
    from .model import Model

KIND = "out_of_memory"
"""The error kind of an out-of-memory reply (the Go client's torch.KindOutOfMemory)."""

INJECT_ENV = "MARLOW_TORCH_INJECT_OOM"
"""The variable that injects an out-of-memory error into one call (tests)."""

_CPU_MARK = "can't allocate memory"
"""What the CPU allocator's RuntimeError says when an allocation fails."""

_WHAT = {"generate": "generate", "train_step": "train step", "logprobs": "log-probs"}


def is_oom(e: BaseException) -> bool:
    """Whether e is an allocation failure of torch on the GPU or the CPU."""
    torch = sys.modules.get("torch")
    if torch is None or not isinstance(e, RuntimeError):
        return False
    oom = getattr(torch, "OutOfMemoryError", None) or torch.cuda.OutOfMemoryError
    return isinstance(e, oom) or _CPU_MARK in str(e)


class Injector:
    """Raises torch.OutOfMemoryError at the start of the N-th call of one
    operation, as MARLOW_TORCH_INJECT_OOM=OP[:N] asks ("" injects nothing)."""

    def __init__(self, spec: str) -> None:
        self.spec = spec
        self.op, _, n = spec.partition(":")
        try:
            self.nth = int(n) if n else 1
        except ValueError:
            self.nth = 0
        if spec and (not self.op or self.nth < 1):
            raise ValueError("%s=%r: want OP or OP:N with N >= 1" % (INJECT_ENV, spec))
        self.calls = 0

    @staticmethod
    def from_env() -> Injector:
        """The injector MARLOW_TORCH_INJECT_OOM asks for."""
        return Injector(os.environ.get(INJECT_ENV, ""))

    def check(self, op: str) -> None:
        """Counts a call of op and raises on the chosen one."""
        if not self.op or op != self.op:
            return
        self.calls += 1
        if self.calls == self.nth:
            import torch

            raise torch.OutOfMemoryError(
                "CUDA out of memory (injected by %s=%s at call %d of %s)" % (INJECT_ENV, self.spec, self.calls, op)
            )


def _b64_len(x: Any) -> int:
    """The number of int32 in a base64 token array (0 when it is not one)."""
    if not isinstance(x, str):
        return 0
    pad = len(x) - len(x.rstrip("="))
    return max(0, (len(x) * 3 // 4 - pad) // 4)


def batch(op: str, args: Args) -> str:
    """The rows and tokens of a call's arguments, in words."""
    if op == "generate":
        reqs = [r for r in (args.get("requests") or []) if isinstance(r, dict)]
        new = [int(r.get("max_new_tokens") or 0) for r in reqs if isinstance(r.get("max_new_tokens"), (int, float))]
        return "%d requests of up to %d new tokens each (%d new tokens at most)" % (
            len(reqs),
            max(new, default=0),
            sum(new),
        )
    turns = [t for t in (args.get("turns") or []) if isinstance(t, dict)]
    toks = sum(_b64_len(t.get("prompt_ids")) + _b64_len(t.get("completion_ids")) for t in turns)
    return "%d turns of %d prompt + completion tokens" % (len(turns), toks)


def knob(op: str, model: Model | None) -> str:
    """The budget that bounds the batch op works on, and how to lower it."""
    if op == "generate":
        if model is not None and model.gen_backend == "slots" and model.device.type == "cuda":
            return (
                "the slots backend's KV pool takes kv_cache_fraction (now %g) of the free GPU memory: lower "
                "kv_cache_fraction in the spec's model section (e.g. to %g) to leave room for activations"
                % (model.kv_fraction, round(model.kv_fraction * 0.75, 2))
            )
        now = model.gen_budget if model is not None else 0
        return (
            "generation runs in waves of at most gen_tokens (now %d) prompt + new tokens: lower gen_tokens "
            "in the spec's model section (e.g. to %d)" % (now, max(now // 2, 1))
        )
    now = model.train_budget if model is not None else 0
    msg = (
        "micro-batches hold at most train_tokens (now %d) padded tokens: lower train_tokens in the spec's "
        "model section (e.g. to %d); a single turn longer than that is still one micro-batch" % (now, max(now // 2, 1))
    )
    if model is not None and model.slot_engine is not None and model.device.type == "cuda":
        msg += (
            "; the slots backend's KV pool stays allocated between generate calls (kv_cache_fraction, now %g, "
            "of the GPU memory free at the first one): lowering it (e.g. to %g) leaves training more room"
            % (model.kv_fraction, round(model.kv_fraction * 0.75, 2))
        )
    return msg


def fault(op: str, args: Args, model: Model | None, e: BaseException) -> Fault:
    """The out_of_memory fault of call op that failed with e."""
    where = "the GPU" if model is not None and model.device.type == "cuda" else "memory"
    if model is not None and model.cuda_device:
        where = "the GPU (%s)" % model.cuda_device
    first = str(e).strip().split("\n")[0]
    if op in _WHAT:
        name = args.get("adapter") or ""
        on = " of adapter %r" % name if name else ""
        msg = "%s%s ran out of %s on %s; %s. (%s)" % (_WHAT[op], on, where, batch(op, args), knob(op, model), first)
    else:
        msg = (
            "%s ran out of %s: the model, its adapters and their optimizer state do not fit (another process "
            "may hold the GPU: see nvidia-smi; runs sharing a GPU with --runs-per-gpu share its memory). (%s)"
            % (op, where, first)
        )
    return Fault(KIND, msg)


def release() -> None:
    """Returns the memory of a failed call: drops unreachable tensors and
    empties the CUDA allocator's cache."""
    gc.collect()
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.empty_cache()
