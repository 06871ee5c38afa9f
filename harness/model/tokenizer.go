package model

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/marlowlab/marlow/harness/engine"
	"github.com/marlowlab/marlow/harness/internal/atomicfile"
)

// Special tokens of the Qwen chat layout.
const (
	EndOfText = "<|endoftext|>"
	ImStart   = "<|im_start|>"
	ImEnd     = "<|im_end|>"
)

// specialTokens are the special tokens in id order (the order Qwen uses).
var specialTokens = []string{EndOfText, ImStart, ImEnd}

// Tokenizer is a character-level tokenizer with the three Qwen chat special
// tokens. Ids 0..n-1 are the n alphabet characters in alphabet order; the
// special tokens come last: n = <|endoftext|>, n+1 = <|im_start|>,
// n+2 = <|im_end|>. A Tokenizer is immutable and safe for concurrent use.
type Tokenizer struct {
	alphabet []rune
	ids      map[rune]int32
	special  map[string]int32
}

// DefaultAlphabet is the alphabet of the tiny models: newline followed by
// printable ASCII (0x20 space through 0x7e tilde), 96 characters.
func DefaultAlphabet() string {
	var b strings.Builder
	b.WriteByte('\n')
	for c := byte(0x20); c <= 0x7e; c++ {
		b.WriteByte(c)
	}
	return b.String()
}

// NewCharTokenizer builds a tokenizer whose vocabulary is the characters of
// alphabet (in that order) followed by the special tokens. The alphabet must
// be non-empty valid UTF-8 without repeated characters.
func NewCharTokenizer(alphabet string) (*Tokenizer, error) {
	if alphabet == "" {
		return nil, fmt.Errorf("tokenizer alphabet is empty")
	}
	t := &Tokenizer{ids: map[rune]int32{}, special: map[string]int32{}}
	for off, r := range alphabet {
		if r == utf8.RuneError {
			if _, size := utf8.DecodeRuneInString(alphabet[off:]); size == 1 {
				return nil, fmt.Errorf("tokenizer alphabet has invalid UTF-8 at byte offset %d", off)
			}
		}
		if _, dup := t.ids[r]; dup {
			return nil, fmt.Errorf("tokenizer alphabet repeats %q (U+%04X) at byte offset %d", r, r, off)
		}
		t.ids[r] = int32(len(t.alphabet))
		t.alphabet = append(t.alphabet, r)
	}
	for i, s := range specialTokens {
		t.special[s] = int32(len(t.alphabet) + i)
	}
	return t, nil
}

// VocabSize is the number of ids: alphabet characters plus special tokens.
func (t *Tokenizer) VocabSize() int { return len(t.alphabet) + len(specialTokens) }

// Alphabet returns the characters of ids 0..n-1 as a string.
func (t *Tokenizer) Alphabet() string { return string(t.alphabet) }

// ID returns the id of a special token ("<|im_start|>", "<|im_end|>",
// "<|endoftext|>"), or -1 when s is not one.
func (t *Tokenizer) ID(special string) int32 {
	if id, ok := t.special[special]; ok {
		return id
	}
	return -1
}

// Encode maps s to ids, one per character, except that the text of a
// special token anywhere in s is encoded as that special token (as the
// Hugging Face tokenizers library does for added tokens). A character
// outside the alphabet is an error naming it and its byte offset in s.
func (t *Tokenizer) Encode(s string) ([]int32, error) {
	ids := make([]int32, 0, len(s))
	for i := 0; i < len(s); {
		if s[i] == '<' {
			if id, n := t.matchSpecial(s[i:]); n > 0 {
				ids = append(ids, id)
				i += n
				continue
			}
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			return nil, fmt.Errorf("encode: invalid UTF-8 byte 0x%02x at byte offset %d", s[i], i)
		}
		id, ok := t.ids[r]
		if !ok {
			return nil, fmt.Errorf("encode: unknown character %q (U+%04X) at byte offset %d", r, r, i)
		}
		ids = append(ids, id)
		i += size
	}
	return ids, nil
}

// matchSpecial returns the special token s starts with and its length.
func (t *Tokenizer) matchSpecial(s string) (int32, int) {
	best, bestLen := int32(-1), 0
	for _, sp := range specialTokens {
		if len(sp) > bestLen && strings.HasPrefix(s, sp) {
			best, bestLen = t.special[sp], len(sp)
		}
	}
	return best, bestLen
}

// Decode maps ids back to text; special tokens are rendered as their text
// and ids outside the vocabulary as U+FFFD.
func (t *Tokenizer) Decode(ids []int32) string {
	var b strings.Builder
	n := int32(len(t.alphabet))
	for _, id := range ids {
		switch {
		case id >= 0 && id < n:
			b.WriteRune(t.alphabet[id])
		case id >= n && int(id) < t.VocabSize():
			b.WriteString(specialTokens[id-n])
		default:
			b.WriteRune(utf8.RuneError)
		}
	}
	return b.String()
}

// RenderChat lays out messages in the Qwen chat format:
// "<|im_start|>role\ncontent<|im_end|>\n" per message, then
// "<|im_start|>assistant\n" when addGenerationPrompt is set. A role must be
// non-empty and contain neither a newline nor a special token.
func RenderChat(msgs []engine.Message, addGenerationPrompt bool) (string, error) {
	var b strings.Builder
	for i, m := range msgs {
		if m.Role == "" || strings.ContainsAny(m.Role, "\n") || strings.Contains(m.Role, "<|") {
			return "", fmt.Errorf("chat message %d: invalid role %q", i, m.Role)
		}
		b.WriteString(ImStart)
		b.WriteString(m.Role)
		b.WriteByte('\n')
		b.WriteString(m.Content)
		b.WriteString(ImEnd)
		b.WriteByte('\n')
	}
	if addGenerationPrompt {
		b.WriteString(ImStart + "assistant\n")
	}
	return b.String(), nil
}

// EncodeChat encodes messages laid out by RenderChat. Errors name the
// message and the offending character.
func (t *Tokenizer) EncodeChat(msgs []engine.Message, addGenerationPrompt bool) ([]int32, error) {
	var ids []int32
	for i, m := range msgs {
		s, err := RenderChat([]engine.Message{m}, false)
		if err != nil {
			return nil, fmt.Errorf("chat message %d: invalid role %q", i, m.Role)
		}
		part, err := t.Encode(s)
		if err != nil {
			return nil, fmt.Errorf("chat message %d (%s): %w", i, m.Role, err)
		}
		ids = append(ids, part...)
	}
	if addGenerationPrompt {
		part, err := t.Encode(ImStart + "assistant\n")
		if err != nil {
			return nil, fmt.Errorf("chat generation prompt: %w", err)
		}
		ids = append(ids, part...)
	}
	return ids, nil
}

// The tokenizer.json layout (Hugging Face tokenizers). The pre-tokenizer
// splits off every character, the WordLevel model maps each to its id, the
// Fuse decoder joins tokens without separators. The unknown token is not in
// the vocabulary, so the reference library also fails on unknown characters
// instead of mapping them silently.
const (
	splitRegex = `[\s\S]`
	unkToken   = "<unk>"
)

type hfAddedToken struct {
	ID         int32  `json:"id"`
	Content    string `json:"content"`
	SingleWord bool   `json:"single_word"`
	LStrip     bool   `json:"lstrip"`
	RStrip     bool   `json:"rstrip"`
	Normalized bool   `json:"normalized"`
	Special    bool   `json:"special"`
}

type hfPattern struct {
	Regex string `json:"Regex"`
}

type hfPreTokenizer struct {
	Type     string    `json:"type"`
	Pattern  hfPattern `json:"pattern"`
	Behavior string    `json:"behavior"`
	Invert   bool      `json:"invert"`
}

type hfDecoder struct {
	Type string `json:"type"`
}

type hfModel struct {
	Type     string       `json:"type"`
	Vocab    orderedVocab `json:"vocab"`
	UnkToken string       `json:"unk_token"`
}

type hfTokenizer struct {
	Version       string          `json:"version"`
	Truncation    json.RawMessage `json:"truncation"`
	Padding       json.RawMessage `json:"padding"`
	AddedTokens   []hfAddedToken  `json:"added_tokens"`
	Normalizer    json.RawMessage `json:"normalizer"`
	PreTokenizer  *hfPreTokenizer `json:"pre_tokenizer"`
	PostProcessor json.RawMessage `json:"post_processor"`
	Decoder       *hfDecoder      `json:"decoder"`
	Model         hfModel         `json:"model"`
}

// orderedVocab is a WordLevel vocabulary, written as a JSON object in id
// order.
type orderedVocab []string

func (v orderedVocab) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for id, tok := range v {
		if id > 0 {
			b.WriteByte(',')
		}
		writeJSONString(&b, tok)
		fmt.Fprintf(&b, ":%d", id)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

func (v *orderedVocab) UnmarshalJSON(raw []byte) error {
	var m map[string]int
	if err := json.Unmarshal(raw, &m); err != nil {
		return err
	}
	out := make([]string, len(m))
	seen := make([]bool, len(m))
	for tok, id := range m {
		if id < 0 || id >= len(m) || seen[id] {
			return fmt.Errorf("vocabulary ids must be 0..%d without repeats; %q has id %d", len(m)-1, tok, id)
		}
		seen[id] = true
		out[id] = tok
	}
	*v = out
	return nil
}

func (t *Tokenizer) hf() hfTokenizer {
	vocab := make(orderedVocab, len(t.alphabet))
	for i, r := range t.alphabet {
		vocab[i] = string(r)
	}
	added := make([]hfAddedToken, len(specialTokens))
	for i, s := range specialTokens {
		added[i] = hfAddedToken{ID: t.special[s], Content: s, Special: true}
	}
	null := json.RawMessage("null")
	return hfTokenizer{
		Version:       "1.0",
		Truncation:    null,
		Padding:       null,
		AddedTokens:   added,
		Normalizer:    null,
		PreTokenizer:  &hfPreTokenizer{Type: "Split", Pattern: hfPattern{Regex: splitRegex}, Behavior: "Isolated"},
		PostProcessor: null,
		Decoder:       &hfDecoder{Type: "Fuse"},
		Model:         hfModel{Type: "WordLevel", Vocab: vocab, UnkToken: unkToken},
	}
}

// marshalDeterministic renders v as indented JSON without HTML escaping and
// with a trailing newline.
func marshalDeterministic(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// Save writes the tokenizer as a Hugging Face tokenizer.json: a WordLevel
// model over the alphabet with a Split pre-tokenizer isolating every
// character, no normalizer, a Fuse decoder and the special tokens as added
// tokens. The same tokenizer always gives the same bytes.
func (t *Tokenizer) Save(path string) error {
	b, err := marshalDeterministic(t.hf())
	if err != nil {
		return fmt.Errorf("encode tokenizer: %w", err)
	}
	return atomicfile.WriteFrom(path, func(w io.Writer) error {
		_, err := w.Write(b)
		return err
	})
}

// ChatTemplate is the Jinja chat template equivalent to RenderChat, as
// written into tokenizer_config.json.
const ChatTemplate = "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"

// SaveConfig writes the tokenizer_config.json that goes with Save's
// tokenizer.json, so transformers can load the pair with AutoTokenizer:
// the chat template, <|im_end|> as end-of-sequence, <|endoftext|> as
// padding, and no clean-up of tokenization spaces.
func (t *Tokenizer) SaveConfig(path string) error {
	decoder := map[string]any{}
	for _, s := range specialTokens {
		decoder[fmt.Sprint(t.special[s])] = map[string]any{
			"content": s, "lstrip": false, "normalized": false, "rstrip": false, "single_word": false, "special": true,
		}
	}
	cfg := map[string]any{
		"add_bos_token":                false,
		"add_eos_token":                false,
		"added_tokens_decoder":         decoder,
		"bos_token":                    nil,
		"chat_template":                ChatTemplate,
		"clean_up_tokenization_spaces": false,
		"eos_token":                    ImEnd,
		"model_max_length":             1 << 20,
		"pad_token":                    EndOfText,
		"split_special_tokens":         false,
		"tokenizer_class":              "PreTrainedTokenizerFast",
		"unk_token":                    nil,
	}
	b, err := marshalDeterministic(cfg)
	if err != nil {
		return fmt.Errorf("encode tokenizer config: %w", err)
	}
	return atomicfile.WriteFrom(path, func(w io.Writer) error {
		_, err := w.Write(b)
		return err
	})
}

// LoadTokenizer reads a tokenizer.json written by Save. It accepts exactly
// that layout (WordLevel model of single characters, the Split
// pre-tokenizer, no normalizer or post-processor, the three special tokens
// after the characters) and says what differs otherwise.
func LoadTokenizer(path string) (*Tokenizer, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read tokenizer: %w", err)
	}
	t, err := parseTokenizer(raw)
	if err != nil {
		return nil, fmt.Errorf("tokenizer %s: %w", path, err)
	}
	return t, nil
}

func parseTokenizer(raw []byte) (*Tokenizer, error) {
	var h hfTokenizer
	if err := json.Unmarshal(raw, &h); err != nil {
		return nil, fmt.Errorf("decode: %w", err)
	}
	var errs []error
	if h.Model.Type != "WordLevel" {
		errs = append(errs, fmt.Errorf("model.type is %q, want \"WordLevel\"", h.Model.Type))
	}
	if h.PreTokenizer == nil || *h.PreTokenizer != (hfPreTokenizer{Type: "Split", Pattern: hfPattern{Regex: splitRegex}, Behavior: "Isolated"}) {
		errs = append(errs, fmt.Errorf("pre_tokenizer must be Split on %q with behavior Isolated", splitRegex))
	}
	for _, f := range []struct {
		key string
		v   json.RawMessage
	}{{"normalizer", h.Normalizer}, {"post_processor", h.PostProcessor}} {
		if s := strings.TrimSpace(string(f.v)); s != "" && s != "null" {
			errs = append(errs, fmt.Errorf("%s must be null, got %s", f.key, s))
		}
	}
	if h.Decoder == nil || h.Decoder.Type != "Fuse" {
		errs = append(errs, fmt.Errorf("decoder must be Fuse"))
	}
	var alphabet strings.Builder
	for id, tok := range h.Model.Vocab {
		if utf8.RuneCountInString(tok) != 1 {
			errs = append(errs, fmt.Errorf("vocabulary entry %d is %q, not a single character", id, tok))
		}
		alphabet.WriteString(tok)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	t, err := NewCharTokenizer(alphabet.String())
	if err != nil {
		return nil, err
	}
	want := t.hf().AddedTokens
	if !slices.Equal(h.AddedTokens, want) {
		return nil, fmt.Errorf("added_tokens must be %s, %s, %s with ids %d..%d, marked special and not normalized",
			EndOfText, ImStart, ImEnd, want[0].ID, want[len(want)-1].ID)
	}
	return t, nil
}
