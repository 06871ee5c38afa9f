"""The slot backend's own Qwen3 forward over the loaded transformers
weights and the peft adapters' tensors: RMSNorm, q/k RMSNorm per head,
rotary embedding with the checkpoint's frequencies, grouped-query
attention, SwiGLU and the (tied) head in float32. Prefill runs one prompt;
a decode step runs one token of each of B rows against the paged KV pool
(kvpool.py). Logits are only ever computed for the rows being sampled."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import torch
import torch.nn.functional as F  # noqa: N812

from .kvpool import ATTENTIONS, KVPool, PoolShape
from .protocol import Fault

if TYPE_CHECKING:
    from .adapters import Adapters
    from .model import Model

GROUPS = [("q_proj", "k_proj", "v_proj"), ("gate_proj", "up_proj")]
"""Linear layers that read one input: their LoRA A run as one product."""

LINEARS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]


@dataclass
class Lora:
    """The LoRA factors of one linear layer over several adapters: A of all
    of them stacked by rank ([R, in]), B side by side ([out, R]) and each
    adapter's rank span with its scaling."""

    a: torch.Tensor
    b: torch.Tensor
    spans: dict[str, tuple[int, int, float]]


@dataclass
class Layer:
    """One decoder layer's weights (the base layers' own tensors, not copies)."""

    ln1: torch.Tensor
    ln2: torch.Tensor
    q_norm: torch.Tensor
    k_norm: torch.Tensor
    w: dict[str, torch.Tensor]
    lora: dict[str, Lora] = field(default_factory=dict)
    groups: dict[tuple[str, ...], tuple[torch.Tensor, list[int]]] = field(default_factory=dict)
    """The LoRA A of modules that read one input (q/k/v, gate/up) in one
    buffer ([sum of R, in]) with each module's first row; each module's
    Lora.a is a view into it."""


def base_weight(mod: Any) -> torch.Tensor:
    """The frozen weight of a linear layer, inside peft's wrapper when wrapped."""
    w: torch.Tensor = getattr(mod, "base_layer", mod).weight
    return w


class Qwen3Decoder:
    """The forward passes of the slot backend over the adapters named: their
    LoRA factors stacked once into buffers of their own, which refresh
    refills from the adapters' current tensors (after each optimizer step).

    lora_mode "mask" applies every adapter of a mixed batch at once (the
    stacked A and B, a per-row scale mask); "split" runs each adapter's rows
    as a separate pair of products. A batch of one adapter always takes its
    own slice of A and B."""

    def __init__(
        self, model: Model, adapters: Adapters, names: Sequence[str], lora_mode: str = "mask", attention: str = "gather"
    ) -> None:
        base = model.base()
        cfg = base.config
        if getattr(cfg, "use_sliding_window", False):
            raise Fault("bad_checkpoint", "the slot backend has no sliding-window attention; use gen_backend reference")
        inner = base.model
        self.device = model.device
        self.dtype = model.dtype
        self.heads = int(cfg.num_attention_heads)
        self.kv_heads = int(cfg.num_key_value_heads)
        self.head_dim = int(getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads)
        self.scale = self.head_dim**-0.5
        self.eps = float(cfg.rms_norm_eps)
        if getattr(cfg, "hidden_act", "silu") != "silu":
            raise Fault("bad_checkpoint", "hidden_act %r, the slot backend has silu only" % cfg.hidden_act)
        self.embed: torch.Tensor = inner.embed_tokens.weight
        self.norm: torch.Tensor = inner.norm.weight
        # the float32 head the model keeps once for every backend (Model.head_weight),
        # not a fresh copy per generate call
        head = model.head_weight()
        self.head: torch.Tensor = head if head.dtype == torch.float32 else head.float()
        self.head_t: torch.Tensor | None = self.head.t().contiguous() if self.device.type == "cpu" else None
        """On the CPU, a [D, V] copy of the head that logits multiplies by
        directly: MKL's product with the [V, D] head read transposed was
        12% slower over a whole generate call at the published 0.6B widths
        (vocab 151,936, batches of 1-64 rows; far slower below 16 rows), at
        the price of a second head in memory (622 MB at 0.6B) while the
        engine lives; the slot backend is not the CPU's default."""
        self.inv_freq: torch.Tensor = inner.rotary_emb.inv_freq.float()
        self.rope_scale = float(getattr(inner.rotary_emb, "attention_scaling", 1.0))
        if lora_mode not in ("mask", "split"):
            raise ValueError("lora_mode %r is not mask or split" % lora_mode)
        self.lora_mode = lora_mode
        if attention not in ATTENTIONS:
            raise ValueError("attention %r is not one of %s" % (attention, sorted(ATTENTIONS)))
        self.attention = ATTENTIONS[attention]
        self.layers: list[Layer] = []
        for hl in inner.layers:
            at, mlp = hl.self_attn, hl.mlp
            mods = {"q_proj": at.q_proj, "k_proj": at.k_proj, "v_proj": at.v_proj, "o_proj": at.o_proj}
            mods.update({"gate_proj": mlp.gate_proj, "up_proj": mlp.up_proj, "down_proj": mlp.down_proj})
            self.layers.append(
                Layer(
                    ln1=hl.input_layernorm.weight,
                    ln2=hl.post_attention_layernorm.weight,
                    q_norm=at.q_norm.weight,
                    k_norm=at.k_norm.weight,
                    w={m: base_weight(mods[m]) for m in LINEARS},
                )
            )
        self._stack_loras(model, adapters, [n for n in names if n])

    def _stack_loras(self, model: Model, adapters: Adapters, names: Sequence[str]) -> None:
        parts: dict[tuple[int, str], list[tuple[str, torch.Tensor, torch.Tensor, float]]] = {}
        for name in sorted(set(names)):
            ad = adapters.lookup(name)
            if ad is None:
                continue
            scaling = ad.alpha / ad.rank
            got: dict[tuple[int, str], dict[bool, torch.Tensor]] = {}
            for p in ad.params:
                got.setdefault((p.layer, p.module), {})[p.is_b] = p.tensor
            for key, ab in got.items():
                parts.setdefault(key, []).append((name, ab[False], ab[True], scaling))
        self._sources: list[tuple[Lora, list[tuple[torch.Tensor, torch.Tensor, int, int]]]] = []
        for (layer, mod), lst in parts.items():
            spans: dict[str, tuple[int, int, float]] = {}
            src = []
            r0 = 0
            for name, a, b, s in lst:
                spans[name] = (r0, r0 + a.shape[0], s)
                src.append((a, b, r0, r0 + a.shape[0]))
                r0 += a.shape[0]
            a_cat = torch.cat([a.detach() for _, a, _, _ in lst], dim=0)
            b_cat = torch.cat([b.detach() for _, _, b, _ in lst], dim=1)
            lo = Lora(a_cat, b_cat, spans)
            self.layers[layer].lora[mod] = lo
            self._sources.append((lo, src))
        for ly in self.layers:
            for mods in GROUPS:
                if any(m not in ly.lora for m in mods):
                    continue
                members = [ly.lora[m] for m in mods]
                a_all = torch.cat([x.a for x in members], dim=0)
                starts, r0 = [], 0
                for x in members:
                    starts.append(r0)
                    x.a = a_all[r0 : r0 + x.a.shape[0]]
                    r0 += x.a.shape[0]
                ly.groups[mods] = (a_all, starts)
        self.adapter_layout = layout(adapters, names)

    def refresh(self) -> None:
        """Copies the adapters' current tensors into the stacked buffers in
        place (after an optimizer step: the buffers, and every graph that
        reads them, stay where they are)."""
        with torch.no_grad():
            for lo, src in self._sources:
                for a, b, r0, r1 in src:
                    lo.a[r0:r1].copy_(a)
                    lo.b[:, r0:r1].copy_(b)

    def pool_shape(self) -> PoolShape:
        """The KV pool geometry of this model."""
        return PoolShape(len(self.layers), self.kv_heads, self.head_dim, self.dtype)

    def _rms(self, x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        dt = x.dtype
        h = F.rms_norm(x.float(), (x.shape[-1],), eps=self.eps)
        return w * h.to(dt)

    def _rope(self, pos: torch.Tensor, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """cos and sin of the positions ([n, 1, hd], broadcast over heads)."""
        freqs = pos.float().unsqueeze(-1) * self.inv_freq.unsqueeze(0)
        emb = torch.cat((freqs, freqs), dim=-1)
        cos = (emb.cos() * self.rope_scale).to(x.dtype).unsqueeze(1)
        return cos, (emb.sin() * self.rope_scale).to(x.dtype).unsqueeze(1)

    @staticmethod
    def _rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        h = x.shape[-1] // 2
        rot = torch.cat((-x[..., h:], x[..., :h]), dim=-1)
        return x * cos + rot * sin

    def _linear(self, layer: Layer, mod: str, x: torch.Tensor, rows: RowAdapters) -> torch.Tensor:
        y = F.linear(x, layer.w[mod])
        lo = layer.lora.get(mod)
        if lo is None or not rows.any:
            return y
        xf = x.float()
        if rows.single is not None or self.lora_mode == "mask":
            d = self._delta(lo, xf, None, rows)
            return y if d is None else y + d.to(y.dtype)
        out = y.float()
        for name, idx in rows.groups:
            span = lo.spans.get(name)
            if span is None:
                continue
            r0, r1, s = span
            d = F.linear(F.linear(xf[idx], lo.a[r0:r1]), lo.b[:, r0:r1]) * s
            out = out.index_add(0, idx, d)
        return out.to(y.dtype)

    def _delta(self, lo: Lora, xf: torch.Tensor, h: torch.Tensor | None, rows: RowAdapters) -> torch.Tensor | None:
        """The float32 LoRA term of one module for one adapter (rows.single)
        or a mixed batch in mask form; h: xf's product with lo.a when
        already computed (a group's)."""
        if rows.single is not None:
            span = lo.spans.get(rows.single)
            if span is None:
                return None
            r0, r1, s = span
            a = F.linear(xf, lo.a[r0:r1]) if h is None else h[:, r0:r1]
            return F.linear(a, lo.b[:, r0:r1]) * s
        a = F.linear(xf, lo.a) if h is None else h
        return F.linear(a * rows.mask(lo), lo.b)

    def _group(self, layer: Layer, mods: tuple[str, ...], x: torch.Tensor, rows: RowAdapters) -> list[torch.Tensor]:
        """The outputs of linear layers that read x, with their LoRA A as one
        product (input cast once) when they have a group and the batch runs
        one adapter or the mask form."""
        g = layer.groups.get(mods)
        if g is None or not rows.any or (rows.single is None and self.lora_mode != "mask"):
            return [self._linear(layer, m, x, rows) for m in mods]
        a_all, starts = g
        xf = x.float()
        h = F.linear(xf, a_all)
        out = []
        for m, r0 in zip(mods, starts):
            y = F.linear(x, layer.w[m])
            lo = layer.lora[m]
            d = self._delta(lo, xf, h[:, r0 : r0 + lo.a.shape[0]], rows)
            out.append(y if d is None else y + d.to(y.dtype))
        return out

    def _mlp(self, layer: Layer, x: torch.Tensor, rows: RowAdapters) -> torch.Tensor:
        g, u = self._group(layer, ("gate_proj", "up_proj"), x, rows)
        return self._linear(layer, "down_proj", F.silu(g) * u, rows)

    def _qkv(
        self, layer: Layer, x: torch.Tensor, rope: tuple[torch.Tensor, torch.Tensor], rows: RowAdapters
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        n = x.shape[0]
        q, k, v = self._group(layer, ("q_proj", "k_proj", "v_proj"), x, rows)
        q = self._rms(q.view(n, self.heads, self.head_dim), layer.q_norm)
        k = self._rms(k.view(n, self.kv_heads, self.head_dim), layer.k_norm)
        cos, sin = rope
        return self._rotate(q, cos, sin), self._rotate(k, cos, sin), v.view(n, self.kv_heads, self.head_dim)

    def logits(self, h: torch.Tensor) -> torch.Tensor:
        """float32 logits of final hidden states [B, D] (after the last norm)."""
        x = self._rms(h, self.norm).float()
        if self.head_t is not None:
            return torch.mm(x, self.head_t)
        return F.linear(x, self.head)

    def prefill(self, tokens: Sequence[int], adapter: str, pool: KVPool, slots: torch.Tensor) -> torch.Tensor:
        """Runs one prompt under adapter, storing its keys and values at
        slots ([n], flat pool slots of positions 0..n-1), and returns the
        float32 logits [V] of its last position."""
        return self.prefill_many([tokens], [adapter], pool, slots)[0]

    def prefill_many(
        self, prompts: Sequence[Sequence[int]], adapters: Sequence[str], pool: KVPool, slots: torch.Tensor
    ) -> torch.Tensor:
        """Runs prompts (each under its adapter) as one packed forward: every
        projection and MLP over all their tokens at once, attention causal
        within each prompt. slots ([sum of lengths]) are the flat pool slots
        of the prompts' positions, one prompt after the other. Returns the
        float32 logits [len(prompts), V] of each prompt's last position."""
        lens = [len(p) for p in prompts]
        ids = torch.tensor([t for p in prompts for t in p], dtype=torch.long, device=self.device)
        pos = torch.cat([torch.arange(n) for n in lens]).to(self.device)
        if len(set(adapters)) == 1:
            rows = RowAdapters.one(adapters[0])
        else:
            rows = RowAdapters([a for a, n in zip(adapters, lens) for _ in range(n)], self.device)
        T = ids.shape[0]
        x = self.embed[ids]
        rope = self._rope(pos, x)
        for li, layer in enumerate(self.layers):
            h = self._rms(x, layer.ln1)
            q, k, v = self._qkv(layer, h, rope, rows)
            pool.write(li, slots, k, v)
            o = torch.empty_like(q)
            off = 0
            for n in lens:
                seg = slice(off, off + n)
                o[seg] = (
                    F.scaled_dot_product_attention(
                        q[seg].transpose(0, 1).unsqueeze(0),
                        k[seg].transpose(0, 1).unsqueeze(0),
                        v[seg].transpose(0, 1).unsqueeze(0),
                        is_causal=True,
                        scale=self.scale,
                        enable_gqa=True,
                    )
                    .squeeze(0)
                    .transpose(0, 1)
                )
                off += n
            x = x + self._linear(layer, "o_proj", o.reshape(T, self.heads * self.head_dim), rows)
            x = x + self._mlp(layer, self._rms(x, layer.ln2), rows)
        last = torch.tensor([sum(lens[: i + 1]) - 1 for i in range(len(lens))], device=self.device)
        return self.logits(x[last])

    def decode(
        self,
        tokens: torch.Tensor,
        pos: torch.Tensor,
        rows: RowAdapters,
        pool: KVPool,
        tables: torch.Tensor,
        slots: torch.Tensor,
        attend: Any = None,
    ) -> torch.Tensor:
        """One decode step of B rows: tokens [B] at positions pos [B], their
        keys and values stored at slots [B], attention over each row's blocks
        (tables [B, nb]) by attend (a kvpool attention already updated for
        this step, a bucket's) or one built for the step; returns float32
        logits [B, V]."""
        B = tokens.shape[0]
        x = self.embed[tokens]
        if attend is None:
            attend = self.attention(pool, tables, pos + 1, self.scale)
        rope = self._rope(pos, x)  # once per step, every layer's
        for li, layer in enumerate(self.layers):
            h = self._rms(x, layer.ln1)
            q, k, v = self._qkv(layer, h, rope, rows)
            pool.write(li, slots, k, v)
            o = attend(li, q).reshape(B, self.heads * self.head_dim)
            x = x + self._linear(layer, "o_proj", o, rows)
            x = x + self._mlp(layer, self._rms(x, layer.ln2), rows)
        return self.logits(x)


def layout(adapters: Adapters, names: Sequence[str]) -> tuple[tuple[str, int, float, tuple[str, ...]], ...]:
    """What fixes the shapes of a decoder's stacked LoRA factors: each named
    adapter's name, rank, alpha and target modules."""
    out = []
    for name in sorted({n for n in names if n}):
        ad = adapters.lookup(name)
        if ad is not None:
            out.append((name, ad.rank, ad.alpha, tuple(sorted({p.module for p in ad.params}))))
    return tuple(out)


class RowAdapters:
    """The adapter of each row of a batch: one name when all rows share it,
    else the rows of each adapter (and their scale mask for lora_mode mask)."""

    def __init__(self, names: Sequence[str], device: torch.device) -> None:
        self.names = list(names)
        distinct = sorted(set(self.names))
        self.single: str | None = distinct[0] if len(distinct) == 1 else None
        self.any = any(distinct)
        self.device = device
        self.groups: list[tuple[str, torch.Tensor]] = []
        if self.single is None:
            for name in distinct:
                if name:
                    idx = [i for i, n in enumerate(self.names) if n == name]
                    self.groups.append((name, torch.tensor(idx, dtype=torch.long, device=device)))
        self._masks: dict[int, torch.Tensor] = {}
        """Masks by the hash of a Lora's spans (one per distinct adapter layout)."""

    @classmethod
    def one(cls, name: str) -> RowAdapters:
        """A batch whose rows all run under name."""
        r = cls.__new__(cls)
        r.names, r.single, r.any, r.groups, r._masks = [], name, name != "", [], {}
        return r

    def mask(self, lo: Lora) -> torch.Tensor:
        """[B, R] float32: the scaling of a row's adapter on its own ranks, zero elsewhere."""
        key = hash(tuple(sorted(lo.spans.items())))
        m = self._masks.get(key)
        if m is None:
            R = lo.a.shape[0]
            mm = torch.zeros((len(self.names), R), dtype=torch.float32)
            for i, n in enumerate(self.names):
                span = lo.spans.get(n)
                if span is not None:
                    mm[i, span[0] : span[1]] = span[2]
            m = mm.to(self.device)
            self._masks[key] = m
        return m
