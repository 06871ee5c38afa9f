"""A generation benchmark of both backends on a real-width Qwen3 with random
weights (the published Qwen3-0.6B shape, fewer layers), no tokenizer needed:

    python -m marlow_torch.bench_gen --backend slots --layers 2 --requests 64

It prints generated tok/s for a batch of requests with a spread of
completion lengths (rows stopping at different steps), the pool's occupancy
(slots) and the peak memory. With --alternate N it runs both backends N
times each, alternated in one process, and prints tok per CPU-second and
their ratio: a comparison that holds up on a machine shared with other
jobs, as wall-clock tok/s does not. The workload of `marlow bench engine
--size qwen3-0.6b` (64 requests, 8 rollouts of 8 prompts, a rank-8 adapter,
24-96 new tokens, temperature 0.7; its prompts are 40 random words in the
chat template, taken here as 100 random token ids) is about

    python -m marlow_torch.bench_gen --alternate 2 --rank 8 --max-new 96 --temperature 0.7 --prompt 100

A benchmark, not a test: figures depend on the machine, which the caller
names."""

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


def requests(n: int, prompt: int, per_prompt: int, max_new: int, temperature: float = 1.0) -> list[GenRequest]:
    """n requests, per_prompt of each prompt of `prompt` random tokens, half on
    the adapter "bench", new tokens spread from max_new / 4 to max_new."""
    g = torch.Generator().manual_seed(3)
    out = []
    p: list[int] = []
    for i in range(n):
        if i % per_prompt == 0:
            p = torch.randint(0, 151000, (prompt,), generator=g).tolist()
        new = max_new // 4 + (i * (max_new - max_new // 4)) // max(1, n - 1)
        out.append(GenRequest(i, ["", "bench"][(i // per_prompt) % 2], list(p), new, temperature, True, i))
    return out


def run_once(m: Model, ads: Adapters, reqs: list[GenRequest], backend: str, lora_mode: str) -> tuple[float, float, str]:
    """Generates a copy of reqs with backend; returns the wall and process
    CPU seconds and, for slots, what the pool did."""
    work = copy.deepcopy(reqs)
    t0, c0 = time.perf_counter(), time.process_time()
    extra = ""
    with torch.no_grad():
        if backend == "slots":
            from .slots import SlotOptions, slot_generate

            st = slot_generate(m, ads, work, lambda **k: None, SlotOptions(slots=len(work), lora_mode=lora_mode))
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
    reqs[:] = work
    return wall, cpu, extra


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--backend", choices=["reference", "slots"], default="slots")
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--requests", type=int, default=64)
    ap.add_argument("--per-prompt", type=int, default=8)
    ap.add_argument("--prompt", type=int, default=64)
    ap.add_argument("--max-new", type=int, default=128)
    ap.add_argument("--temperature", type=float, default=1.0)
    ap.add_argument("--rank", type=int, default=64)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--lora-mode", choices=["split", "mask"], default="mask")
    ap.add_argument(
        "--alternate",
        type=int,
        default=0,
        help="run the reference and the slot backend this many times each, alternated in one process on one "
        "model, and print each run's tok per CPU-second and the ratio (--backend is then ignored)",
    )
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    dtype = torch.bfloat16 if a.device == "cuda" else torch.float32
    m = random_model(a.layers, a.device, dtype, a.requests * (a.prompt + a.max_new))
    ads = Adapters(m)
    ads.add("bench", a.rank, 2.0 * a.rank, [], 1)
    reqs = requests(a.requests, a.prompt, a.per_prompt, a.max_new, a.temperature)
    if a.alternate > 0:
        alternate(m, ads, reqs, a.alternate, a.lora_mode)
        return
    work = list(reqs)
    wall, cpu, extra = run_once(m, ads, work, a.backend, a.lora_mode)
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


def alternate(m: Model, ads: Adapters, reqs: list[GenRequest], n: int, lora_mode: str) -> None:
    """Runs reference and slots n times each, alternated, after one warm-up
    of each; prints tok per CPU-second (process time, so other jobs on the
    machine count less than in wall time) of each run, whether the two
    backends generated the same tokens, and the ratio of the totals."""
    for backend in ("reference", "slots"):
        run_once(m, ads, list(reqs[: max(1, len(reqs) // 8)]), backend, lora_mode)
    tokens: dict[str, int] = {"reference": 0, "slots": 0}
    cpus: dict[str, float] = {"reference": 0.0, "slots": 0.0}
    ids: dict[str, list[list[int]]] = {}
    for i in range(n):
        for backend in ("reference", "slots"):
            work = list(reqs)
            wall, cpu, _ = run_once(m, ads, work, backend, lora_mode)
            gen = sum(len(s.ids) for s in work)
            ids[backend] = [s.ids for s in work]
            tokens[backend] += gen
            cpus[backend] += cpu
            print(
                "run %d %-9s %d tokens, %.2f s CPU = %.1f tok per CPU-second (%.2f s wall)"
                % (i + 1, backend, gen, cpu, gen / cpu, wall),
                flush=True,
            )
    same = sum(a == b for a, b in zip(ids["reference"], ids["slots"]))
    rate = {b: tokens[b] / cpus[b] for b in tokens}
    print(
        "slots / reference: %.2fx in tok per CPU-second (%.1f / %.1f); %d of %d completions token-equal"
        % (rate["slots"] / rate["reference"], rate["slots"], rate["reference"], same, len(reqs))
    )


if __name__ == "__main__":
    main()
