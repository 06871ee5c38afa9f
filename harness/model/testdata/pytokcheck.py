"""pytokcheck.py loads a tokenizer.json (and the chat template of its
tokenizer_config.json) with the Hugging Face `tokenizers` library and jinja2,
as marlow's torch engine server does, and prints the reference ids.

Usage: python pytokcheck.py INPUT.json (the input and output of tokcheck.mjs).
"""
import json
import os
import sys

import jinja2.sandbox
from tokenizers import Tokenizer

inp = json.load(open(sys.argv[1]))
tok = Tokenizer.from_file(os.path.join(inp["dir"], "tokenizer.json"))
conf = json.load(open(os.path.join(inp["dir"], "tokenizer_config.json")))
env = jinja2.sandbox.ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
tmpl = env.from_string(conf["chat_template"])
out = {"ids": [], "decoded": [], "chat_ids": [], "chat_text": []}
for text in inp["texts"]:
    ids = tok.encode(text, add_special_tokens=False).ids
    out["ids"].append(ids)
    out["decoded"].append(tok.decode(ids, skip_special_tokens=False))
for chat in inp["chats"]:
    text = tmpl.render(messages=chat["messages"], add_generation_prompt=chat["add_generation_prompt"], enable_thinking=False)
    out["chat_text"].append(text)
    out["chat_ids"].append(tok.encode(text, add_special_tokens=False).ids)
print(json.dumps(out))
