"""LoRA adapters: one peft adapter per marlow adapter on the frozen base
model, initialised like the native engine (adapter.go), with their AdamW
state."""

from __future__ import annotations

import contextlib
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from .keyed import PURPOSE_LORA, hash_key, uniform_at_array
from .model import Model
from .protocol import Fault

MODULES = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
"""The LoRA target modules in the native engine's order."""
MODULE_PATHS = {
    "q_proj": "self_attn.q_proj",
    "k_proj": "self_attn.k_proj",
    "v_proj": "self_attn.v_proj",
    "o_proj": "self_attn.o_proj",
    "gate_proj": "mlp.gate_proj",
    "up_proj": "mlp.up_proj",
    "down_proj": "mlp.down_proj",
}
PLACEHOLDER = "__marlow_placeholder__"
"""An adapter that keeps peft from losing its last adapter during a load."""


@dataclass
class Param:
    """One LoRA matrix: where it lives and its name in the saved layout."""

    save_name: str
    """Its tensor name in adapter_model.safetensors (peft's, without the adapter name)."""
    layer: int
    module: str
    is_b: bool
    tensor: torch.nn.Parameter


@dataclass
class Adapter:
    """A marlow adapter: its LoRA matrices in native order (layer, module,
    A then B) and its AdamW moments, flat fp32 in that order."""

    name: str
    rank: int
    alpha: float
    targets: list[str]
    seed: int
    params: list[Param] = field(default_factory=list)
    m: torch.Tensor | None = None
    v: torch.Tensor | None = None
    step: int = 0
    ema: dict[str, torch.Tensor] = field(default_factory=dict)
    """The EMA of each role's past gradients (flat fp32, native order), by
    role, of the coherence option (regularizer or measuring-only); empty
    until a step with one."""

    def tensors(self) -> list[torch.nn.Parameter]:
        """The parameters in native order."""
        return [p.tensor for p in self.params]

    def numel(self) -> int:
        """The number of trainable values."""
        return sum(p.tensor.numel() for p in self.params)

    def moments(self) -> tuple[torch.Tensor, torch.Tensor]:
        """The AdamW moments (m, v)."""
        if self.m is None or self.v is None:
            raise Fault("internal", "adapter %r has no optimizer state" % self.name)
        return self.m, self.v

    def set_flat(self, flat: torch.Tensor) -> None:
        """Copies a flat vector in native order into the parameters."""
        k = 0
        with torch.no_grad():
            for p in self.params:
                n = p.tensor.numel()
                p.tensor.copy_(flat[k : k + n].view_as(p.tensor))
                k += n


def lora_targets(name: str, targets: Sequence[str]) -> list[str]:
    """The target modules in native order (all when targets is empty)."""
    bad = [t for t in targets if t not in MODULES]
    if bad:
        raise Fault("bad_request", "adapter %r: unknown LoRA targets %s (want some of %s)" % (name, bad, MODULES))
    return [m for m in MODULES if not targets or m in targets]


class Adapters:
    """The adapters of one open model, by name ("" is the base policy)."""

    def __init__(self, model: Model) -> None:
        self.model = model
        self.by_name: dict[str, Adapter] = {}

    def names(self) -> list[str]:
        """The adapter names, sorted."""
        return sorted(self.by_name)

    def lookup(self, name: str) -> Adapter | None:
        """The adapter name, None for the base policy ""."""
        if name == "":
            return None
        ad = self.by_name.get(name)
        if ad is None:
            raise Fault("bad_request", "unknown adapter %r (have %s)" % (name, sorted(self.by_name)))
        return ad

    def add(self, name: str, rank: int, alpha: float, targets: Sequence[str], seed: int) -> Adapter:
        """A new adapter with A from the keyed stream and B = 0."""
        if not name:
            raise Fault("bad_request", 'adapter name is empty ("" is the base policy)')
        if name in self.by_name:
            raise Fault("bad_request", "adapter %r already exists" % name)
        ad = self.create(name, rank, alpha, targets, seed)
        init_lora(ad)
        return ad

    def create(self, name: str, rank: int, alpha: float, targets: Sequence[str], seed: int) -> Adapter:
        """Adds a peft LoRA adapter name (peft's own initialisation) with
        fp32 parameters and zero moments."""
        from peft import LoraConfig, get_peft_model

        md = self.model
        if rank <= 0:
            raise Fault("bad_request", "adapter %r: rank %d must be positive" % (name, rank))
        if not (alpha > 0) or math.isinf(alpha):
            raise Fault("bad_request", "adapter %r: alpha %r must be positive and finite" % (name, alpha))
        mods = lora_targets(name, targets)
        lc = LoraConfig(
            r=rank,
            lora_alpha=alpha,
            target_modules=list(mods),
            lora_dropout=0.0,
            bias="none",
            init_lora_weights=True,
            task_type="CAUSAL_LM",
        )
        if not md.peft:
            md.hf = get_peft_model(md.hf, lc, adapter_name=name)
            md.peft = True
        else:
            md.hf.add_adapter(name, lc)
        if PLACEHOLDER in md.hf.peft_config:
            md.hf.set_adapter(name)
            md.hf.delete_adapter(PLACEHOLDER)
        ad = Adapter(name, rank, alpha, mods, seed)
        named = dict(md.hf.named_parameters())
        for layer in range(md.layers):
            for m in mods:
                for ab in ("A", "B"):
                    key = "base_model.model.model.layers.%d.%s.lora_%s.%s.weight" % (layer, MODULE_PATHS[m], ab, name)
                    p = named.get(key)
                    if p is None:
                        raise Fault("internal", "peft did not create %s" % key)
                    if p.dtype != torch.float32:
                        p.data = p.data.float()
                    save = "base_model.model.model.layers.%d.%s.lora_%s.weight" % (layer, MODULE_PATHS[m], ab)
                    ad.params.append(Param(save, layer, m, ab == "B", p))
        n = ad.numel()
        ad.m = torch.zeros(n, dtype=torch.float32, device=md.device)
        ad.v = torch.zeros(n, dtype=torch.float32, device=md.device)
        self.by_name[name] = ad
        return ad

    def delete(self, name: str) -> None:
        """Removes adapter name from peft (peft keeps at least one adapter, so
        a placeholder is added first when name is the last one)."""
        hf = self.model.hf
        if len(self.by_name) == 1:
            from peft import LoraConfig

            hf.add_adapter(PLACEHOLDER, LoraConfig(r=1, lora_alpha=1, target_modules=["q_proj"], lora_dropout=0.0))
            hf.set_adapter(PLACEHOLDER)
        elif hf.active_adapters == [name]:
            hf.set_adapter(next(n for n in self.by_name if n != name))
        hf.delete_adapter(name)
        del self.by_name[name]

    def use(self, name: str) -> contextlib.AbstractContextManager[Any]:
        """A context manager running the model under adapter name ("" = base)."""
        hf = self.model.hf
        if name == "":
            if not self.model.peft:
                return contextlib.nullcontext()
            cm: contextlib.AbstractContextManager[Any] = hf.disable_adapter()
            return cm
        hf.set_adapter(name)
        active = hf.active_adapters
        if list(active) != [name]:
            raise Fault("internal", "asked for adapter %r but peft has %r active" % (name, active))
        return contextlib.nullcontext()


def init_lora(ad: Adapter) -> None:
    """A from the stream keyed by (seed, LoRA, layer, module) with bound
    1/sqrt(fan in); B = 0."""
    with torch.no_grad():
        for p in ad.params:
            if p.is_b:
                p.tensor.zero_()
                continue
            rank, fan_in = p.tensor.shape
            key = hash_key(ad.seed, PURPOSE_LORA, p.layer, MODULES.index(p.module))
            bound = 1.0 / math.sqrt(fan_in)
            vals = (bound * uniform_at_array(key, rank * fan_in)).astype(np.float32)
            p.tensor.copy_(torch.from_numpy(vals.reshape(rank, fan_in)))
