"""The request loop and the operations, each a method op_NAME that takes the
request's Args and returns its result. Heavy modules (torch, numpy,
transformers) are imported by the first operation that needs them, so that
hello answers at once and reports a broken environment as a reply."""

from __future__ import annotations

import importlib.metadata
import os
import sys
import traceback
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from . import memory
from .protocol import PROTOCOL, Args, Channel, Fault, Malformed, decode_request

if TYPE_CHECKING:
    from .adapters import Adapters
    from .model import Model

PACKAGES = ["torch", "transformers", "peft", "safetensors", "tokenizers", "numpy", "jinja2"]
"""The packages whose versions hello reports."""


def versions() -> dict[str, str]:
    """Python's version and those of PACKAGES ("" for one not installed)."""
    out = {"python": sys.version.split()[0]}
    for pkg in PACKAGES:
        try:
            out[pkg] = importlib.metadata.version(pkg)
        except importlib.metadata.PackageNotFoundError:
            out[pkg] = ""
    return out


class Server:
    """The state of one server: the open model and its adapters."""

    def __init__(self, ch: Channel) -> None:
        self.ch = ch
        self.model: Model | None = None
        self.adapters: Adapters | None = None

    def handler(self, op: str) -> Callable[[Args], dict[str, Any]] | None:
        """The method serving op, None for an unknown op."""
        fn = getattr(self, "op_" + op, None)
        return fn if callable(fn) else None

    def need_open(self) -> tuple[Model, Adapters]:
        """The open model and its adapters."""
        if self.model is None or self.adapters is None:
            raise Fault("not_open", "no checkpoint is open")
        return self.model, self.adapters

    def op_hello(self, args: Args) -> dict[str, Any]:
        """The protocol version, package versions and the process id."""
        return {"protocol": PROTOCOL, "versions": versions(), "pid": os.getpid()}

    def op_open(self, args: Args) -> dict[str, Any]:
        """Loads a checkpoint (see model.open_model)."""
        from .adapters import Adapters
        from .model import open_model

        model = open_model(args)
        self.model, self.adapters = model, Adapters(model)
        return model.info()

    def op_add_adapter(self, args: Args) -> dict[str, Any]:
        """Adds a LoRA adapter initialised from the keyed stream."""
        _, adapters = self.need_open()
        targets = args.get("targets") or []
        if not isinstance(targets, list):
            raise Fault("bad_request", "add_adapter: targets is %s, want a list" % type(targets).__name__)
        name = args.need_str("name")
        ad = adapters.add(name, args.need_int("rank"), args.need_float("alpha"), targets, args.need_int("seed"))
        return {"params": ad.numel()}

    def op_generate(self, args: Args) -> dict[str, Any]:
        """Samples completions of chat requests."""
        from .generation import generate

        model, adapters = self.need_open()
        return generate(model, adapters, args, self.ch.progress)

    def op_sample_rows(self, args: Args) -> dict[str, Any]:
        """The sampling rule alone, on given logits (cross-checks with the
        native engine): row i is sampled at temperature temps[i] with the
        uniform of (seeds[i], positions[i])."""
        import numpy as np

        from .protocol import b64_floats, b64_ints, decode_b64
        from .sampling import sample_rows

        raw = decode_b64(args.need("logits"), "logits")
        lengths = [int(x) for x in args.need_list("lengths")]
        if len(raw) != 4 * sum(lengths):
            raise Fault("bad_request", "logits hold %d bytes, want 4 x %d" % (len(raw), sum(lengths)))
        seeds, positions, temps = args.need_list("seeds"), args.need_list("positions"), args.need_list("temps")
        if not len(seeds) == len(positions) == len(temps) == len(lengths):
            raise Fault(
                "bad_request",
                "sample_rows: %d rows but %d seeds, %d positions and %d temperatures"
                % (len(lengths), len(seeds), len(positions), len(temps)),
            )
        flat = np.frombuffer(raw, dtype="<f4")
        toks, lps = sample_rows(
            flat, lengths, [float(t) for t in temps], [int(s) for s in seeds], [int(p) for p in positions]
        )
        return {"tokens": b64_ints(toks), "logprobs": b64_floats(lps)}

    def op_logprobs(self, args: Args) -> dict[str, Any]:
        """Log-probs of turns' completions."""
        from .training import logprobs

        model, adapters = self.need_open()
        return logprobs(model, adapters, args, self.ch.progress)

    def op_train_step(self, args: Args) -> dict[str, Any]:
        """One GRPO step of one adapter."""
        from .training import train_step

        model, adapters = self.need_open()
        return train_step(model, adapters, args, self.ch.progress)

    def op_save(self, args: Args) -> dict[str, Any]:
        """Writes every adapter under args["dir"]."""
        from . import checkpoints

        _, adapters = self.need_open()
        return {"adapters": checkpoints.save(adapters, args.need_str("dir"))}

    def op_load(self, args: Args) -> dict[str, Any]:
        """Reads the adapters saved under args["dir"]."""
        from . import checkpoints

        _, adapters = self.need_open()
        return {"adapters": checkpoints.load(adapters, args.need_str("dir"))}

    def op_stats(self, args: Args) -> dict[str, Any]:
        """CPU time and peak memory of the server process (and of the GPU), and
        the slot backend's KV pool figures summed over generate calls."""
        import resource

        ru = resource.getrusage(resource.RUSAGE_SELF)
        out: dict[str, Any] = {"peak_rss_bytes": ru.ru_maxrss * 1024, "cpu_seconds": ru.ru_utime + ru.ru_stime}
        if self.model is not None and self.model.device.type == "cuda":
            import torch

            out["cuda_peak_bytes"] = int(torch.cuda.max_memory_allocated(self.model.device))
        if self.model is not None and self.model.gen_pool:
            out["gen_pool"] = dict(self.model.gen_pool)
        return out

    def op_close(self, args: Args) -> dict[str, Any]:
        """Ends the request loop after its reply."""
        return {}


def error_reply(rid: int, e: BaseException) -> dict[str, Any]:
    """The error frame of a failed request: a Fault's kind, else the
    exception's class name."""
    kind = e.kind if isinstance(e, Fault) else type(e).__name__
    return {"id": rid, "error": {"kind": kind, "message": str(e), "traceback": traceback.format_exc()}}


def serve(ch: Channel) -> None:
    """Answers requests until the stream ends or a close request. An
    allocation failure in a call is answered as an out_of_memory fault that
    names the call's batch and budget (memory.fault), and the memory it held
    is released once the reply is sent."""
    srv = Server(ch)
    inject = memory.Injector.from_env()
    while True:
        body = ch.read()
        if body is None:
            return
        try:
            req = decode_request(body)
        except Malformed as e:
            ch.write({"id": e.id, "error": {"kind": "bad_request", "message": str(e), "traceback": ""}})
            continue
        ch.begin(req.id)
        fn = srv.handler(req.op)
        oom = False
        try:
            if fn is None:
                raise Fault("bad_request", "unknown op %r" % req.op)
            inject.check(req.op)
            ch.write({"id": req.id, "result": fn(req.args)})
        except Exception as e:  # every failure becomes a reply
            oom = memory.is_oom(e)
            ch.write(error_reply(req.id, memory.fault(req.op, req.args, srv.model, e) if oom else e))
        if oom:
            memory.release()  # after the except block: its traceback no longer holds the tensors
        ch.begin(None)
        if req.op == "close":
            return
