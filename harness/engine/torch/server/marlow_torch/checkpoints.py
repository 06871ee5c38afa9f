"""Saving and loading adapters in the native engine's on-disk layout
(native/io.go, model.WriteAdapter): DIR/adapters.json names the adapters;
DIR/NAME/ holds adapter_model.safetensors (peft's tensor names),
optimizer.safetensors (the AdamW moments), adapter_config.json (peft's)
and state.json (name, seed, step); an adapter trained with a coherence
option (the regularizer, or the measuring-only EMA every run keeps) also has
coherence.safetensors, each role's gradient EMA under the peft names with
suffix .coherence_ema.ROLE."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any

import torch

from .adapters import MODULES, Adapter, Adapters
from .gojson import atomic, write_json
from .protocol import Fault

COHERENCE_FILE = "coherence.safetensors"
EMA_SUFFIX = ".coherence_ema."


def adapter_config(ad: Adapter) -> dict[str, Any]:
    """adapter_config.json as model.WriteAdapter writes it."""
    return {
        "alpha_pattern": {},
        "auto_mapping": None,
        "base_model_name_or_path": "marlow-native",
        "bias": "none",
        "fan_in_fan_out": False,
        "inference_mode": True,
        "init_lora_weights": True,
        "layers_pattern": None,
        "layers_to_transform": None,
        "lora_alpha": ad.alpha,
        "lora_dropout": 0.0,
        "modules_to_save": None,
        "peft_type": "LORA",
        "r": ad.rank,
        "rank_pattern": {},
        "revision": None,
        "target_modules": ad.targets,
        "task_type": "CAUSAL_LM",
        "use_dora": False,
        "use_rslora": False,
    }


def write_safetensors(path: str, tensors: dict[str, torch.Tensor], fmt: str) -> None:
    """Writes tensors to path atomically, with metadata format fmt."""
    from safetensors.torch import save_file

    atomic(path, lambda p: save_file(tensors, p, metadata={"format": fmt}))


def save(adapters: Adapters, d: str) -> list[str]:
    """Writes every adapter under folder d; returns their names, sorted."""
    os.makedirs(d, exist_ok=True)
    names = adapters.names()
    for n in names:
        ad = adapters.by_name[n]
        m, v = ad.moments()
        ad_dir = os.path.join(d, n)
        os.makedirs(ad_dir, exist_ok=True)
        weights = {p.save_name: p.tensor.detach().float().cpu().contiguous() for p in ad.params}
        write_safetensors(os.path.join(ad_dir, "adapter_model.safetensors"), weights, "pt")
        opt = {}
        k = 0
        for p in ad.params:
            c = p.tensor.numel()
            opt[p.save_name + ".exp_avg"] = m[k : k + c].view_as(p.tensor).cpu().contiguous()
            opt[p.save_name + ".exp_avg_sq"] = v[k : k + c].view_as(p.tensor).cpu().contiguous()
            k += c
        write_safetensors(os.path.join(ad_dir, "optimizer.safetensors"), opt, "marlow-adamw")
        if ad.ema:
            ema = {}
            for role in sorted(ad.ema):
                k = 0
                for p in ad.params:
                    c = p.tensor.numel()
                    ema[p.save_name + EMA_SUFFIX + role] = ad.ema[role][k : k + c].view_as(p.tensor).cpu().contiguous()
                    k += c
            write_safetensors(os.path.join(ad_dir, COHERENCE_FILE), ema, "marlow-coherence-ema")
        write_json(os.path.join(ad_dir, "adapter_config.json"), adapter_config(ad))
        write_json(os.path.join(ad_dir, "state.json"), {"name": ad.name, "seed": ad.seed, "step": ad.step}, sort=False)
    write_json(os.path.join(d, "adapters.json"), {"adapters": names})
    return names


@dataclass
class Saved:
    """One adapter as read from a checkpoint folder, not yet installed."""

    name: str
    rank: int
    alpha: float
    targets: list[str]
    seed: int
    step: int
    weights: dict[str, torch.Tensor]
    optimizer: dict[str, torch.Tensor]
    dir: str
    coherence: dict[str, torch.Tensor]
    """coherence.safetensors' tensors; empty when the adapter has none."""


def read_saved(d: str, n: Any) -> Saved:
    """Reads adapter n of checkpoint folder d (its files, not yet checked
    against the model)."""
    from safetensors.torch import load_file

    if not isinstance(n, str) or not n or n != os.path.basename(n) or n in (".", ".."):
        raise Fault("bad_checkpoint", "load %s: invalid adapter name %r" % (d, n))
    ad_dir = os.path.join(d, n)
    with open(os.path.join(ad_dir, "adapter_config.json")) as f:
        cfg = json.load(f)
    with open(os.path.join(ad_dir, "state.json")) as f:
        st = json.load(f)
    tm = cfg.get("target_modules")
    targets = MODULES if tm == "all-linear" else [m for m in MODULES if m in tm]
    if cfg.get("peft_type") != "LORA":
        raise Fault("bad_checkpoint", "%s: peft_type %r, want LORA" % (ad_dir, cfg.get("peft_type")))
    if int(st.get("step", 0)) < 0:
        raise Fault("bad_checkpoint", "%s: negative step %d" % (ad_dir, st["step"]))
    w = load_file(os.path.join(ad_dir, "adapter_model.safetensors"))
    opt = load_file(os.path.join(ad_dir, "optimizer.safetensors"))
    coh_path = os.path.join(ad_dir, COHERENCE_FILE)
    coh = load_file(coh_path) if os.path.exists(coh_path) else {}
    return Saved(
        n, int(cfg["r"]), float(cfg["lora_alpha"]), targets, int(st["seed"]), int(st["step"]), w, opt, ad_dir, coh
    )


def install(adapters: Adapters, s: Saved, device: torch.device) -> None:
    """Replaces (or adds) adapter s.name with the saved weights and moments."""
    if s.name in adapters.by_name:
        adapters.delete(s.name)
    ad = adapters.create(s.name, s.rank, s.alpha, s.targets, s.seed)
    want = {p.save_name: tuple(p.tensor.shape) for p in ad.params}
    w, opt = s.weights, s.optimizer
    extra = sorted(set(w) - set(want))
    if extra or len(w) != len(want):
        raise Fault(
            "bad_checkpoint",
            "%s: adapter holds %d tensors, expected %d (unexpected: %s)" % (s.dir, len(w), len(want), extra[:3]),
        )
    ms: list[torch.Tensor] = []
    vs: list[torch.Tensor] = []
    with torch.no_grad():
        for p in ad.params:
            key = p.save_name
            if key not in w or tuple(w[key].shape) != want[key]:
                msg = "%s: tensor %s missing or not of shape %s" % (s.dir, key, list(want[key]))
                raise Fault("bad_checkpoint", msg)
            p.tensor.copy_(w[key].float().to(device))
            for lst, suf in ((ms, ".exp_avg"), (vs, ".exp_avg_sq")):
                t = opt.get(key + suf)
                if t is None or tuple(t.shape) != want[key]:
                    raise Fault(
                        "bad_checkpoint",
                        "%s: optimizer tensor %s missing or not of shape %s" % (s.dir, key + suf, list(want[key])),
                    )
                lst.append(t.float().reshape(-1))
    if len(opt) != 2 * len(want):
        raise Fault("bad_checkpoint", "%s: optimizer holds %d tensors, expected %d" % (s.dir, len(opt), 2 * len(want)))
    ad.m = torch.cat(ms).to(device)
    ad.v = torch.cat(vs).to(device)
    ad.step = s.step
    ad.ema = read_ema(s, ad, want, device)


def read_ema(s: Saved, ad: Adapter, want: dict[str, tuple[int, ...]], device: torch.device) -> dict[str, torch.Tensor]:
    """The coherence EMAs of a saved adapter, flat in native order, by role."""
    by_role: dict[str, dict[str, torch.Tensor]] = {}
    for name, t in s.coherence.items():
        base, sep, role = name.rpartition(EMA_SUFFIX)
        if not sep or not role or base not in want or tuple(t.shape) != want[base]:
            raise Fault("bad_checkpoint", "%s: unexpected coherence tensor %s" % (s.dir, name))
        by_role.setdefault(role, {})[base] = t
    out: dict[str, torch.Tensor] = {}
    for role in sorted(by_role):
        ts = by_role[role]
        if len(ts) != len(want):
            msg = "%s: coherence EMA of role %s holds %d tensors, expected %d" % (s.dir, role, len(ts), len(want))
            raise Fault("bad_checkpoint", msg)
        out[role] = torch.cat([ts[p.save_name].float().reshape(-1) for p in ad.params]).to(device)
    return out


def load(adapters: Adapters, d: str) -> list[str]:
    """Reads every adapter that d/adapters.json names, then installs them
    (replacing adapters of the same names); returns the names."""
    with open(os.path.join(d, "adapters.json")) as f:
        names = json.load(f)["adapters"]
    if not isinstance(names, list):
        raise Fault("bad_checkpoint", "%s: adapters.json's adapters is %s, want a list" % (d, type(names).__name__))
    saved = [read_saved(d, n) for n in names]
    for s in saved:
        install(adapters, s, adapters.model.device)
    return names
