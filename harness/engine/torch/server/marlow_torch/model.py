"""The base model: loading a Hugging Face Qwen3 checkpoint folder, its
tokenizer and chat template, and the forward passes that scoring,
generation and training share."""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F  # noqa: N812

from .protocol import Args, Fault

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
STOP_TOKENS = ["<|im_end|>", "<|endoftext|>"]


@dataclass
class Model:
    """An open checkpoint: the transformers model (wrapped by peft once an
    adapter exists), its tokenizer and the run's device settings."""

    hf: Any
    """The HF model; a peft model once peft is true."""
    device: torch.device
    dtype: torch.dtype
    dtype_name: str
    layers: int
    vocab: int
    max_pos: int
    tokenizer: Any
    template: Any
    """The chat template (a jinja2 template), None to use the built-in ChatML."""
    gen_budget: int
    """Tokens (prompt + new) of one generation wave."""
    train_budget: int
    """Padded tokens of one scoring or training micro-batch."""
    grad_ckpt: bool
    cuda_device: str
    """The GPU's name when the device asked for was cuda, else empty."""
    stop_ids: set[int] = field(default_factory=set)
    peft: bool = False
    gen_backend: str = "reference"
    """The generation backend: "reference" (generation.sample_wave) or "slots" (slots.py)."""
    gen_slots: int = 64
    """Rows the slot backend decodes at once."""
    kv_fraction: float = 0.85
    """Share of the free cuda memory the slot backend's KV pool takes."""
    gen_pool: dict[str, int] = field(default_factory=dict)
    """The slot backend's pool figures summed over generate calls (largest
    for blocks, pool_bytes and peak_blocks): the stats op reports them."""
    slot_engine: Any = None
    """The slot backend's decoder, pool and graphs (a slots.SlotEngine),
    built at the first generate call and kept for the process."""
    head_fp32: bool = True
    """Logits from the final hidden state cast to float32 times a float32
    copy of the LM head (the tied embedding), in generation, scoring and
    training alike; False: the head in the model's dtype (for comparison)."""
    _head: torch.Tensor | None = None

    def head_weight(self) -> torch.Tensor:
        """The LM head's weight [V, D] the logits use: float32 when head_fp32
        (the weight itself in a float32 model, else a frozen copy made once),
        else the model's own."""
        if self._head is None:
            w: torch.Tensor = self.base().lm_head.weight
            self._head = w.detach().float() if self.head_fp32 else w.detach()
        return self._head

    def logits(self, h: torch.Tensor) -> torch.Tensor:
        """float32 logits [N, V] of final hidden states h [N, D]: h cast to
        float32 times the float32 head when head_fp32 (one bf16 ulp of a
        logit of 8-32 is 0.06-0.125 nat, wider than a clip band's edge), else
        the head in the model's dtype, rounded, then widened."""
        w = self.head_weight()
        with _tf32(False) if self.device.type == "cuda" else contextlib.nullcontext():
            if self.head_fp32:
                return F.linear(h.float(), w)
            return F.linear(h, w).float()

    def tf32_lora(self) -> contextlib.AbstractContextManager[Any]:
        """The context of a scoring or training pass (forward and backward):
        on cuda with a bfloat16 or float16 base, TF32 for its float32
        matmuls, which are the LoRA path's (logits() turns it off for the
        head); elsewhere nothing, so a float32 model keeps full-precision
        matmuls and the engine-check tolerances."""
        if self.device.type != "cuda" or self.dtype == torch.float32:
            return contextlib.nullcontext()
        return _tf32(True)

    def slot_options(self) -> Any:
        """The slot backend's settings (a slots.SlotOptions)."""
        from .slots import SlotOptions

        return SlotOptions(slots=self.gen_slots, kv_fraction=self.kv_fraction)

    def base(self) -> Any:
        """The underlying transformers model (inside peft when wrapped)."""
        return self.hf.get_base_model() if self.peft else self.hf

    def head_rows(self) -> int:
        """Rows of logits per chunk so that a chunk holds about 2^26 values."""
        return max(1, (1 << 26) // self.vocab)

    def encode_chat(self, messages: Sequence[dict[str, Any]]) -> list[int]:
        """The prompt token ids of a chat, with the generation prompt."""
        if self.template is not None:
            text = self.template.render(messages=messages, add_generation_prompt=True, enable_thinking=False)
        else:
            parts = []
            for m in messages:
                parts.append("<|im_start|>%s\n%s<|im_end|>\n" % (m["role"], m["content"]))
            parts.append("<|im_start|>assistant\n")
            text = "".join(parts)
        ids: list[int] = self.tokenizer.encode(text, add_special_tokens=False).ids
        return ids

    def decode(self, ids: Sequence[int]) -> str:
        """The text of token ids, special tokens kept."""
        text: str = self.tokenizer.decode(list(ids), skip_special_tokens=False)
        return text

    def info(self) -> dict[str, Any]:
        """The open call's reply."""
        return {
            "device": str(self.device),
            "dtype": self.dtype_name,
            "vocab_size": self.vocab,
            "layers": self.layers,
            "max_positions": self.max_pos,
            "chat_template": self.template is not None,
            "cuda_device": self.cuda_device,
            "gradient_checkpointing": self.grad_ckpt,
            "gen_backend": self.gen_backend,
            "head_dtype": "float32" if self.head_fp32 else self.dtype_name,
        }


@contextlib.contextmanager
def _tf32(on: bool) -> Iterator[None]:
    """cuda float32 matmuls in TF32 inside (on) or not, the previous
    setting restored after."""
    prev = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = on
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32 = prev


def open_model(args: Args) -> Model:
    """Loads the checkpoint folder args["checkpoint"] on the asked device and dtype."""
    from tokenizers import Tokenizer
    from transformers import AutoConfig, AutoModelForCausalLM

    ckpt = args.need_str("checkpoint")
    device = args.get("device") or "auto"
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cuda" and not torch.cuda.is_available():
        raise Fault(
            "no_cuda",
            "device cuda was asked for but torch.cuda.is_available() is false (torch %s, CUDA build %s)"
            % (torch.__version__, torch.version.cuda),
        )
    dtype = args.get("dtype") or "auto"
    if dtype == "auto":
        dtype = "bfloat16" if device == "cuda" else "float32"
    tdtype = DTYPES.get(dtype)
    if tdtype is None:
        raise Fault("bad_request", "dtype %r is not float32, bfloat16 or float16" % dtype)
    tdevice = torch.device(device)
    threads = int(args.get("threads") or 0)
    if device == "cpu":
        torch.set_num_threads(max(threads, 1))
        torch.use_deterministic_algorithms(True)
    else:
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
    gen_budget = int(args.get("gen_token_budget") or 0) or (1 << 16)
    train_budget = int(args.get("train_token_budget") or 0) or (1 << 14)
    gen_backend = args.get("gen_backend") or ("slots" if device == "cuda" else "reference")
    if gen_backend not in ("reference", "slots"):
        raise Fault("bad_request", "gen_backend %r is not reference or slots" % gen_backend)
    gen_slots = int(args.get("gen_slots") or 0) or (256 if device == "cuda" else 64)
    kv_fraction = float(args.get("kv_cache_fraction") or 0) or 0.85
    if not 0 < kv_fraction < 1:
        raise Fault("bad_request", "kv_cache_fraction %r is not in (0, 1)" % kv_fraction)
    head_dtype = args.get("head_dtype") or "float32"
    if head_dtype not in ("float32", "model"):
        raise Fault("bad_request", "head_dtype %r is not float32 or model" % head_dtype)
    if head_dtype == "model" and gen_backend == "slots":
        raise Fault(
            "bad_request", "head_dtype model: the slot backend's head is always float32; use gen_backend reference"
        )
    cfg = AutoConfig.from_pretrained(ckpt)
    if getattr(cfg, "model_type", "") != "qwen3":
        raise Fault("bad_checkpoint", "%s: model_type %r, want qwen3" % (ckpt, getattr(cfg, "model_type", None)))
    try:
        hf = AutoModelForCausalLM.from_pretrained(ckpt, dtype=tdtype, attn_implementation="sdpa")
    except TypeError:
        hf = AutoModelForCausalLM.from_pretrained(ckpt, torch_dtype=tdtype, attn_implementation="sdpa")
    hf.to(tdevice)
    hf.eval()
    for p in hf.parameters():
        p.requires_grad_(False)
    grad_ckpt = bool(args.get("gradient_checkpointing", device == "cuda"))
    if grad_ckpt:
        hf.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        hf.config.use_cache = False
    tok = Tokenizer.from_file(os.path.join(ckpt, "tokenizer.json"))
    stop_ids: set[int] = set()
    for s in STOP_TOKENS:
        i = tok.token_to_id(s)
        if i is not None:
            stop_ids.add(i)
    if tok.token_to_id("<|im_end|>") is None:
        raise Fault("bad_checkpoint", "%s: tokenizer has no <|im_end|> token" % ckpt)
    return Model(
        hf=hf,
        device=tdevice,
        dtype=tdtype,
        dtype_name=dtype,
        layers=cfg.num_hidden_layers,
        vocab=cfg.vocab_size,
        max_pos=cfg.max_position_embeddings,
        tokenizer=tok,
        template=load_chat_template(ckpt),
        gen_budget=gen_budget,
        train_budget=train_budget,
        grad_ckpt=grad_ckpt,
        cuda_device=torch.cuda.get_device_name(tdevice) if device == "cuda" else "",
        stop_ids=stop_ids,
        gen_backend=gen_backend,
        gen_slots=gen_slots,
        kv_fraction=kv_fraction,
        head_fp32=head_dtype == "float32",
    )


def load_chat_template(ckpt: str) -> Any:
    """The chat template of tokenizer_config.json in a jinja2 sandbox, None
    when the checkpoint has none."""
    tc = os.path.join(ckpt, "tokenizer_config.json")
    if not os.path.exists(tc):
        return None
    with open(tc) as f:
        tconf = json.load(f)
    tmpl = tconf.get("chat_template")
    if not isinstance(tmpl, str) or not tmpl:
        return None
    import jinja2.exceptions
    import jinja2.sandbox

    env = jinja2.sandbox.ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)

    def raise_exception(msg: str) -> None:
        raise jinja2.exceptions.TemplateError(msg)

    def tojson(x: Any, indent: int | None = None, **kw: Any) -> str:
        return json.dumps(x, ensure_ascii=False, indent=indent)

    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    return env.from_string(tmpl)


def hidden(model: Model, prompts: Sequence[Sequence[int]], completions: Sequence[Sequence[int]]) -> torch.Tensor:
    """Final hidden states of the completion-predicting rows of the turns
    (prompt, completion), right-padded into one batch: [tokens, D]. No
    attention mask: causal attention alone keeps every real token from the
    padding after it (sdpa's is_causal path, no materialised [B, 1, L, L]
    mask and no expanded grouped keys), and the padded rows are never read."""
    L = max(len(p) + len(c) - 1 for p, c in zip(prompts, completions))
    n = len(prompts)
    ids = torch.zeros((n, L), dtype=torch.long)
    rows: list[int] = []
    cols: list[int] = []
    for b, (p, c) in enumerate(zip(prompts, completions)):
        seq = list(p) + list(c[:-1])
        ids[b, : len(seq)] = torch.tensor(seq, dtype=torch.long)
        for j in range(len(c)):
            rows.append(b)
            cols.append(len(p) - 1 + j)
    ids = ids.to(model.device)
    pos = torch.arange(L, device=model.device).unsqueeze(0).expand(n, L)
    out = model.base().model(input_ids=ids, attention_mask=None, position_ids=pos, use_cache=False)
    h: torch.Tensor = out.last_hidden_state
    return h[torch.tensor(rows, device=model.device), torch.tensor(cols, device=model.device)]


def score64(model: Model, h: torch.Tensor, targets: torch.Tensor, temp: float) -> torch.Tensor:
    """log-probs (float64) of targets under softmax(logits(h) / temp)."""
    hr = model.head_rows()
    out = []
    for s in range(0, h.shape[0], hr):
        z = model.logits(h[s : s + hr]).double() / temp
        lse = torch.logsumexp(z, dim=-1)
        t = targets[s : s + hr]
        out.append(z.gather(1, t.unsqueeze(1)).squeeze(1) - lse)
    return torch.cat(out)
