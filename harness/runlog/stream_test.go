package runlog

import (
	"archive/tar"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/klauspost/compress/zstd"
)

// streamAll collects the runs StreamRuns gives, in path order.
func streamAll(t *testing.T, src string, opt StreamOptions) ([]*Run, int, error) {
	t.Helper()
	var mu sync.Mutex
	var got []StreamedRun
	n, err := StreamRuns(context.Background(), src, opt, func(sr StreamedRun) error {
		mu.Lock()
		got = append(got, sr)
		mu.Unlock()
		return nil
	})
	slices.SortFunc(got, func(a, b StreamedRun) int { return a.Index - b.Index })
	runs := make([]*Run, len(got))
	for i, g := range got {
		runs[i] = g.Run
	}
	return runs, n, err
}

// oddRows keeps every other sample row it is given.
type oddRows struct{ rows []SampleRow }

func (o *oddRows) Add(rows []SampleRow) {
	for _, r := range rows {
		if r.Rollout%2 == 1 {
			o.rows = append(o.rows, r)
		}
	}
}
func (o *oddRows) Rows() []SampleRow { return o.rows }

func TestStreamRunsMatchesReadRuns(t *testing.T) {
	root := filepath.Join(t.TempDir(), "runs")
	makeTree(t, root)
	arch := filepath.Join(t.TempDir(), "runs.tar.zst")
	if err := Archive(root, arch); err != nil {
		t.Fatal(err)
	}
	want, err := ReadRuns(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, src := range []string{root, arch} {
		for _, opt := range []StreamOptions{{Jobs: 1}, {Jobs: 3}, {Jobs: 3, BufferBytes: 1}} {
			got, n, err := streamAll(t, src, opt)
			if err != nil {
				t.Fatalf("%s jobs %d: %v", src, opt.Jobs, err)
			}
			if n != len(want) || len(got) != len(want) {
				t.Fatalf("%s jobs %d: %d runs found, %d given, want %d", src, opt.Jobs, n, len(got), len(want))
			}
			for i := range want {
				mustSameRun(t, got[i], want[i])
				if got[i].Manifest.RunID != want[i].Manifest.RunID || got[i].Digest != want[i].Digest {
					t.Errorf("%s jobs %d run %d: %s digest %s, want %s digest %s", src, opt.Jobs, i,
						got[i].Manifest.RunID, got[i].Digest, want[i].Manifest.RunID, want[i].Digest)
				}
			}
		}
	}

	// a reducer sees every row and keeps its subset in reader order;
	// Want leaves a run unread; prompts can be left out; a segment
	// without rows of the wanted splits is not decoded
	opt := StreamOptions{Jobs: 2, SkipPrompts: true, SkipTables: []string{TableTiming}, SampleSplits: []string{"train"},
		Samples: func(Manifest) SampleReducer { return &oddRows{} },
		Want:    func(m Manifest) bool { return m.RunID != "b" }}
	got, n, err := streamAll(t, arch, opt)
	if err != nil {
		t.Fatal(err)
	}
	if n != len(want) || len(got) != len(want)-1 {
		t.Fatalf("with Want: %d found, %d given, want %d and %d", n, len(got), len(want), len(want)-1)
	}
	for _, r := range got {
		i := slices.IndexFunc(want, func(w *Run) bool { return w.Manifest.RunID == r.Manifest.RunID })
		var odd []SampleRow
		for _, s := range want[i].Samples {
			if s.Rollout%2 == 1 {
				s.Prompt = ""
				odd = append(odd, s)
			}
		}
		mustSame(t, "reduced samples", r.Samples, odd)
		if len(r.Timing) != 0 {
			t.Errorf("run %s: %d timing rows read with timing/ skipped", r.Manifest.RunID, len(r.Timing))
		}
		mustSame(t, "steps", r.Steps, want[i].Steps)
	}
	opt.SampleSplits = []string{"no such split"}
	got, _, err = streamAll(t, arch, opt)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range got {
		if len(r.Samples) != 0 {
			t.Errorf("run %s: %d sample rows from segments without the splits asked for", r.Manifest.RunID, len(r.Samples))
		}
	}
}

// writeTarZst writes files (path, body), in order, as a .tar.zst archive.
func writeTarZst(t *testing.T, name string, files [][2]string) {
	t.Helper()
	f, err := os.Create(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zw, err := zstd.NewWriter(f)
	if err != nil {
		t.Fatal(err)
	}
	tw := tar.NewWriter(zw)
	for _, fl := range files {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: fl[0], Size: int64(len(fl[1])), Mode: 0o644}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(fl[1])); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestStreamRunsBadSources(t *testing.T) {
	root := filepath.Join(t.TempDir(), "runs")
	makeTree(t, root)
	read := func(p string) string {
		b, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(p)))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	dir := t.TempDir()
	// run a's segment after run b's manifest: not as Archive writes it
	scattered := filepath.Join(dir, "scattered.tar.zst")
	writeTarZst(t, scattered, [][2]string{
		{"exp/a/manifest.json", read("exp/a/manifest.json")},
		{"exp/b/manifest.json", read("exp/b/manifest.json")},
		{"exp/a/steps/000001.parquet", read("exp/a/steps/000001.parquet")},
	})
	// a table folder without a manifest
	orphan := filepath.Join(dir, "orphan.tar.zst")
	writeTarZst(t, orphan, [][2]string{{"exp/x/steps/000001.parquet", read("exp/a/steps/000001.parquet")}})
	// run a without the segments its manifest lists
	missing := filepath.Join(dir, "missing.tar.zst")
	writeTarZst(t, missing, [][2]string{{"exp/a/manifest.json", read("exp/a/manifest.json")}})
	// run a with an altered segment
	altered := filepath.Join(dir, "altered.tar.zst")
	seg := []byte(read("exp/a/steps/000001.parquet"))
	seg[len(seg)/2] ^= 0xff
	writeTarZst(t, altered, [][2]string{{"exp/a/manifest.json", read("exp/a/manifest.json")}, {"exp/a/steps/000001.parquet", string(seg)}})
	notZst := filepath.Join(dir, "plain.tar.zst")
	if err := os.WriteFile(notZst, []byte("not an archive"), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		src  string
		is   error
		text string
	}{
		{scattered, nil, "unpack the archive"},
		{orphan, ErrMissingManifest, "exp/x"},
		{missing, ErrMissingFile, "exp/a/"},
		{altered, ErrFileHash, "000001.parquet"},
		{notZst, nil, "not a"},
		{filepath.Join(dir, "absent"), os.ErrNotExist, "absent"},
	}
	for _, c := range cases {
		for _, jobs := range []int{1, 3} {
			_, _, err := streamAll(t, c.src, StreamOptions{Jobs: jobs})
			if err == nil {
				t.Errorf("%s: no error", filepath.Base(c.src))
				continue
			}
			if c.is != nil && !errors.Is(err, c.is) {
				t.Errorf("%s: %v, want %v", filepath.Base(c.src), err, c.is)
			}
			if !strings.Contains(err.Error(), c.text) {
				t.Errorf("%s: %v, want it to say %q", filepath.Base(c.src), err, c.text)
			}
		}
	}
}

func TestStreamRunsCallbackError(t *testing.T) {
	root := filepath.Join(t.TempDir(), "runs")
	makeTree(t, root)
	boom := errors.New("boom")
	for _, jobs := range []int{1, 3} {
		_, err := StreamRuns(context.Background(), root, StreamOptions{Jobs: jobs}, func(sr StreamedRun) error {
			if sr.Run.Manifest.RunID == "b" {
				return boom
			}
			return nil
		})
		if !errors.Is(err, boom) {
			t.Errorf("jobs %d: %v, want the callback's error", jobs, err)
		}
	}
}

// TestArchiveBadEntries: an archive entry with an invalid path or of a
// type other than folder or file is refused, naming it, by both readers
// of archives (unpacked into memory and streamed).
func TestArchiveBadEntries(t *testing.T) {
	cases := []struct {
		name string
		hdr  tar.Header
		want string
	}{
		{"parent path", tar.Header{Typeflag: tar.TypeReg, Name: "../x", Mode: 0o644}, `archive entry "../x" has an invalid path`},
		{"absolute path", tar.Header{Typeflag: tar.TypeReg, Name: "/x", Mode: 0o644}, `archive entry "/x" has an invalid path`},
		{"root", tar.Header{Typeflag: tar.TypeDir, Name: "./", Mode: 0o755}, `archive entry "./" has an invalid path`},
		{"symlink", tar.Header{Typeflag: tar.TypeSymlink, Name: "exp/l", Linkname: "a", Mode: 0o777}, "archive entry exp/l has unsupported type"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			name := filepath.Join(t.TempDir(), "bad.tar.zst")
			f, err := os.Create(name)
			if err != nil {
				t.Fatal(err)
			}
			zw, err := zstd.NewWriter(f)
			if err != nil {
				t.Fatal(err)
			}
			tw := tar.NewWriter(zw)
			if err := tw.WriteHeader(&c.hdr); err != nil {
				t.Fatal(err)
			}
			if err := errors.Join(tw.Close(), zw.Close(), f.Close()); err != nil {
				t.Fatal(err)
			}
			if _, err := readArchive(name); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("readArchive: err = %v, want one containing %q", err, c.want)
			}
			_, err = StreamRuns(context.Background(), name, StreamOptions{Jobs: 1}, func(StreamedRun) error { return nil })
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("StreamRuns: err = %v, want one containing %q", err, c.want)
			}
		})
	}
}
