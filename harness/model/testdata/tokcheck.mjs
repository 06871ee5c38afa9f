// tokcheck.mjs loads a tokenizer.json (and its tokenizer_config.json) written
// by marlow's harness/model package with @lenml/tokenizers, a JavaScript port
// of the Hugging Face tokenizers pipeline, and prints the reference ids.
//
// Usage: node tokcheck.mjs INPUT.json
// INPUT.json: {"dir": "...", "texts": ["..."],
//              "chats": [{"messages": [{"role": "...", "content": "..."}], "add_generation_prompt": true}]}
// Output (stdout, JSON): {"ids": [[...]], "decoded": ["..."], "chat_ids": [[...]], "chat_text": ["..."]}
// Unknown tokens come out as null ids, which the Go test reports.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { TokenizerLoader } from "@lenml/tokenizers";

const input = JSON.parse(readFileSync(process.argv[2], "utf8"));
const tokenizer = TokenizerLoader.fromPreTrained({
  tokenizerJSON: JSON.parse(readFileSync(join(input.dir, "tokenizer.json"), "utf8")),
  tokenizerConfig: JSON.parse(readFileSync(join(input.dir, "tokenizer_config.json"), "utf8")),
});

const norm = (ids) => Array.from(ids, (x) => (x === undefined ? null : Number(x)));
const decode = (ids) =>
  ids.length === 0 ? "" : tokenizer.decode(ids, { clean_up_tokenization_spaces: false });

const out = { ids: [], decoded: [], chat_ids: [], chat_text: [] };
for (const text of input.texts) {
  const ids = norm(tokenizer.encode(text, { add_special_tokens: false }));
  out.ids.push(ids);
  out.decoded.push(ids.includes(null) ? null : decode(ids));
}
for (const chat of input.chats) {
  const opts = { add_generation_prompt: chat.add_generation_prompt };
  out.chat_text.push(tokenizer.apply_chat_template(chat.messages, { ...opts, tokenize: false }));
  out.chat_ids.push(norm(tokenizer.apply_chat_template(chat.messages, { ...opts, tokenize: true })));
}
process.stdout.write(JSON.stringify(out));
