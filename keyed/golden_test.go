package keyed

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/golden.json from the Go functions")

const goldenFile = "testdata/golden.json"

// hex64 is a 64-bit word written as a JSON string "0x" + 16 lowercase hex
// digits; float64 values are written as their IEEE-754 bits.
type hex64 uint64

func (h hex64) MarshalJSON() ([]byte, error) {
	return []byte(fmt.Sprintf(`"0x%016x"`, uint64(h))), nil
}

func (h *hex64) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	if len(s) != 18 || s[:2] != "0x" {
		return fmt.Errorf("%q is not 0x and 16 hex digits", s)
	}
	v, err := strconv.ParseUint(s[2:], 16, 64)
	if err != nil {
		return fmt.Errorf("%q: %w", s, err)
	}
	*h = hex64(v)
	return nil
}

func bitsOf(f float64) hex64 { return hex64(math.Float64bits(f)) }

func words(ws []hex64) []uint64 {
	out := make([]uint64, len(ws))
	for i, w := range ws {
		out[i] = uint64(w)
	}
	return out
}

type (
	wordCase struct {
		In  hex64 `json:"in"`
		Out hex64 `json:"out"`
	}
	wordsCase struct {
		Words []hex64 `json:"words"`
		Out   hex64   `json:"out"`
	}
	atCase struct {
		Key hex64  `json:"key"`
		I   uint64 `json:"i"`
		Out hex64  `json:"out"`
	}
	sampleCase struct {
		Seed     hex64 `json:"seed"`
		Position int   `json:"position"`
		Out      hex64 `json:"out"`
	}
	stringCase struct {
		In  string `json:"in"`
		Out hex64  `json:"out"`
	}
	purposeCase struct {
		Seed    hex64   `json:"seed"`
		Purpose string  `json:"purpose"`
		Index   []hex64 `json:"index"`
		Out     hex64   `json:"out"`
	}
	streamCase struct {
		Key hex64   `json:"key"`
		Out []hex64 `json:"out"`
	}
)

// goldenTable is the layout of testdata/golden.json (see its comment).
// The first five sections are the contract with the torch server's Python
// port; the others pin the workflow and data-set key schemes.
type goldenTable struct {
	Comment       string        `json:"comment"`
	Mix64         []wordCase    `json:"mix64"`
	HashKey       []wordsCase   `json:"hash_key"`
	Uniform01     []wordCase    `json:"uniform01"`
	UniformAt     []atCase      `json:"uniform_at"`
	SampleUniform []sampleCase  `json:"sample_uniform"`
	SeedKey       []wordsCase   `json:"seed_key"`
	FNV1a64       []stringCase  `json:"fnv1a64"`
	PurposeKey    []purposeCase `json:"purpose_key"`
	Stream        []streamCase  `json:"stream"`
}

const goldenComment = "Golden values of package github.com/marlowlab/marlow/keyed, written by " +
	"`go test ./keyed -run TestGolden -update` and checked by `go test ./keyed` (Go) and by the torch " +
	"server's pytest suite (its Python port). Every 64-bit integer is \"0x\" and 16 lowercase hex digits; " +
	"every float64 is given by its IEEE-754 bits in the same form. Inputs are edge words (0, 1, 2, 2^64-1, " +
	"2^63, the purposes 0x696e6974 init, 0x6c6f7261 LoRA, 0x73616d70 sample, 0x6d61726c6f77 \"marlow\", the " +
	"SplitMix64 increment 0x9e3779b97f4a7c15) and words of the SplitMix64 stream started at 20260101. " +
	"mix64(z): the SplitMix64 finaliser (z ^= z>>30; z *= 0xbf58476d1ce4e5b9; z ^= z>>27; " +
	"z *= 0x94d049bb133111eb; z ^= z>>31). hash_key(words): h = 0x6d61726c6f77, then for each word w " +
	"h = mix64(h + G + w*G ^ mix64(w)) with G = 0x9e3779b97f4a7c15, all mod 2^64 (* before +, + before ^). " +
	"uniform01(h) = float64(h>>11) * 2^-53. uniform_at(key, i) = 2*uniform01(mix64(key ^ (i+1)*G)) - 1. " +
	"sample_uniform(seed, position) = uniform01(mix64(hash_key(seed, 0x73616d70, position))), the uniform at " +
	"which both engines invert the sampling CDF. Further sections pin the Go-only key schemes: " +
	"seed_key(words): h = 0x6d61726c6f77, then h = mix64(h ^ w + G) per word (the workflow request seeds); " +
	"fnv1a64(s): 64-bit FNV-1a of the UTF-8 bytes; purpose_key(seed, purpose, index) = keyed.Key, the " +
	"data-set stream keys; stream(key): the first draws of the SplitMix64 generator at state key " +
	"(state += G; out = mix64(state))."

// edgeWords are the edge inputs every section starts from.
var edgeWords = []uint64{0, 1, 2, math.MaxUint64, 1 << 63, math.MaxInt64, PurposeInit, PurposeLoRA, PurposeSample,
	marlowWord, Golden, 0x7ff, 0x800, 0xfffffffffffff800}

// streamWords returns n words of the SplitMix64 stream started at 20260101.
func streamWords(n int) []uint64 {
	r := Stream(20260101)
	out := make([]uint64, n)
	for i := range out {
		out[i] = r.Uint64()
	}
	return out
}

func hexes(ws ...uint64) []hex64 {
	out := make([]hex64, len(ws))
	for i, w := range ws {
		out[i] = hex64(w)
	}
	return out
}

// makeGolden computes the table from the Go functions.
func makeGolden() goldenTable {
	g := goldenTable{Comment: goldenComment}
	ins := append(append([]uint64(nil), edgeWords...), streamWords(10)...)
	rnd := streamWords(40)
	for _, z := range ins {
		g.Mix64 = append(g.Mix64, wordCase{hex64(z), hex64(Mix64(z))})
		g.Uniform01 = append(g.Uniform01, wordCase{hex64(z), bitsOf(Uniform01(z))})
	}
	var wordLists [][]uint64
	wordLists = append(wordLists, []uint64{})
	for _, z := range edgeWords {
		wordLists = append(wordLists, []uint64{z})
	}
	wordLists = append(wordLists,
		[]uint64{0, 0}, []uint64{math.MaxUint64, math.MaxUint64, math.MaxUint64},
		[]uint64{20260101, PurposeInit, 0}, []uint64{20260101, PurposeInit, 17},
		[]uint64{7, PurposeLoRA, 0, 0}, []uint64{7, PurposeLoRA, 27, 6},
		[]uint64{rnd[0], PurposeSample, 0}, []uint64{rnd[1], PurposeSample, 511},
		rnd[2:3], rnd[3:5], rnd[5:8], rnd[8:12], rnd[12:17])
	for _, ws := range wordLists {
		g.HashKey = append(g.HashKey, wordsCase{hexes(ws...), hex64(HashKey(ws...))})
		g.SeedKey = append(g.SeedKey, wordsCase{hexes(ws...), hex64(SeedKey(ws...))})
	}
	is := []uint64{0, 1, 2, 5, 7, 63, 64, 1000, 65535, 1 << 20, 1 << 32, 1<<53 - 1}
	keys := append(append([]uint64(nil), edgeWords...), HashKey(7, PurposeLoRA, 3, 2), rnd[17], rnd[18])
	for k, key := range keys {
		for _, i := range []uint64{is[k%len(is)], is[(k+5)%len(is)]} {
			g.UniformAt = append(g.UniformAt, atCase{hex64(key), i, bitsOf(UniformAt(key, i))})
		}
	}
	positions := []int{0, 1, 2, 7, 31, 255, 4095, 32767, 1 << 20}
	seeds := append(append([]uint64(nil), edgeWords...), rnd[19:24]...)
	for k, seed := range seeds {
		for _, p := range []int{positions[k%len(positions)], positions[(k+4)%len(positions)]} {
			g.SampleUniform = append(g.SampleUniform, sampleCase{hex64(seed), p, bitsOf(SampleUniform(seed, p))})
		}
	}
	for _, s := range []string{"", "a", "b", "ab", "ba", "train", "val", "generator1", "generator2", "orchestrator1",
		"verifier1", "datasets/split", "datasets/holdout", "synthmath/train", "h\u00e9llo", "\x00", "\x00\x00", "\u007f"} {
		g.FNV1a64 = append(g.FNV1a64, stringCase{s, hex64(FNV1a64(s))})
	}
	purposes := []struct {
		seed    uint64
		purpose string
		index   []uint64
	}{
		{0, "", nil}, {1, "", nil}, {math.MaxUint64, "", nil}, {0, "x", nil}, {1, "x", []uint64{2, 3}},
		{1, "x", []uint64{3, 2}}, {1, "x", []uint64{2, 3, 0}}, {1, "xy", nil}, {1, "x", []uint64{0}},
		{7, "datasets/epoch", []uint64{0}}, {7, "datasets/epoch", []uint64{1}},
		{20260101, "synthmath/train", []uint64{41}}, {20260101, "synthcode/val", []uint64{3}},
		{20260101, "pretrain/role", []uint64{math.MaxUint64}}, {rnd[24], "rollout", rnd[25:28]},
		{rnd[28], "h\u00e9llo", rnd[29:30]},
	}
	for _, p := range purposes {
		g.PurposeKey = append(g.PurposeKey, purposeCase{hex64(p.seed), p.purpose, hexes(p.index...), hex64(Key(p.seed, p.purpose, p.index...))})
	}
	for _, key := range append(append([]uint64(nil), edgeWords...), rnd[30:34]...) {
		r := Stream(key)
		g.Stream = append(g.Stream, streamCase{Key: hex64(key), Out: hexes(r.Uint64(), r.Uint64(), r.Uint64())})
	}
	return g
}

func encodeGolden(g goldenTable) ([]byte, error) {
	b, err := json.MarshalIndent(g, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// TestGolden checks testdata/golden.json against the Go functions: every
// output recomputed from its case's inputs, and the whole file byte for
// byte against what -update writes. With -update it rewrites the file.
func TestGolden(t *testing.T) {
	want, err := encodeGolden(makeGolden())
	if err != nil {
		t.Fatal(err)
	}
	if *update {
		if err := os.MkdirAll(filepath.Dir(goldenFile), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(goldenFile, want, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	raw, err := os.ReadFile(goldenFile)
	if err != nil {
		t.Fatalf("%v (write it with go test ./keyed -run TestGolden -update)", err)
	}
	var g goldenTable
	if err := json.Unmarshal(raw, &g); err != nil {
		t.Fatalf("%s: %v", goldenFile, err)
	}
	checkGolden(t, g)
	if !bytes.Equal(raw, want) {
		t.Errorf("%s is not what the Go functions write (inputs or layout changed); if the change is intended "+
			"(it changes the bits of every run), rewrite it with go test ./keyed -run TestGolden -update", goldenFile)
	}
}

// checkGolden recomputes every case of g and reports each mismatch.
func checkGolden(t *testing.T, g goldenTable) {
	t.Helper()
	bad := func(section string, i int, in any, got, want hex64) {
		if got != want {
			t.Errorf("%s case %d (%v): Go gives %#016x, %s has %#016x", section, i, in, uint64(got), goldenFile, uint64(want))
		}
	}
	sections := map[string]int{"mix64": len(g.Mix64), "hash_key": len(g.HashKey), "uniform01": len(g.Uniform01),
		"uniform_at": len(g.UniformAt), "sample_uniform": len(g.SampleUniform), "seed_key": len(g.SeedKey),
		"fnv1a64": len(g.FNV1a64), "purpose_key": len(g.PurposeKey), "stream": len(g.Stream)}
	for name, n := range sections {
		if n < 16 {
			t.Errorf("%s: section %s has %d cases, want at least 16", goldenFile, name, n)
		}
	}
	for i, c := range g.Mix64 {
		bad("mix64", i, c.In, hex64(Mix64(uint64(c.In))), c.Out)
	}
	for i, c := range g.HashKey {
		bad("hash_key", i, c.Words, hex64(HashKey(words(c.Words)...)), c.Out)
	}
	for i, c := range g.Uniform01 {
		bad("uniform01", i, c.In, bitsOf(Uniform01(uint64(c.In))), c.Out)
	}
	for i, c := range g.UniformAt {
		bad("uniform_at", i, c, bitsOf(UniformAt(uint64(c.Key), c.I)), c.Out)
	}
	for i, c := range g.SampleUniform {
		bad("sample_uniform", i, c, bitsOf(SampleUniform(uint64(c.Seed), c.Position)), c.Out)
	}
	for i, c := range g.SeedKey {
		bad("seed_key", i, c.Words, hex64(SeedKey(words(c.Words)...)), c.Out)
	}
	for i, c := range g.FNV1a64 {
		bad("fnv1a64", i, c.In, hex64(FNV1a64(c.In)), c.Out)
	}
	for i, c := range g.PurposeKey {
		bad("purpose_key", i, c, hex64(Key(uint64(c.Seed), c.Purpose, words(c.Index)...)), c.Out)
	}
	for i, c := range g.Stream {
		r := Stream(uint64(c.Key))
		for j, w := range c.Out {
			bad(fmt.Sprintf("stream draw %d", j), i, c.Key, hex64(r.Uint64()), w)
		}
	}
}

// TestReferenceValues pins the mixers to values published with the
// algorithms, independently of the golden table: the first output of
// SplitMix64 seeded with 0, and the FNV-1a test vectors.
func TestReferenceValues(t *testing.T) {
	cases := []struct {
		name      string
		got, want uint64
	}{
		{"SplitMix64(0)", SplitMix64(0), 0xe220a8397b1dcdaf},
		{"Stream(0) first draw", Stream(0).Uint64(), 0xe220a8397b1dcdaf},
		{"FNV1a64(\"\")", FNV1a64(""), 0xcbf29ce484222325},
		{"FNV1a64(\"a\")", FNV1a64("a"), 0xaf63dc4c8601ec8c},
		{"FNV1a64(\"foobar\")", FNV1a64("foobar"), 0x85944171f73967e8},
		{"FNV1a32(\"\")", uint64(FNV1a32("")), 0x811c9dc5},
		{"FNV1a32(\"a\")", uint64(FNV1a32("a")), 0xe40c292c},
		{"FNV1a32(\"foobar\")", uint64(FNV1a32("foobar")), 0xbf9cf968},
		{"HashKey()", HashKey(), 0x6d61726c6f77},
		{"SeedKey()", SeedKey(), 0x6d61726c6f77},
	}
	for _, c := range cases {
		if c.got != c.want {
			t.Errorf("%s = %#x, want %#x", c.name, c.got, c.want)
		}
	}
}

// TestDraws checks the ranges and identities the users rely on.
func TestDraws(t *testing.T) {
	if Uniform01(0) != 0 || Uniform01(math.MaxUint64) != 1-0x1p-53 {
		t.Errorf("Uniform01 range ends: %v %v", Uniform01(0), Uniform01(math.MaxUint64))
	}
	r := Stream(3)
	var sum, sq float64
	const n = 20000
	for i := 0; i < n; i++ {
		key, j := r.Uint64(), r.Uint64()%1000
		if u := UniformAt(key, j); u < -1 || u >= 1 || u != 2*Uniform01At(key, j)-1 {
			t.Fatalf("UniformAt(%#x, %d) = %v", key, j, u)
		}
		if u := SampleUniform(key, int(j)); u < 0 || u >= 1 {
			t.Fatalf("SampleUniform(%#x, %d) = %v", key, j, u)
		}
		z := NormalAt(key, j)
		sum += z
		sq += z * z
	}
	if mean, v := sum/n, sq/n-(sum/n)*(sum/n); math.Abs(mean) > 0.05 || math.Abs(v-1) > 0.05 {
		t.Errorf("NormalAt: mean %v variance %v", mean, v)
	}
	if SplitMix64(41) != Stream(41).Uint64() {
		t.Error("SplitMix64(x) is not the first draw of Stream(x)")
	}
}
