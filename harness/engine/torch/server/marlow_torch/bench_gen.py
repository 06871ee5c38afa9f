"""A generation benchmark of both backends on a real-width Qwen3 with random
weights (the published Qwen3-0.6B shape, fewer layers), no tokenizer needed:

    python -m marlow_torch.bench_gen --backend slots --layers 2 --requests 64

It prints generated tok/s for a batch of requests with a spread of
completion lengths (rows stopping at different steps), the pool's occupancy
(slots) and the peak memory. A benchmark, not a test: figures depend on the
machine, which the caller names."""

from __future__ import annotations

import argparse
import copy
import resource
import time
from typing import Any

import torch

from .adapters import Adapters
from .generation import GenRequest, plan_waves, sample_wave
from .model import Model

QWEN3_06B: dict[str, Any] = {
    "hidden_size": 1024,
    "intermediate_size": 3072,
    "num_attention_heads": 16,
    "num_key_value_heads": 8,
    "head_dim": 128,
    "rope_theta": 1000000.0,
    "rms_norm_eps": 1e-6,
    "vocab_size": 151936,
    "max_position_embeddings": 40960,
    "tie_word_embeddings": True,
}
"""The published Qwen3-0.6B config.json's shape."""


def random_model(layers: int, device: str, dtype: torch.dtype, budget: int, seed: int = 1) -> Model:
    """A Qwen3-0.6B-wide model of layers layers with random weights."""
    from transformers import Qwen3Config, Qwen3ForCausalLM

    torch.manual_seed(seed)
    cfg = Qwen3Config(num_hidden_layers=layers, **QWEN3_06B)
    hf = Qwen3ForCausalLM(cfg).to(device=device, dtype=dtype).eval()
    for p in hf.parameters():
        p.requires_grad_(False)
    return Model(
        hf=hf,
        device=torch.device(device),
        dtype=dtype,
        dtype_name=str(dtype),
        layers=layers,
        vocab=cfg.vocab_size,
        max_pos=cfg.max_position_embeddings,
        tokenizer=None,
        template=None,
        gen_budget=budget,
        train_budget=1 << 14,
        grad_ckpt=False,
        cuda_device="",
        stop_ids={151645},
    )


def requests(n: int, prompt: int, per_prompt: int, max_new: int) -> list[GenRequest]:
    """n requests, per_prompt of each prompt of `prompt` random tokens, half on
    the adapter "bench", new tokens spread from max_new / 4 to max_new."""
    g = torch.Generator().manual_seed(3)
    out = []
    p: list[int] = []
    for i in range(n):
        if i % per_prompt == 0:
            p = torch.randint(0, 151000, (prompt,), generator=g).tolist()
        new = max_new // 4 + (i * (max_new - max_new // 4)) // max(1, n - 1)
        out.append(GenRequest(i, ["", "bench"][(i // per_prompt) % 2], list(p), new, 1.0, True, i))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--backend", choices=["reference", "slots"], default="slots")
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--requests", type=int, default=64)
    ap.add_argument("--per-prompt", type=int, default=8)
    ap.add_argument("--prompt", type=int, default=64)
    ap.add_argument("--max-new", type=int, default=128)
    ap.add_argument("--rank", type=int, default=64)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--lora-mode", choices=["split", "mask"], default="mask")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    dtype = torch.bfloat16 if a.device == "cuda" else torch.float32
    m = random_model(a.layers, a.device, dtype, a.requests * (a.prompt + a.max_new))
    ads = Adapters(m)
    ads.add("bench", a.rank, 2.0 * a.rank, [], 1)
    reqs = requests(a.requests, a.prompt, a.per_prompt, a.max_new)
    work = copy.deepcopy(reqs)
    t0, c0 = time.perf_counter(), time.process_time()
    extra = ""
    with torch.no_grad():
        if a.backend == "slots":
            from .slots import SlotOptions, slot_generate

            st = slot_generate(m, ads, work, lambda **k: None, SlotOptions(slots=a.requests, lora_mode=a.lora_mode))
            occ = st.used_token_steps / max(1, st.steps) / (st.blocks * st.block_tokens)
            extra = (
                "pool %d blocks (%.1f MB), peak %d blocks in use (reserved), mean occupancy %.1f%% of the pool "
                "by cached tokens, %d prefills for %d requests, mean batch %.1f over %d steps"
                % (
                    st.blocks,
                    st.pool_bytes / 2**20,
                    st.peak_blocks,
                    100 * occ,
                    st.prefills,
                    len(work),
                    st.row_steps / max(1, st.steps),
                    st.steps,
                )
            )
        else:
            for w in plan_waves(work, m.gen_budget):
                live = [work[j] for j in w]
                sample_wave(m, ads, live, live[0].adapter, lambda **k: None)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    gen = sum(len(s.ids) for s in work)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    if a.device == "cuda":
        peak = torch.cuda.max_memory_allocated() / 2**20
    print(
        "%s: %d requests, %d generated tokens in %.2f s wall = %.1f tok/s, %.2f s CPU = %.1f tok per CPU-second; "
        "peak memory %.0f MB (%s)"
        % (
            a.backend,
            len(work),
            gen,
            wall,
            gen / wall,
            cpu,
            gen / cpu,
            peak,
            "cuda allocated" if a.device == "cuda" else "RSS",
        )
    )
    if extra:
        print(extra)


if __name__ == "__main__":
    main()
