package model

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/marlowlab/marlow/harness/engine"
	"github.com/marlowlab/marlow/harness/engine/torch/torchtest"
)

func defaultTokenizer(t testing.TB) *Tokenizer {
	t.Helper()
	tok, err := NewCharTokenizer(DefaultAlphabet())
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func TestDefaultAlphabet(t *testing.T) {
	a := DefaultAlphabet()
	if len(a) != 96 || a[0] != '\n' || a[1] != ' ' || a[95] != '~' {
		t.Errorf("alphabet %q", a)
	}
	tok := defaultTokenizer(t)
	if tok.VocabSize() != 99 {
		t.Errorf("vocab size %d, want 99", tok.VocabSize())
	}
	for s, want := range map[string]int32{EndOfText: 96, ImStart: 97, ImEnd: 98, "<|pad|>": -1, "a": -1} {
		if got := tok.ID(s); got != want {
			t.Errorf("ID(%q) = %d, want %d", s, got, want)
		}
	}
}

func TestNewCharTokenizerErrors(t *testing.T) {
	tests := []struct {
		alphabet, wantErr string
	}{
		{"", "empty"},
		{"abca", `repeats 'a' (U+0061) at byte offset 3`},
		{"ab\xffc", "invalid UTF-8 at byte offset 2"},
	}
	for _, tt := range tests {
		if _, err := NewCharTokenizer(tt.alphabet); err == nil || !strings.Contains(err.Error(), tt.wantErr) {
			t.Errorf("NewCharTokenizer(%q): %v, want %q", tt.alphabet, err, tt.wantErr)
		}
	}
}

func TestEncodeDecode(t *testing.T) {
	tok, err := NewCharTokenizer("ab<|\né")
	if err != nil {
		t.Fatal(err)
	}
	// ids: a0 b1 <2 |3 \n4 é5, <|endoftext|>6 <|im_start|>7 <|im_end|>8
	tests := []struct {
		in      string
		want    []int32
		wantErr string
	}{
		{"", []int32{}, ""},
		{"ab\né", []int32{0, 1, 4, 5}, ""},
		{"a<|im_start|>b", []int32{0, 7, 1}, ""},
		{"<|im_end|><|endoftext|>", []int32{8, 6}, ""},
		{"<|<|im_end|>", []int32{2, 3, 8}, ""},
		{"<|", []int32{2, 3}, ""},
		{"abc", nil, `unknown character 'c' (U+0063) at byte offset 2`},
		{"éé€", nil, `unknown character '€' (U+20AC) at byte offset 4`},
		{"<|im_st", nil, `unknown character 'i' (U+0069) at byte offset 2`},
		{"a\xff", nil, "invalid UTF-8 byte 0xff at byte offset 1"},
	}
	for _, tt := range tests {
		got, err := tok.Encode(tt.in)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("Encode(%q) error %v, want %q", tt.in, err, tt.wantErr)
			}
			continue
		}
		if err != nil || !slices.Equal(got, tt.want) {
			t.Errorf("Encode(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
			continue
		}
		if back := tok.Decode(got); back != tt.in {
			t.Errorf("Decode(Encode(%q)) = %q", tt.in, back)
		}
	}
	if got := tok.Decode([]int32{0, 9, -1, 1}); got != "a\uFFFD\uFFFDb" {
		t.Errorf("Decode out of range = %q", got)
	}
}

func TestEncodeChat(t *testing.T) {
	tok := defaultTokenizer(t)
	msgs := []engine.Message{{Role: "system", Content: "Be brief."}, {Role: "user", Content: "2+2?\nAnswer:"}}
	tests := []struct {
		gen  bool
		want string
	}{
		{false, "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\n2+2?\nAnswer:<|im_end|>\n"},
		{true, "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\n2+2?\nAnswer:<|im_end|>\n<|im_start|>assistant\n"},
	}
	for _, tt := range tests {
		ids, err := tok.EncodeChat(msgs, tt.gen)
		if err != nil {
			t.Fatal(err)
		}
		if got := tok.Decode(ids); got != tt.want {
			t.Errorf("EncodeChat(gen=%v) decodes to %q, want %q", tt.gen, got, tt.want)
		}
		if ids[0] != tok.ID(ImStart) || slices.Index(ids, tok.ID(ImEnd)) != 1+len("system\nBe brief.") {
			t.Errorf("special tokens misplaced: %v", ids)
		}
		rendered, _ := RenderChat(msgs, tt.gen)
		if rendered != tt.want {
			t.Errorf("RenderChat = %q", rendered)
		}
	}
	if _, err := tok.EncodeChat([]engine.Message{{Role: "user", Content: "ok"}, {Role: "user", Content: "tab\there"}}, true); err == nil ||
		!strings.Contains(err.Error(), "chat message 1 (user)") || !strings.Contains(err.Error(), `'\t'`) {
		t.Errorf("unknown character in chat: %v", err)
	}
	if _, err := tok.EncodeChat([]engine.Message{{Role: "", Content: "x"}}, false); err == nil || !strings.Contains(err.Error(), "invalid role") {
		t.Errorf("empty role: %v", err)
	}
}

func TestTokenizerSaveLoad(t *testing.T) {
	dir := t.TempDir()
	tok, err := NewCharTokenizer(DefaultAlphabet() + "é")
	if err != nil {
		t.Fatal(err)
	}
	p1, p2 := filepath.Join(dir, "a.json"), filepath.Join(dir, "b.json")
	if err := tok.Save(p1); err != nil {
		t.Fatal(err)
	}
	got, err := LoadTokenizer(p1)
	if err != nil {
		t.Fatal(err)
	}
	if got.Alphabet() != tok.Alphabet() || got.VocabSize() != tok.VocabSize() || got.ID(ImEnd) != tok.ID(ImEnd) {
		t.Errorf("loaded tokenizer differs")
	}
	if err := got.Save(p2); err != nil {
		t.Fatal(err)
	}
	b1, _ := os.ReadFile(p1)
	b2, _ := os.ReadFile(p2)
	if !bytes.Equal(b1, b2) {
		t.Error("tokenizer.json not byte-identical on rewrite")
	}
	for _, want := range []string{`"type": "WordLevel"`, `"Regex": "[\\s\\S]"`, `"content": "<|im_end|>"`, `"\n": 0,`, `"é": 96`} {
		if !bytes.Contains(b1, []byte(want)) {
			t.Errorf("tokenizer.json lacks %s", want)
		}
	}

	edit := func(old, new string) []byte {
		if !bytes.Contains(b1, []byte(old)) {
			t.Fatalf("edit does not apply: %s", old)
		}
		return bytes.Replace(b1, []byte(old), []byte(new), 1)
	}
	bad := []struct {
		name    string
		file    []byte
		wantErr string
	}{
		{"bpe", edit(`"type": "WordLevel"`, `"type": "BPE"`), `model.type is "BPE"`},
		{"normalizer", edit(`"normalizer": null`, `"normalizer": {"type": "Lowercase"}`), "normalizer must be null"},
		{"pre-tokenizer", edit(`"behavior": "Isolated"`, `"behavior": "Removed"`), "pre_tokenizer must be Split"},
		{"multi-char token", edit(`"a": `, `"ab": `), `vocabulary entry 66 is "ab"`},
		{"repeated id", edit(`"b": 67`, `"b": 66`), "without repeats"},
		{"special id", edit(`"id": 99,`, `"id": 5,`), "added_tokens must be"},
		{"not special", edit(`"special": true`, `"special": false`), "added_tokens must be"},
		{"truncated", b1[:len(b1)/2], "decode"},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "tokenizer.json")
			os.WriteFile(p, tt.file, 0o644)
			_, err := LoadTokenizer(p)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("error %v, want one containing %q", err, tt.wantErr)
			}
		})
	}
}

// referenceCases builds the strings and chats compared with the reference
// implementation: every character alone, special tokens alone, in text and
// in fragments, and a few hundred pseudo-random strings drawn from a fixed
// seed with whitespace, punctuation and special tokens mixed in.
func referenceCases(alphabet string) ([]string, []refChat) {
	var texts []string
	for _, r := range alphabet {
		texts = append(texts, string(r))
	}
	texts = append(texts,
		ImStart, ImEnd, EndOfText, "<|im_start|>user\nhi<|im_end|>\n", "<|im_", "<|im_end", "<||>", "<<|im_end|>>",
		"|<|endoftext|>|", "  leading and trailing  ", "\n\n\n", " ", "a  b\n\nc", "Answer: 42", "x = (3 * 4) - 5; // ok?",
		`"quoted" 'single' \back\slash`, "~!@#$%^&*()_+`-={}[]|:;<>,.?/", "<|im_start|><|im_end|><|endoftext|>")
	rng := rand.New(rand.NewPCG(3, 14))
	runes := []rune(alphabet)
	pieces := []string{ImStart, ImEnd, EndOfText, "\n", " ", "<|", "|>", "<|im_"}
	randText := func(n int) string {
		var b strings.Builder
		for i := 0; i < n; i++ {
			if rng.IntN(12) == 0 {
				b.WriteString(pieces[rng.IntN(len(pieces))])
			} else {
				b.WriteRune(runes[rng.IntN(len(runes))])
			}
		}
		return b.String()
	}
	for i := 0; i < 240; i++ {
		texts = append(texts, randText(1+rng.IntN(80)))
	}
	roles := []string{"system", "user", "assistant"}
	var chats []refChat
	for i := 0; i < 60; i++ {
		var msgs []engine.Message
		for j := 0; j < 1+rng.IntN(4); j++ {
			msgs = append(msgs, engine.Message{Role: roles[rng.IntN(3)], Content: randText(rng.IntN(60))})
		}
		chats = append(chats, refChat{Messages: msgs, AddGenerationPrompt: i%2 == 0})
	}
	return texts, chats
}

type refChat struct {
	Messages            []engine.Message `json:"messages"`
	AddGenerationPrompt bool             `json:"add_generation_prompt"`
}

// TestTokenizerMatchesReference checks the written tokenizer.json against a
// JavaScript port of the Hugging Face tokenizers pipeline
// (@lenml/tokenizers, installed with `npm ci --prefix testdata`). It runs
// when MARLOW_NODE_TOKCHECK=1.
func TestTokenizerMatchesReference(t *testing.T) {
	if os.Getenv("MARLOW_NODE_TOKCHECK") != "1" {
		t.Skip("set MARLOW_NODE_TOKCHECK=1 (after npm ci --prefix harness/model/testdata) to compare with @lenml/tokenizers")
	}
	if _, err := os.Stat(filepath.Join("testdata", "node_modules", "@lenml", "tokenizers")); err != nil {
		t.Fatalf("reference package not installed: run npm ci --prefix harness/model/testdata (%v)", err)
	}
	tok := defaultTokenizer(t)
	dir := t.TempDir()
	if err := tok.Save(filepath.Join(dir, TokenizerFile)); err != nil {
		t.Fatal(err)
	}
	if err := tok.SaveConfig(filepath.Join(dir, TokenizerConfigFile)); err != nil {
		t.Fatal(err)
	}
	texts, chats := referenceCases(DefaultAlphabet())
	input, err := json.Marshal(map[string]any{"dir": dir, "texts": texts, "chats": chats})
	if err != nil {
		t.Fatal(err)
	}
	inPath := filepath.Join(dir, "input.json")
	if err := os.WriteFile(inPath, input, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("node", "tokcheck.mjs", inPath)
	cmd.Dir = "testdata"
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node tokcheck.mjs: %v\n%s", err, stderr.String())
	}
	checkReference(t, tok, texts, chats, out)
	t.Logf("compared %d texts and %d chats with @lenml/tokenizers", len(texts), len(chats))
}

// checkReference compares a reference implementation's output (the JSON
// tokcheck.mjs and pytokcheck.py print) with tok on the same cases.
func checkReference(t *testing.T, tok *Tokenizer, texts []string, chats []refChat, out []byte) {
	t.Helper()
	var ref struct {
		IDs      [][]*int32 `json:"ids"`
		Decoded  []*string  `json:"decoded"`
		ChatIDs  [][]*int32 `json:"chat_ids"`
		ChatText []string   `json:"chat_text"`
	}
	if err := json.Unmarshal(out, &ref); err != nil {
		t.Fatalf("reference output: %v\n%s", err, out)
	}
	if len(ref.IDs) != len(texts) || len(ref.ChatIDs) != len(chats) {
		t.Fatalf("reference answered %d texts and %d chats, want %d and %d", len(ref.IDs), len(ref.ChatIDs), len(texts), len(chats))
	}
	compare := func(what string, got []int32, want []*int32) {
		t.Helper()
		w := make([]int32, len(want))
		for i, p := range want {
			if p == nil {
				t.Errorf("%s: reference has no id for token %d", what, i)
				return
			}
			w[i] = *p
		}
		if !slices.Equal(got, w) {
			t.Errorf("%s: ids differ\n got %v\nwant %v", what, got, w)
		}
	}
	for i, s := range texts {
		got, err := tok.Encode(s)
		if err != nil {
			t.Fatalf("Encode(%q): %v", s, err)
		}
		compare("text "+strconvQuote(s), got, ref.IDs[i])
		if ref.Decoded[i] == nil || *ref.Decoded[i] != s || tok.Decode(got) != s {
			t.Errorf("text %q: reference decodes to %v", s, ref.Decoded[i])
		}
	}
	for i, c := range chats {
		got, err := tok.EncodeChat(c.Messages, c.AddGenerationPrompt)
		if err != nil {
			t.Fatalf("EncodeChat(chat %d): %v", i, err)
		}
		compare("chat "+strconvQuote(ref.ChatText[i]), got, ref.ChatIDs[i])
		if want, _ := RenderChat(c.Messages, c.AddGenerationPrompt); ref.ChatText[i] != want {
			t.Errorf("chat %d: reference template renders %q, want %q", i, ref.ChatText[i], want)
		}
	}
}

func strconvQuote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

func TestTokenizerSaveConfig(t *testing.T) {
	tok := defaultTokenizer(t)
	dir := t.TempDir()
	p1, p2 := filepath.Join(dir, "a.json"), filepath.Join(dir, "b.json")
	for _, p := range []string{p1, p2} {
		if err := tok.SaveConfig(p); err != nil {
			t.Fatal(err)
		}
	}
	b1, _ := os.ReadFile(p1)
	b2, _ := os.ReadFile(p2)
	if !bytes.Equal(b1, b2) {
		t.Error("tokenizer_config.json not deterministic")
	}
	var cfg map[string]any
	if err := json.Unmarshal(b1, &cfg); err != nil {
		t.Fatal(err)
	}
	if cfg["chat_template"] != ChatTemplate || cfg["eos_token"] != ImEnd || cfg["pad_token"] != EndOfText || cfg["clean_up_tokenization_spaces"] != false {
		t.Errorf("tokenizer_config.json: %s", b1)
	}
	dec, _ := cfg["added_tokens_decoder"].(map[string]any)
	if e, _ := dec["98"].(map[string]any); e["content"] != ImEnd || e["special"] != true {
		t.Errorf("added_tokens_decoder[98] = %v", dec["98"])
	}
}

func TestSaveIntoMissingDirectory(t *testing.T) {
	path := filepath.Join(t.TempDir(), "no", "such", TokenizerFile)
	err := defaultTokenizer(t).Save(path)
	if err == nil || !strings.Contains(err.Error(), TokenizerFile) {
		t.Errorf("Save into a missing directory: %v", err)
	}
}

// TestTokenizerMatchesPython loads the default tokenizer.json, and that of
// every committed tiny model, with the Hugging Face `tokenizers` library
// (the torch engine's tokenizer) and compares its ids and chat layout with
// the native tokenizer's on the cases of the npm check. It needs an
// interpreter with tokenizers and jinja2 ($MARLOW_PYTHON; skipped without
// one, except under CI).
func TestTokenizerMatchesPython(t *testing.T) {
	py := torchtest.Python(t, "tokenizers", "jinja2")
	def := t.TempDir()
	tok := defaultTokenizer(t)
	if err := tok.Save(filepath.Join(def, TokenizerFile)); err != nil {
		t.Fatal(err)
	}
	if err := tok.SaveConfig(filepath.Join(def, TokenizerConfigFile)); err != nil {
		t.Fatal(err)
	}
	dirs, _ := filepath.Glob(filepath.Join("..", "..", "seeds", "models", "*"))
	for _, dir := range append([]string{def}, dirs...) {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			tok, err := LoadTokenizer(filepath.Join(dir, TokenizerFile))
			if err != nil {
				t.Fatal(err)
			}
			texts, chats := referenceCases(tok.Alphabet())
			input, err := json.Marshal(map[string]any{"dir": dir, "texts": texts, "chats": chats})
			if err != nil {
				t.Fatal(err)
			}
			inPath := filepath.Join(t.TempDir(), "input.json")
			if err := os.WriteFile(inPath, input, 0o644); err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command(py, filepath.Join("testdata", "pytokcheck.py"), inPath)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("%s pytokcheck.py: %v\n%s", py, err, stderr.String())
			}
			checkReference(t, tok, texts, chats, out)
		})
	}
}
