"""Out-of-memory errors: the injected fault travels as kind out_of_memory
naming the call, its batch and the budget to lower."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
import torch
from test_server import Peer

from marlow_torch import memory
from marlow_torch.protocol import Args, b64_ints


def turn(prompt: int, completion: int) -> dict[str, Any]:
    return {"adapter": "a", "prompt_ids": b64_ints(list(range(prompt))), "completion_ids": b64_ints([1] * completion)}


def test_injected_oom_is_a_typed_reply(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(memory.INJECT_ENV, "logprobs:2")
    p = Peer()
    args = {"adapter": "a", "temperature": 1.0, "turns": [turn(3, 5), turn(7, 2)]}
    first = p.call(1, "logprobs", args)["error"]
    assert first["kind"] == "not_open"  # the first call is not the chosen one
    err = p.call(2, "logprobs", args)["error"]
    assert err["kind"] == memory.KIND
    msg = err["message"]
    for want in ["log-probs of adapter 'a'", "2 turns of 17 prompt + completion", "lower train_tokens", "injected"]:
        assert want in msg, msg
    assert "OutOfMemoryError" in err["traceback"]
    assert p.call(3, "logprobs", args)["error"]["kind"] == "not_open"  # only the N-th call
    p.call(4, "close")


def test_bad_injection_spec() -> None:
    for bad in [":2", "train_step:0", "train_step:x"]:
        with pytest.raises(ValueError, match=memory.INJECT_ENV):
            memory.Injector(bad)
    memory.Injector("").check("train_step")  # nothing injected


def test_is_oom() -> None:
    assert memory.is_oom(torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB"))
    assert memory.is_oom(RuntimeError("[enforce fail at alloc_cpu.cpp:117] DefaultCPUAllocator: can't allocate memory"))
    assert not memory.is_oom(RuntimeError("shape mismatch"))
    assert not memory.is_oom(ValueError("can't allocate memory"))


def fake_model(device: str, backend: str = "reference") -> Any:
    return SimpleNamespace(
        device=torch.device(device),
        cuda_device="NVIDIA H200" if device.startswith("cuda") else "",
        gen_backend=backend,
        gen_budget=65536,
        train_budget=16384,
        kv_fraction=0.85,
        slot_engine=None,
    )


@pytest.mark.parametrize(
    ("op", "args", "model", "want"),
    [
        (
            "train_step",
            {"adapter": "voting", "turns": [turn(10, 20)] * 4},
            fake_model("cuda:0"),
            [
                "train step of adapter 'voting' ran out of the GPU (NVIDIA H200)",
                "4 turns of 120",
                "train_tokens (now 16384)",
                "e.g. to 8192",
            ],
        ),
        (
            "generate",
            {"requests": [{"max_new_tokens": 100}, {"max_new_tokens": 300}]},
            fake_model("cpu"),
            ["generate ran out of memory", "2 requests of up to 300 new tokens", "gen_tokens (now 65536)"],
        ),
        (
            "generate",
            {"requests": [{"max_new_tokens": 100}]},
            fake_model("cuda:0", "slots"),
            ["kv_cache_fraction (now 0.85)", "e.g. to 0.64"],
        ),
        ("open", {}, None, ["open ran out of memory", "nvidia-smi"]),
    ],
)
def test_fault_names_batch_and_knob(op: str, args: dict[str, Any], model: Any, want: list[str]) -> None:
    f = memory.fault(op, Args(args, op), model, torch.OutOfMemoryError("CUDA out of memory.\nmore"))
    assert f.kind == memory.KIND
    for w in want:
        assert w in str(f), str(f)
    assert "more" not in str(f)


def test_train_oom_names_the_kept_kv_pool_on_cuda() -> None:
    """On cuda the slot backend's pool outlives generate calls, so a train
    step's out-of-memory advice names kv_cache_fraction too (and only then)."""
    from types import SimpleNamespace
    from typing import cast

    from marlow_torch.model import Model

    def model(engine: object, device: str) -> Model:
        ns = SimpleNamespace(train_budget=4096, slot_engine=engine, device=torch.device(device), kv_fraction=0.8)
        return cast(Model, ns)

    got = memory.knob("train_step", model(object(), "cuda"))
    assert "train_tokens (now 4096)" in got and "kv_cache_fraction, now 0.8," in got and "(e.g. to 0.6)" in got
    assert "kv_cache_fraction" not in memory.knob("train_step", model(None, "cuda"))
    assert "kv_cache_fraction" not in memory.knob("train_step", model(object(), "cpu"))
