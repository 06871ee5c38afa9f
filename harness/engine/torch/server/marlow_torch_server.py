"""marlow torch engine server.

The Go client (package harness/engine/torch) starts this script once per
run and speaks to it over two dedicated pipes passed as extra file
descriptors: requests arrive on --in-fd, replies leave on --out-fd. Every
frame is a 4-byte little-endian length followed by that many bytes of JSON.

A request is {"id": N, "op": NAME, "args": {...}}. The server answers each
request with exactly one final frame, {"id": N, "result": {...}} or
{"id": N, "error": {"kind", "message", "traceback"}}, and may send
{"id": N, "progress": {...}} frames before it during long calls. Token
arrays travel as base64 of little-endian int32, log-probs as base64 of
little-endian float32, and NaN statistics as null.

Python's stdout is redirected to stderr at start (also at the file
descriptor level), so prints from libraries can never corrupt the
protocol; the client keeps the tail of stderr for its error messages.

The semantics mirror marlow's native engine (harness/engine/native): the
counter-based random streams (rng.go), the LoRA initialisation
(adapter.go), the inverse-CDF sampling in float64 (generate.go), the GRPO
train step with per-agent gradient buffers (grpo.go), AdamW (adapter.go)
and the on-disk adapter layout (io.go).
"""

import argparse
import base64
import importlib.metadata
import json
import math
import os
import struct
import sys
import time
import traceback

PROTOCOL = 1
PLACEHOLDER = "__marlow_placeholder__"  # keeps peft from losing its last adapter during a load

# --- counter-based random streams (a port of native/rng.go) ---------------

M64 = (1 << 64) - 1
PURPOSE_LORA = 0x6C6F7261
PURPOSE_SAMPLE = 0x73616D70
GOLDEN = 0x9E3779B97F4A7C15
MUL1 = 0xBF58476D1CE4E5B9
MUL2 = 0x94D049BB133111EB
MODULES = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
MODULE_PATHS = {
    "q_proj": "self_attn.q_proj", "k_proj": "self_attn.k_proj", "v_proj": "self_attn.v_proj",
    "o_proj": "self_attn.o_proj", "gate_proj": "mlp.gate_proj", "up_proj": "mlp.up_proj",
    "down_proj": "mlp.down_proj",
}


def mix64(z):
    z &= M64
    z ^= z >> 30
    z = (z * MUL1) & M64
    z ^= z >> 27
    z = (z * MUL2) & M64
    z ^= z >> 31
    return z


def hash_key(*words):
    h = 0x6D61726C6F77  # "marlow"
    for w in words:
        w &= M64
        h = mix64(((h + GOLDEN + w * GOLDEN) & M64) ^ mix64(w))
    return h


def uniform01(h):
    return float(h >> 11) * (1.0 / (1 << 53))


def uniform_at_array(np, key, n):
    """uniformAt(key, i) for i in [0, n) as float64, vectorised."""
    i = np.arange(1, n + 1, dtype=np.uint64)
    with np.errstate(over="ignore"):
        z = np.uint64(key) ^ (i * np.uint64(GOLDEN))
        z ^= z >> np.uint64(30)
        z *= np.uint64(MUL1)
        z ^= z >> np.uint64(27)
        z *= np.uint64(MUL2)
        z ^= z >> np.uint64(31)
    return 2.0 * ((z >> np.uint64(11)).astype(np.float64) * (1.0 / (1 << 53))) - 1.0


# --- framing ----------------------------------------------------------------


class Channel:
    def __init__(self, rfd, wfd):
        self.r = os.fdopen(rfd, "rb", buffering=0)
        self.w = os.fdopen(wfd, "wb", buffering=0)
        self.req_id = None
        self.last_progress = 0.0

    def _read_exact(self, n):
        buf = bytearray()
        while len(buf) < n:
            chunk = self.r.read(n - len(buf))
            if not chunk:
                return None
            buf += chunk
        return bytes(buf)

    def read(self):
        head = self._read_exact(4)
        if head is None:
            return None
        (n,) = struct.unpack("<I", head)
        body = self._read_exact(n)
        if body is None:
            return None
        return json.loads(body)

    def write(self, obj):
        body = json.dumps(clean(obj), allow_nan=False, separators=(",", ":")).encode()
        self.w.write(struct.pack("<I", len(body)) + body)

    def progress(self, **what):
        """Sends a progress frame, at most one per second."""
        now = time.monotonic()
        if self.req_id is None or now - self.last_progress < 1.0:
            return
        self.last_progress = now
        self.write({"id": self.req_id, "progress": what})


def clean(x):
    """Replaces non-finite floats by None (NaN travels as null)."""
    if isinstance(x, float):
        return x if math.isfinite(x) else None
    if isinstance(x, dict):
        return {k: clean(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [clean(v) for v in x]
    return x


def b64_ints(ids):
    return base64.b64encode(struct.pack("<%di" % len(ids), *ids)).decode()


def b64_floats(vals):
    return base64.b64encode(struct.pack("<%df" % len(vals), *vals)).decode()


def ints_b64(s):
    raw = base64.b64decode(s)
    if len(raw) % 4:
        raise Fault("bad_request", "token array of %d bytes is not a multiple of 4" % len(raw))
    return list(struct.unpack("<%di" % (len(raw) // 4), raw))


def floats_b64(s):
    raw = base64.b64decode(s)
    if len(raw) % 4:
        raise Fault("bad_request", "float array of %d bytes is not a multiple of 4" % len(raw))
    return list(struct.unpack("<%df" % (len(raw) // 4), raw))


class Fault(Exception):
    """An error with a kind the Go client reports."""

    def __init__(self, kind, message):
        super().__init__(message)
        self.kind = kind


def versions():
    out = {"python": sys.version.split()[0]}
    for pkg in ["torch", "transformers", "peft", "safetensors", "tokenizers", "numpy", "jinja2"]:
        try:
            out[pkg] = importlib.metadata.version(pkg)
        except importlib.metadata.PackageNotFoundError:
            out[pkg] = ""
    return out


# --- the engine -------------------------------------------------------------


class Adapter:
    def __init__(self, name, rank, alpha, targets, seed):
        self.name, self.rank, self.alpha, self.targets, self.seed = name, rank, alpha, targets, seed
        self.params = []  # (save name, parameter) in native order: layer, module, A then B
        self.m = None  # AdamW moments, flat fp32 in the order of params
        self.v = None
        self.step = 0


class Server:
    def __init__(self, ch):
        self.ch = ch
        self.model = None  # the HF model, wrapped by peft once an adapter exists
        self.peft = False
        self.adapters = {}

    # -- open ------------------------------------------------------------

    def op_hello(self, args):
        return {"protocol": PROTOCOL, "versions": versions(), "pid": os.getpid()}

    def op_open(self, args):
        import numpy as np
        import torch
        from tokenizers import Tokenizer
        from transformers import AutoConfig, AutoModelForCausalLM

        self.np, self.torch = np, torch
        ckpt = args["checkpoint"]
        device = args.get("device") or "auto"
        if device == "auto":
            device = "cuda" if torch.cuda.is_available() else "cpu"
        if device == "cuda" and not torch.cuda.is_available():
            raise Fault("no_cuda", "device cuda was asked for but torch.cuda.is_available() is false (torch %s, CUDA build %s)" % (torch.__version__, torch.version.cuda))
        dtype = args.get("dtype") or "auto"
        if dtype == "auto":
            dtype = "bfloat16" if device == "cuda" else "float32"
        tdtype = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}.get(dtype)
        if tdtype is None:
            raise Fault("bad_request", "dtype %r is not float32, bfloat16 or float16" % dtype)
        self.device = torch.device(device)
        self.dtype = tdtype
        threads = int(args.get("threads") or 0)
        if device == "cpu":
            torch.set_num_threads(max(threads, 1))
            torch.use_deterministic_algorithms(True)
        else:
            torch.backends.cuda.matmul.allow_tf32 = False
            torch.backends.cudnn.allow_tf32 = False
        self.gen_budget = int(args.get("gen_token_budget") or 0) or (1 << 16)
        self.train_budget = int(args.get("train_token_budget") or 0) or (1 << 14)
        cfg = AutoConfig.from_pretrained(ckpt)
        if getattr(cfg, "model_type", "") != "qwen3":
            raise Fault("bad_checkpoint", "%s: model_type %r, want qwen3" % (ckpt, getattr(cfg, "model_type", None)))
        try:
            model = AutoModelForCausalLM.from_pretrained(ckpt, dtype=tdtype, attn_implementation="sdpa")
        except TypeError:
            model = AutoModelForCausalLM.from_pretrained(ckpt, torch_dtype=tdtype, attn_implementation="sdpa")
        model.to(self.device)
        model.eval()
        for p in model.parameters():
            p.requires_grad_(False)
        self.grad_ckpt = bool(args.get("gradient_checkpointing", device == "cuda"))
        if self.grad_ckpt:
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
            model.config.use_cache = False
        self.model = model
        self.cfg = cfg
        self.layers = cfg.num_hidden_layers
        self.vocab = cfg.vocab_size
        self.max_pos = cfg.max_position_embeddings
        self.tok = Tokenizer.from_file(os.path.join(ckpt, "tokenizer.json"))
        self.stop_ids = set()
        for s in ["<|im_end|>", "<|endoftext|>"]:
            i = self.tok.token_to_id(s)
            if i is not None:
                self.stop_ids.add(i)
        if self.tok.token_to_id("<|im_end|>") is None:
            raise Fault("bad_checkpoint", "%s: tokenizer has no <|im_end|> token" % ckpt)
        self.template = None
        tc = os.path.join(ckpt, "tokenizer_config.json")
        if os.path.exists(tc):
            with open(tc) as f:
                tconf = json.load(f)
            tmpl = tconf.get("chat_template")
            if isinstance(tmpl, str) and tmpl:
                import jinja2.sandbox

                env = jinja2.sandbox.ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)

                def raise_exception(msg):
                    raise jinja2.exceptions.TemplateError(msg)

                env.filters["tojson"] = lambda x, indent=None, **kw: json.dumps(x, ensure_ascii=False, indent=indent)
                env.globals["raise_exception"] = raise_exception
                self.template = env.from_string(tmpl)
        return {
            "device": str(self.device), "dtype": dtype, "vocab_size": self.vocab,
            "layers": self.layers, "max_positions": self.max_pos,
            "chat_template": self.template is not None,
            "cuda_device": torch.cuda.get_device_name(self.device) if device == "cuda" else "",
            "gradient_checkpointing": self.grad_ckpt,
        }

    def need_open(self):
        if self.model is None:
            raise Fault("not_open", "no checkpoint is open")

    # -- adapters --------------------------------------------------------

    def base(self):
        """The underlying transformers model (inside peft when wrapped)."""
        return self.model.get_base_model() if self.peft else self.model

    def op_add_adapter(self, args):
        self.need_open()
        name = args["name"]
        if not name:
            raise Fault("bad_request", 'adapter name is empty ("" is the base policy)')
        if name in self.adapters:
            raise Fault("bad_request", "adapter %r already exists" % name)
        ad = self.create_adapter(name, int(args["rank"]), float(args["alpha"]), args.get("targets") or [], int(args["seed"]))
        self.init_a(ad)
        return {"params": sum(p.numel() for _, p in ad.params)}

    def create_adapter(self, name, rank, alpha, targets, seed):
        from peft import LoraConfig, get_peft_model

        torch = self.torch
        if rank <= 0:
            raise Fault("bad_request", "adapter %r: rank %d must be positive" % (name, rank))
        if not (alpha > 0) or math.isinf(alpha):
            raise Fault("bad_request", "adapter %r: alpha %r must be positive and finite" % (name, alpha))
        bad = [t for t in targets if t not in MODULES]
        if bad:
            raise Fault("bad_request", "adapter %r: unknown LoRA targets %s (want some of %s)" % (name, bad, MODULES))
        targets = [m for m in MODULES if not targets or m in targets]
        lc = LoraConfig(r=rank, lora_alpha=alpha, target_modules=list(targets), lora_dropout=0.0,
                        bias="none", init_lora_weights=True, task_type="CAUSAL_LM")
        if not self.peft:
            self.model = get_peft_model(self.model, lc, adapter_name=name)
            self.peft = True
        else:
            self.model.add_adapter(name, lc)
        if PLACEHOLDER in self.model.peft_config:
            self.model.set_adapter(name)
            self.model.delete_adapter(PLACEHOLDER)
        ad = Adapter(name, rank, alpha, targets, seed)
        named = dict(self.model.named_parameters())
        for l in range(self.layers):
            for m in targets:
                for ab in ("A", "B"):
                    key = "base_model.model.model.layers.%d.%s.lora_%s.%s.weight" % (l, MODULE_PATHS[m], ab, name)
                    p = named.get(key)
                    if p is None:
                        raise Fault("internal", "peft did not create %s" % key)
                    if p.dtype != torch.float32:
                        p.data = p.data.float()
                    save = "base_model.model.model.layers.%d.%s.lora_%s.weight" % (l, MODULE_PATHS[m], ab)
                    ad.params.append((save, p))
        n = sum(p.numel() for _, p in ad.params)
        ad.m = torch.zeros(n, dtype=torch.float32, device=self.device)
        ad.v = torch.zeros(n, dtype=torch.float32, device=self.device)
        self.adapters[name] = ad
        return ad

    def init_a(self, ad):
        """A from the stream keyed by (seed, LoRA, layer, module), bound 1/sqrt(in); B = 0."""
        np, torch = self.np, self.torch
        with torch.no_grad():
            for save, p in ad.params:
                layer = int(save.split(".layers.")[1].split(".")[0])
                mod = save.split(".lora_")[0].rsplit(".", 1)[1]
                if ".lora_B." in save:
                    p.zero_()
                    continue
                rank, fan_in = p.shape
                key = hash_key(ad.seed, PURPOSE_LORA, layer, MODULES.index(mod))
                bound = 1.0 / math.sqrt(fan_in)
                vals = (bound * uniform_at_array(np, key, rank * fan_in)).astype(np.float32)
                p.copy_(torch.from_numpy(vals.reshape(rank, fan_in)))

    def adapter(self, name):
        if name == "":
            return None
        ad = self.adapters.get(name)
        if ad is None:
            raise Fault("bad_request", "unknown adapter %r (have %s)" % (name, sorted(self.adapters)))
        return ad

    def use(self, name):
        """A context manager running the model under adapter name ("" = base)."""
        import contextlib

        if name == "":
            if not self.peft:
                return contextlib.nullcontext()
            return self.model.disable_adapter()
        self.model.set_adapter(name)
        active = self.model.active_adapters
        if list(active) != [name]:
            raise Fault("internal", "asked for adapter %r but peft has %r active" % (name, active))
        return contextlib.nullcontext()

    # -- tokenization ----------------------------------------------------

    def encode_chat(self, messages):
        if self.template is not None:
            text = self.template.render(messages=messages, add_generation_prompt=True, enable_thinking=False)
        else:
            parts = []
            for m in messages:
                parts.append("<|im_start|>%s\n%s<|im_end|>\n" % (m["role"], m["content"]))
            parts.append("<|im_start|>assistant\n")
            text = "".join(parts)
        return self.tok.encode(text, add_special_tokens=False).ids

    # -- generation ------------------------------------------------------

    def op_generate(self, args):
        self.need_open()
        reqs = args["requests"]
        items = []
        for i, r in enumerate(reqs):
            self.adapter(r.get("adapter", ""))
            t = float(r["temperature"])
            if not (t > 0) or math.isinf(t):
                raise Fault("bad_request", "request %d: temperature %r must be positive and finite" % (i, t))
            mx = int(r["max_new_tokens"])
            if mx < 0:
                raise Fault("bad_request", "request %d: max new tokens %d is negative" % (i, mx))
            prompt = self.encode_chat(r["messages"])
            if not prompt:
                raise Fault("bad_request", "request %d: empty prompt" % i)
            if len(prompt) + mx > self.max_pos:
                raise Fault("bad_request", "request %d: prompt of %d tokens + %d new tokens exceeds max_position_embeddings %d" % (i, len(prompt), mx, self.max_pos))
            items.append({"i": i, "adapter": r.get("adapter", ""), "prompt": prompt, "max": mx, "temp": t,
                          "no_stop": bool(r.get("ignore_end_of_turn", False)),
                          "seed": int(r["seed"]), "ids": [], "lps": [], "finish": "length" if mx == 0 else ""})
        # Requests of one adapter go together, adapters in name order, then
        # waves whose prompt + new tokens fit the budget.
        order = sorted(range(len(items)), key=lambda k: (items[k]["adapter"], k))
        wave, used, cur = [], 0, None
        for k in order:
            it = items[k]
            cost = len(it["prompt"]) + it["max"]
            if wave and (it["adapter"] != cur or used + cost > self.gen_budget):
                self.sample_wave([items[j] for j in wave], cur)
                wave, used = [], 0
            wave.append(k)
            used += cost
            cur = it["adapter"]
        if wave:
            self.sample_wave([items[j] for j in wave], cur)
        out = []
        for it in items:
            text_ids = it["ids"][:-1] if it["finish"] == "stop" else it["ids"]
            out.append({"prompt_ids": b64_ints(it["prompt"]), "ids": b64_ints(it["ids"]),
                        "text": self.tok.decode(text_ids, skip_special_tokens=False),
                        "logprobs": b64_floats(it["lps"]), "finish": it["finish"]})
        return {"completions": out}

    def sample_wave(self, wave, adapter):
        """Generation backend: batched KV-cache sampling of one adapter's
        requests. A vLLM backend can replace this function."""
        torch = self.torch
        live = [it for it in wave if it["max"] > 0]
        if not live:
            return
        B = len(live)
        P = max(len(it["prompt"]) for it in live)
        ids = torch.zeros((B, P), dtype=torch.long)
        mask = torch.zeros((B, P), dtype=torch.long)
        for b, it in enumerate(live):
            n = len(it["prompt"])
            ids[b, P - n:] = torch.tensor(it["prompt"], dtype=torch.long)
            mask[b, P - n:] = 1
        ids, mask = ids.to(self.device), mask.to(self.device)
        pos = (mask.cumsum(-1) - 1).clamp(min=0)
        lens = [len(it["prompt"]) for it in live]
        base = self.base()
        inner, head = base.model, base.lm_head
        from transformers import DynamicCache

        cache = DynamicCache()
        with torch.no_grad(), self.use(adapter):
            out = inner(input_ids=ids, attention_mask=mask, position_ids=pos, past_key_values=cache, use_cache=True)
            h = out.last_hidden_state[:, -1, :]
            done = [False] * B
            while True:
                logits = head(h).float().cpu().numpy()
                nxt = []
                for b, it in enumerate(live):
                    if done[b]:
                        nxt.append(0)
                        continue
                    key = hash_key(it["seed"], PURPOSE_SAMPLE, len(it["ids"]))
                    tok, lp = self.sample_row(logits[b], it["temp"], key)
                    it["ids"].append(tok)
                    it["lps"].append(lp)
                    if tok in self.stop_ids and not it["no_stop"]:
                        done[b], it["finish"] = True, "stop"
                    elif len(it["ids"]) >= it["max"]:
                        done[b], it["finish"] = True, "length"
                    nxt.append(tok)
                if all(done):
                    return
                self.ch.progress(op="generate", tokens=sum(len(it["ids"]) for it in live))
                step = torch.tensor(nxt, dtype=torch.long, device=self.device).unsqueeze(1)
                mask = torch.cat([mask, torch.ones((B, 1), dtype=mask.dtype, device=self.device)], dim=1)
                p = torch.tensor([lens[b] + len(live[b]["ids"]) - 1 for b in range(B)], dtype=torch.long, device=self.device).unsqueeze(1)
                out = inner(input_ids=step, attention_mask=mask, position_ids=p, past_key_values=out.past_key_values, use_cache=True)
                h = out.last_hidden_state[:, -1, :]

    def op_sample_rows(self, args):
        """The sampling rule alone, on given logits (cross-checks with the
        native engine): row i is sampled at temperature temps[i] with the
        uniform of (seeds[i], positions[i])."""
        import numpy as np

        self.np = np
        raw = base64.b64decode(args["logits"])
        lengths = [int(x) for x in args["lengths"]]
        if len(raw) != 4 * sum(lengths):
            raise Fault("bad_request", "logits hold %d bytes, want 4 x %d" % (len(raw), sum(lengths)))
        flat = np.frombuffer(raw, dtype="<f4")
        toks, lps, off = [], [], 0
        for i, v in enumerate(lengths):
            key = hash_key(int(args["seeds"][i]), PURPOSE_SAMPLE, int(args["positions"][i]))
            tok, lp = self.sample_row(flat[off:off + v], float(args["temps"][i]), key)
            off += v
            toks.append(tok)
            lps.append(lp)
        return {"tokens": b64_ints(toks), "logprobs": b64_floats(lps)}

    def sample_row(self, logits, temp, key):
        """native.sampleRow: inverse CDF at one uniform, summed in float64 in id order."""
        np = self.np
        z = logits.astype(np.float64) / temp
        mx = z.max()
        c = np.cumsum(np.exp(z - mx))
        total = c[-1]
        u = uniform01(mix64(key)) * total
        tok = int(np.searchsorted(c, u, side="right"))
        if tok >= len(c):
            tok = len(c) - 1
        lp = z[tok] - mx - math.log(total)
        return tok, float(np.float32(lp))

    # -- scoring and training ----------------------------------------------

    def parse_turns(self, turns, need_old):
        out = []
        for i, t in enumerate(turns):
            p, c = ints_b64(t["prompt_ids"]), ints_b64(t["completion_ids"])
            if not p or not c:
                raise Fault("bad_request", "turn %d needs a prompt and a completion" % i)
            if len(p) + len(c) - 1 > self.max_pos:
                raise Fault("bad_request", "turn %d has %d input tokens, more than max_position_embeddings %d" % (i, len(p) + len(c) - 1, self.max_pos))
            for what, ids in (("prompt", p), ("completion", c)):
                for j, x in enumerate(ids):
                    if x < 0 or x >= self.vocab:
                        raise Fault("bad_request", "turn %d %s: token %d at index %d is outside the vocabulary [0, %d)" % (i, what, x, j, self.vocab))
            d = {"prompt": p, "completion": c}
            if need_old:
                old = floats_b64(t["old_logprobs"])
                if len(old) != len(c):
                    raise Fault("bad_request", "turn %d has %d old log-probs for %d completion tokens" % (i, len(old), len(c)))
                d["old"] = old
            out.append(d)
        return out

    def micro_batches(self, idx, turns):
        """Splits turn indices idx into runs whose padded size fits the train token budget."""
        out, cur, longest = [], [], 0
        for i in idx:
            n = len(turns[i]["prompt"]) + len(turns[i]["completion"]) - 1
            if cur and max(longest, n) * (len(cur) + 1) > self.train_budget:
                out.append(cur)
                cur, longest = [], 0
            cur.append(i)
            longest = max(longest, n)
        if cur:
            out.append(cur)
        return out

    def hidden(self, turns, idx):
        """Final hidden states of the completion-predicting rows of turns idx,
        right-padded into one batch: [tokens, D]."""
        torch = self.torch
        L = max(len(turns[i]["prompt"]) + len(turns[i]["completion"]) - 1 for i in idx)
        ids = torch.zeros((len(idx), L), dtype=torch.long)
        mask = torch.zeros((len(idx), L), dtype=torch.long)
        rows, cols = [], []
        for b, i in enumerate(idx):
            t = turns[i]
            seq = t["prompt"] + t["completion"][:-1]
            ids[b, : len(seq)] = torch.tensor(seq, dtype=torch.long)
            mask[b, : len(seq)] = 1
            for j in range(len(t["completion"])):
                rows.append(b)
                cols.append(len(t["prompt"]) - 1 + j)
        ids, mask = ids.to(self.device), mask.to(self.device)
        pos = torch.arange(L, device=self.device).unsqueeze(0).expand(len(idx), L)
        out = self.base().model(input_ids=ids, attention_mask=mask, position_ids=pos, use_cache=False)
        h = out.last_hidden_state
        return h[torch.tensor(rows, device=self.device), torch.tensor(cols, device=self.device)]

    def head_rows(self):
        """Rows of logits per chunk so that a chunk holds about 2^26 values."""
        return max(1, (1 << 26) // self.vocab)

    def score64(self, h, targets, temp):
        """log-probs (float64) of targets under softmax(lm_head(h) / temp)."""
        torch = self.torch
        head = self.base().lm_head
        out = []
        for s in range(0, h.shape[0], self.head_rows()):
            z = head(h[s:s + self.head_rows()]).float().double() / temp
            lse = torch.logsumexp(z, dim=-1)
            t = targets[s:s + self.head_rows()]
            out.append(z.gather(1, t.unsqueeze(1)).squeeze(1) - lse)
        return torch.cat(out)

    def op_logprobs(self, args):
        self.need_open()
        torch = self.torch
        name = args.get("adapter", "")
        self.adapter(name)
        temp = float(args["temperature"])
        if not (temp > 0) or math.isinf(temp):
            raise Fault("bad_request", "temperature %r must be positive and finite" % temp)
        turns = self.parse_turns(args["turns"], False)
        res = [None] * len(turns)
        with torch.no_grad(), self.use(name):
            for mb in self.micro_batches(range(len(turns)), turns):
                h = self.hidden(turns, mb)
                tg = torch.tensor([x for i in mb for x in turns[i]["completion"]], device=self.device)
                lp = self.score64(h, tg, temp).cpu().tolist()
                k = 0
                for i in mb:
                    n = len(turns[i]["completion"])
                    res[i] = b64_floats(lp[k:k + n])
                    k += n
                self.ch.progress(op="logprobs")
        return {"logprobs": res}

    def op_train_step(self, args):
        self.need_open()
        torch, np = self.torch, self.np
        name = args["adapter"]
        ad = self.adapter(name)
        if ad is None:
            raise Fault("bad_request", "train step needs an adapter (the base policy is frozen)")
        o = args["options"]
        agg = o["loss_agg"]
        if agg not in ("token-mean", "seq-mean-token-mean", "seq-mean-token-sum"):
            raise Fault("bad_request", "unknown loss aggregation %r" % agg)
        temp = float(o["temperature"])
        clip_lo, clip_hi = float(o["clip_low"]), float(o["clip_high"])
        klc = o.get("kl_coef") or {}
        raw = args["turns"]
        turns = self.parse_turns(raw, True)
        for i, t in enumerate(raw):
            if t["adapter"] != name:
                raise Fault("bad_request", "turn %d names adapter %r, not %r" % (i, t["adapter"], name))
            turns[i].update(role=t["role"], agent=t["agent"], adv=float(t["advantage"]))
        kept = [i for i, t in enumerate(turns) if t["adv"] != 0]
        skipped = len(turns) - len(kept)
        if not kept:
            return {"skipped": skipped, "total": None, "roles": [], "grad_norm_pre": 0.0}
        kept.sort(key=lambda i: (turns[i]["role"], turns[i]["agent"]))
        roles, agents, agent_role = [], [], []
        for i in kept:
            t = turns[i]
            if not roles or roles[-1] != t["role"]:
                roles.append(t["role"])
            if not agents or agents[-1] != t["agent"] or agent_role[-1] != len(roles) - 1:
                agents.append(t["agent"])
                agent_role.append(len(roles) - 1)
            t["role_i"], t["agent_i"] = len(roles) - 1, len(agents) - 1
        nt = float(len(kept))
        ntok = sum(len(turns[i]["completion"]) for i in kept)
        for i in kept:
            t = turns[i]
            n = len(t["completion"])
            t["w"] = 1.0 / ntok if agg == "token-mean" else (1.0 / (nt * n) if agg == "seq-mean-token-mean" else 1.0 / nt)
        self.model.train() if self.grad_ckpt else None
        params = [p for _, p in ad.params]
        agent_grads = []
        head = self.base().lm_head
        hr = self.head_rows()
        for a in range(len(agents)):
            idx = [i for i in kept if turns[i]["agent_i"] == a]
            for p in params:
                p.grad = None
            for mb in self.micro_batches(idx, turns):
                tg = torch.tensor([x for i in mb for x in turns[i]["completion"]], device=self.device)
                with torch.no_grad(), self.use(""):
                    lpb = self.score64(self.hidden(turns, mb), tg, temp)
                with self.use(name):
                    h = self.hidden(turns, mb)
                    lp_parts, ent_parts = [], []

                    def head_chunk(hc, tc):
                        logp = torch.log_softmax(head(hc).float() / temp, dim=-1)
                        with torch.no_grad():
                            ent = -(logp.exp() * logp).sum(-1).double()
                        return logp.gather(1, tc.unsqueeze(1)).squeeze(1), ent

                    for s in range(0, h.shape[0], hr):
                        if self.grad_ckpt:
                            # Keep only the hidden rows; the chunk's logits are
                            # recomputed in the backward pass.
                            from torch.utils.checkpoint import checkpoint

                            lpc, entc = checkpoint(head_chunk, h[s:s + hr], tg[s:s + hr], use_reentrant=False)
                        else:
                            lpc, entc = head_chunk(h[s:s + hr], tg[s:s + hr])
                        lp_parts.append(lpc)
                        ent_parts.append(entc)
                    lp = torch.cat(lp_parts)
                    ent = torch.cat(ent_parts)
                    old = torch.tensor([x for i in mb for x in turns[i]["old"]], dtype=torch.float64, device=self.device)
                    adv = torch.tensor([turns[i]["adv"] for i in mb for _ in turns[i]["completion"]], dtype=torch.float64, device=self.device)
                    w = torch.tensor([turns[i]["w"] for i in mb for _ in turns[i]["completion"]], dtype=torch.float64, device=self.device)
                    coef = torch.tensor([float(klc.get(turns[i]["role"], 0.0)) for i in mb for _ in turns[i]["completion"]], dtype=torch.float64, device=self.device)
                    lp64 = lp.double()
                    r = torch.exp(lp64 - old)
                    cr = r.detach().clamp(1 - clip_lo, 1 + clip_hi)
                    unclipped = (r.detach() * adv) <= (cr * adv)
                    # -min(r A, clip(r) A): the gradient flows through r only where r A is the min.
                    pg = torch.where(unclipped, -adv * r, -adv * cr)
                    x = lpb - lp64
                    k3 = torch.exp(x) - x - 1
                    loss = (w * (pg + coef * k3)).sum()
                    loss.backward()
                    k = 0
                    lpd, k3d, rd = lp64.detach(), k3.detach(), r.detach()
                    clipped = (-cr * adv) > (-rd * adv)
                    for i in mb:
                        n = len(turns[i]["completion"])
                        t = turns[i]
                        t["lp"] = lpd[k:k + n].cpu().numpy()
                        t["ent"] = ent[k:k + n].cpu().numpy()
                        t["r"] = rd[k:k + n].cpu().numpy()
                        t["k3"] = k3d[k:k + n].cpu().numpy()
                        t["l"] = (pg.detach()[k:k + n] + coef[k:k + n] * k3d[k:k + n]).cpu().numpy()
                        t["clipped"] = int(clipped[k:k + n].sum().item())
                        k += n
                self.ch.progress(op="train_step", agent=agents[a])
            flat = torch.cat([(p.grad if p.grad is not None else torch.zeros_like(p)).reshape(-1).float() for p in params])
            agent_grads.append(flat)
            for p in params:
                p.grad = None
        self.model.eval()
        role_grads = [torch.zeros_like(agent_grads[0]) for _ in roles]
        for a, g in enumerate(agent_grads):
            role_grads[agent_role[a]] += g
        total = torch.zeros_like(agent_grads[0])
        for g in role_grads:
            total += g
        stats = self.step_stats(turns, kept, roles, agents, agent_role, agent_grads, role_grads, total)
        pre = stats["total"]["grad_norm"]
        clip = float(o.get("grad_clip") or 0)
        with torch.no_grad():
            g = total
            if clip > 0 and pre > clip:
                g = total * float(np.float32(clip / pre))
            self.adamw(ad, g, float(o["lr"]), float(o["beta1"]), float(o["beta2"]), float(o["eps"]), float(o["weight_decay"]))
        stats["skipped"] = skipped
        stats["grad_norm_pre"] = pre
        return stats

    def adamw(self, ad, g, lr, b1, b2, eps, wd):
        """native adamState.update: float64 arithmetic, moments stored in float32."""
        torch = self.torch
        ad.step += 1
        bc1 = 1 - math.pow(b1, ad.step)
        bc2 = 1 - math.pow(b2, ad.step)
        gd = g.double()
        m = b1 * ad.m.double() + (1 - b1) * gd
        v = b2 * ad.v.double() + (1 - b2) * gd * gd
        ad.m, ad.v = m.float(), v.float()
        x = torch.cat([p.detach().reshape(-1) for _, p in ad.params]).double()
        x = x - lr * wd * x
        x = x - lr * (m / bc1) / (torch.sqrt(v / bc2) + eps)
        self.set_flat(ad, x.float())

    def set_flat(self, ad, flat):
        k = 0
        with self.torch.no_grad():
            for _, p in ad.params:
                n = p.numel()
                p.copy_(flat[k:k + n].view_as(p))
                k += n

    def step_stats(self, turns, kept, roles, agents, agent_role, agent_grads, role_grads, total):
        """native grpoStats."""
        torch = self.torch
        nan = float("nan")

        def new():
            return {"loss": 0.0, "nll": 0.0, "ent": 0.0, "ratio": 0.0, "rmax": -math.inf, "kl": 0.0, "clipped": 0, "toks": 0, "seqs": 0}

        accs = [new() for _ in range(len(roles) + 1)]
        for i in kept:
            t = turns[i]
            for a in (accs[t["role_i"]], accs[-1]):
                a["seqs"] += 1
                a["loss"] += float((t["w"] * t["l"]).sum())
                a["nll"] -= float(t["lp"].sum())
                a["ent"] += float(t["ent"].sum())
                a["ratio"] += float(t["r"].sum())
                a["rmax"] = max(a["rmax"], float(t["r"].max()))
                a["kl"] += float(t["k3"].sum())
                a["clipped"] += t["clipped"]
                a["toks"] += len(t["completion"])

        def dot(a, b):
            return float(torch.dot(a.double(), b.double()))

        def cos(a, b):
            na, nb = dot(a, a), dot(b, b)
            if na == 0 or nb == 0:
                return nan
            return dot(a, b) / math.sqrt(na * nb)

        def mk(name, a):
            n = float(a["toks"])
            return {"role": name, "loss": a["loss"], "tokens": a["toks"], "seqs": a["seqs"],
                    "mean_len": n / a["seqs"], "entropy": a["ent"] / n, "perplexity": math.exp(a["nll"] / n),
                    "ratio_mean": a["ratio"] / n, "ratio_max": a["rmax"], "clip_frac": a["clipped"] / n, "kl": a["kl"] / n}

        norms = [dot(g, g) for g in role_grads]
        sumsq = sum(norms)
        out, all_pairs = [], []
        for r, name in enumerate(roles):
            rs = mk(name, accs[r])
            rs["grad_norm"] = math.sqrt(norms[r])
            rs["grad_share"] = norms[r] / sumsq if sumsq > 0 else nan
            members = [a for a in range(len(agents)) if agent_role[a] == r]
            pairs = [cos(agent_grads[members[i]], agent_grads[members[j]]) for i in range(len(members)) for j in range(i + 1, len(members))]
            rs["agent_cos_mean"] = sum(pairs) / len(pairs) if pairs else nan
            rs["agent_cos_min"] = min(pairs) if pairs else nan
            all_pairs += pairs
            rs["role_cos"] = {o: cos(role_grads[r], role_grads[k]) for k, o in enumerate(roles) if k != r}
            out.append(rs)
        tot = mk("*", accs[-1])
        tot["grad_norm"] = math.sqrt(dot(total, total))
        tot["grad_share"] = 1.0
        tot["agent_cos_mean"] = sum(all_pairs) / len(all_pairs) if all_pairs else nan
        tot["agent_cos_min"] = min(all_pairs) if all_pairs else nan
        tot["role_cos"] = {}
        return {"total": tot, "roles": out}

    # -- save and load (native/io.go's layout) -------------------------------

    def op_save(self, args):
        self.need_open()
        from safetensors.torch import save_file

        d = args["dir"]
        os.makedirs(d, exist_ok=True)
        names = sorted(self.adapters)
        for n in names:
            ad = self.adapters[n]
            ad_dir = os.path.join(d, n)
            os.makedirs(ad_dir, exist_ok=True)
            weights = {s: p.detach().float().cpu().contiguous() for s, p in ad.params}
            atomic(os.path.join(ad_dir, "adapter_model.safetensors"), lambda path: save_file(weights, path, metadata={"format": "pt"}))
            opt = {}
            k = 0
            for s, p in ad.params:
                c = p.numel()
                opt[s + ".exp_avg"] = ad.m[k:k + c].view_as(p).cpu().contiguous()
                opt[s + ".exp_avg_sq"] = ad.v[k:k + c].view_as(p).cpu().contiguous()
                k += c
            atomic(os.path.join(ad_dir, "optimizer.safetensors"), lambda path: save_file(opt, path, metadata={"format": "marlow-adamw"}))
            write_json(os.path.join(ad_dir, "adapter_config.json"), adapter_config(ad))
            write_json(os.path.join(ad_dir, "state.json"), {"name": ad.name, "seed": ad.seed, "step": ad.step}, sort=False)
        write_json(os.path.join(d, "adapters.json"), {"adapters": names})
        return {"adapters": names}

    def op_load(self, args):
        self.need_open()
        from safetensors.torch import load_file

        torch = self.torch
        d = args["dir"]
        with open(os.path.join(d, "adapters.json")) as f:
            names = json.load(f)["adapters"]
        loaded = []
        for n in names:
            if not n or n != os.path.basename(n) or n in (".", ".."):
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
            loaded.append((n, int(cfg["r"]), float(cfg["lora_alpha"]), targets, int(st["seed"]), int(st["step"]), w, opt, ad_dir))
        for n, r, alpha, targets, seed, step, w, opt, ad_dir in loaded:
            if n in self.adapters:
                self.delete_adapter(n)
            ad = self.create_adapter(n, r, alpha, targets, seed)
            want = {s: tuple(p.shape) for s, p in ad.params}
            extra = sorted(set(w) - set(want))
            if extra or len(w) != len(want):
                raise Fault("bad_checkpoint", "%s: adapter holds %d tensors, expected %d (unexpected: %s)" % (ad_dir, len(w), len(want), extra[:3]))
            ms, vs = [], []
            with torch.no_grad():
                for s, p in ad.params:
                    for src, key in ((w, s),):
                        if key not in src or tuple(src[key].shape) != want[s]:
                            raise Fault("bad_checkpoint", "%s: tensor %s missing or not of shape %s" % (ad_dir, key, list(want[s])))
                    p.copy_(w[s].float().to(self.device))
                    for lst, suf in ((ms, ".exp_avg"), (vs, ".exp_avg_sq")):
                        t = opt.get(s + suf)
                        if t is None or tuple(t.shape) != want[s]:
                            raise Fault("bad_checkpoint", "%s: optimizer tensor %s missing or not of shape %s" % (ad_dir, s + suf, list(want[s])))
                        lst.append(t.float().reshape(-1))
            if len(opt) != 2 * len(want):
                raise Fault("bad_checkpoint", "%s: optimizer holds %d tensors, expected %d" % (ad_dir, len(opt), 2 * len(want)))
            ad.m = torch.cat(ms).to(self.device)
            ad.v = torch.cat(vs).to(self.device)
            ad.step = step
        return {"adapters": names}

    def delete_adapter(self, name):
        """Removes adapter name from peft (peft keeps at least one adapter, so a
        placeholder is added first when name is the last one)."""
        if len(self.adapters) == 1:
            from peft import LoraConfig

            self.model.add_adapter(PLACEHOLDER, LoraConfig(r=1, lora_alpha=1, target_modules=["q_proj"], lora_dropout=0.0))
            self.model.set_adapter(PLACEHOLDER)
        elif self.model.active_adapters == [name]:
            self.model.set_adapter([n for n in self.adapters if n != name][0])
        self.model.delete_adapter(name)
        del self.adapters[name]

    def op_stats(self, args):
        """CPU time and peak memory of the server process (and of the GPU)."""
        import resource

        ru = resource.getrusage(resource.RUSAGE_SELF)
        out = {"peak_rss_bytes": ru.ru_maxrss * 1024, "cpu_seconds": ru.ru_utime + ru.ru_stime}
        if self.model is not None and self.device.type == "cuda":
            out["cuda_peak_bytes"] = int(self.torch.cuda.max_memory_allocated(self.device))
        return out

    def op_close(self, args):
        return {}


def adapter_config(ad):
    """adapter_config.json as model.WriteAdapter writes it."""
    return {
        "alpha_pattern": {}, "auto_mapping": None, "base_model_name_or_path": "marlow-native", "bias": "none",
        "fan_in_fan_out": False, "inference_mode": True, "init_lora_weights": True, "layers_pattern": None,
        "layers_to_transform": None, "lora_alpha": ad.alpha, "lora_dropout": 0.0, "modules_to_save": None,
        "peft_type": "LORA", "r": ad.rank, "rank_pattern": {}, "revision": None, "target_modules": ad.targets,
        "task_type": "CAUSAL_LM", "use_dora": False, "use_rslora": False,
    }


def go_json(x, indent=0, sort=True):
    """JSON as Go's json.MarshalIndent(v, "", "  ") writes it (floats in
    their shortest form, integral floats without a fraction)."""
    pad, inner = "  " * indent, "  " * (indent + 1)
    if isinstance(x, dict):
        if not x:
            return "{}"
        keys = sorted(x) if sort else list(x)
        return "{\n" + ",\n".join(inner + json.dumps(k) + ": " + go_json(x[k], indent + 1, sort) for k in keys) + "\n" + pad + "}"
    if isinstance(x, list):
        if not x:
            return "[]"
        return "[\n" + ",\n".join(inner + go_json(v, indent + 1, sort) for v in x) + "\n" + pad + "]"
    if isinstance(x, float) and x.is_integer() and abs(x) < 1e21:
        return str(int(x))
    return json.dumps(x)


def write_json(path, obj, sort=True):
    data = (go_json(obj, 0, sort) + "\n").encode()

    def w(p):
        with open(p, "wb") as f:
            f.write(data)

    atomic(path, w)


def atomic(path, write):
    tmp = path + ".tmp"
    write(tmp)
    os.replace(tmp, path)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--in-fd", type=int, required=True)
    ap.add_argument("--out-fd", type=int, required=True)
    a = ap.parse_args()
    # Library prints go to stderr: the protocol has its own descriptors, and
    # stdout (fd 1) is pointed at stderr too.
    sys.stdout.flush()
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    ch = Channel(a.in_fd, a.out_fd)
    srv = Server(ch)
    while True:
        req = ch.read()
        if req is None:
            return
        rid, op = req.get("id"), req.get("op", "")
        ch.req_id, ch.last_progress = rid, time.monotonic()
        fn = getattr(srv, "op_" + op, None)
        try:
            if fn is None:
                raise Fault("bad_request", "unknown op %r" % op)
            res = fn(req.get("args") or {})
            ch.write({"id": rid, "result": res})
        except Exception as e:  # every failure becomes a reply
            kind = e.kind if isinstance(e, Fault) else type(e).__name__
            ch.write({"id": rid, "error": {"kind": kind, "message": str(e), "traceback": traceback.format_exc()}})
        ch.req_id = None
        if op == "close":
            return


if __name__ == "__main__":
    main()
