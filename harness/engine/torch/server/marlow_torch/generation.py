"""Generation: the requests of one generate call, their grouping into waves
and the batched KV-cache backend that samples a wave token by token with
the shared sampling rule (sampling.py)."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .protocol import Args, Fault, b64_floats, b64_ints

if TYPE_CHECKING:
    from .adapters import Adapters
    from .model import Model

FINISH_STOP = "stop"
FINISH_LENGTH = "length"


@dataclass
class GenRequest:
    """One request being generated and what it has produced so far."""

    index: int
    """Its position in the call's requests."""
    adapter: str
    prompt: list[int]
    max_new: int
    temperature: float
    ignore_end_of_turn: bool
    seed: int
    ids: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    finish: str = ""

    def cost(self) -> int:
        """Its tokens in a wave: prompt and new tokens."""
        return len(self.prompt) + self.max_new


def parse_request(i: int, r: Args, encode: Callable[[list[dict[str, Any]]], list[int]], max_pos: int) -> GenRequest:
    """Request i of a generate call, its prompt encoded and checked against
    the model's context."""
    t = r.need_float("temperature")
    if not (t > 0) or math.isinf(t):
        raise Fault("bad_request", "request %d: temperature %r must be positive and finite" % (i, t))
    mx = r.need_int("max_new_tokens")
    if mx < 0:
        raise Fault("bad_request", "request %d: max new tokens %d is negative" % (i, mx))
    prompt = encode(r.need_list("messages"))
    if not prompt:
        raise Fault("bad_request", "request %d: empty prompt" % i)
    if len(prompt) + mx > max_pos:
        raise Fault(
            "bad_request",
            "request %d: prompt of %d tokens + %d new tokens exceeds max_position_embeddings %d"
            % (i, len(prompt), mx, max_pos),
        )
    return GenRequest(
        index=i,
        adapter=r.get("adapter", ""),
        prompt=prompt,
        max_new=mx,
        temperature=t,
        ignore_end_of_turn=bool(r.get("ignore_end_of_turn", False)),
        seed=r.need_int("seed"),
        finish=FINISH_LENGTH if mx == 0 else "",
    )


def plan_waves(seqs: Sequence[GenRequest], budget: int) -> list[list[int]]:
    """Indices of seqs grouped into waves: requests of one adapter go
    together, adapters in name order (ties in request order), and a wave's
    prompt and new tokens fit budget unless one request alone exceeds it."""
    order = sorted(range(len(seqs)), key=lambda k: (seqs[k].adapter, k))
    waves: list[list[int]] = []
    wave: list[int] = []
    used, cur = 0, ""
    for k in order:
        s = seqs[k]
        cost = s.cost()
        if wave and (s.adapter != cur or used + cost > budget):
            waves.append(wave)
            wave, used = [], 0
        wave.append(k)
        used += cost
        cur = s.adapter
    if wave:
        waves.append(wave)
    return waves


def completion(s: GenRequest, decode: Callable[[list[int]], str]) -> dict[str, Any]:
    """The reply entry of a generated sequence (the text without its stop token)."""
    text_ids = s.ids[:-1] if s.finish == FINISH_STOP else s.ids
    return {
        "prompt_ids": b64_ints(s.prompt),
        "ids": b64_ints(s.ids),
        "text": decode(text_ids),
        "logprobs": b64_floats(s.logprobs),
        "finish": s.finish,
    }


Progress = Callable[..., None]
"""Sends a progress frame (at most one a second) with its keyword arguments."""

Backend = Callable[["Model", "Adapters", Sequence[GenRequest], str, Progress], None]
"""A generation backend: samples every request of one wave (all of one
adapter, named by the str) in place, with sampling.sample_row at the keys
of sampling.sample_key, until each stops or reaches its length."""


def generate(
    model: Model, adapters: Adapters, args: Args, progress: Progress, backend: Backend | None = None
) -> dict[str, Any]:
    """The generate call: every request sampled, in waves, by backend
    (sample_wave, the KV-cache backend, when None), or by the slot backend
    (slots.py) in one queue when backend is None and the model's
    gen_backend is "slots"."""
    run = backend or sample_wave
    seqs = []
    for i, raw in enumerate(args.need_list("requests")):
        if not isinstance(raw, dict):
            raise Fault("bad_request", "request %d is %s, want an object" % (i, type(raw).__name__))
        r = Args(raw, "generate: request %d" % i)
        adapters.lookup(r.get("adapter", ""))
        seqs.append(parse_request(i, r, model.encode_chat, model.max_pos))
    if backend is None and model.gen_backend == "slots":
        from .slots import slot_generate

        st = slot_generate(model, adapters, seqs, progress, model.slot_options())
        st.add_to(model.gen_pool, len(seqs))
        return {"completions": [completion(s, model.decode) for s in seqs]}
    for wave in plan_waves(seqs, model.gen_budget):
        live = [seqs[j] for j in wave]
        run(model, adapters, live, live[0].adapter, progress)
    return {"completions": [completion(s, model.decode) for s in seqs]}


def sample_wave(model: Model, adapters: Adapters, wave: Sequence[GenRequest], adapter: str, progress: Progress) -> None:
    """Generation backend: batched KV-cache sampling of one adapter's
    requests, left-padded, one token of every live sequence per step."""
    import torch
    from transformers import DynamicCache

    from .sampling import sample_key, sample_row

    live = [s for s in wave if s.max_new > 0]
    if not live:
        return
    B = len(live)
    P = max(len(s.prompt) for s in live)
    ids = torch.zeros((B, P), dtype=torch.long)
    mask = torch.zeros((B, P), dtype=torch.long)
    for b, s in enumerate(live):
        n = len(s.prompt)
        ids[b, P - n :] = torch.tensor(s.prompt, dtype=torch.long)
        mask[b, P - n :] = 1
    ids, mask = ids.to(model.device), mask.to(model.device)
    pos = (mask.cumsum(-1) - 1).clamp(min=0)
    lens = [len(s.prompt) for s in live]
    base = model.base()
    inner = base.model
    cache = DynamicCache()
    with torch.no_grad(), adapters.use(adapter):
        out = inner(input_ids=ids, attention_mask=mask, position_ids=pos, past_key_values=cache, use_cache=True)
        h = out.last_hidden_state[:, -1, :]
        done = [False] * B
        while True:
            logits = model.logits(h).cpu().numpy()
            nxt = []
            for b, s in enumerate(live):
                if done[b]:
                    nxt.append(0)
                    continue
                tok, lp = sample_row(logits[b], s.temperature, sample_key(s.seed, len(s.ids)))
                s.ids.append(tok)
                s.logprobs.append(lp)
                if tok in model.stop_ids and not s.ignore_end_of_turn:
                    done[b], s.finish = True, FINISH_STOP
                elif len(s.ids) >= s.max_new:
                    done[b], s.finish = True, FINISH_LENGTH
                nxt.append(tok)
            if all(done):
                return
            progress(op="generate", tokens=sum(len(s.ids) for s in live))
            step = torch.tensor(nxt, dtype=torch.long, device=model.device).unsqueeze(1)
            mask = torch.cat([mask, torch.ones((B, 1), dtype=mask.dtype, device=model.device)], dim=1)
            p = torch.tensor(
                [lens[b] + len(live[b].ids) - 1 for b in range(B)], dtype=torch.long, device=model.device
            ).unsqueeze(1)
            out = inner(
                input_ids=step, attention_mask=mask, position_ids=p, past_key_values=out.past_key_values, use_cache=True
            )
            h = out.last_hidden_state[:, -1, :]
