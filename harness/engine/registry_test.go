package engine

import (
	"context"
	"errors"
	"strings"
	"testing"
)

func TestRegistry(t *testing.T) {
	var opened Options
	reg := &Registry{}
	good := Driver{Name: "good", Version: "good/1", Open: func(_ context.Context, dir string, opt Options) (Engine, error) {
		opened = opt
		return nil, nil
	}}
	lacking := Driver{Name: "lacking", Version: "lacking/1",
		Check: func(context.Context, Options) []error {
			return []error{errors.New("python3 not found"), errors.New("package transformers missing")}
		},
		Open: func(context.Context, string, Options) (Engine, error) { return nil, errors.New("cannot start") }}
	for _, d := range []Driver{good, lacking} {
		if err := reg.Register(d); err != nil {
			t.Fatal(err)
		}
	}
	if err := reg.Register(good); err == nil || !strings.Contains(err.Error(), "already registered") {
		t.Fatalf("second registration: %v", err)
	}
	if err := reg.Register(Driver{Name: "x"}); err == nil {
		t.Fatal("a driver without Open registered")
	}
	if got := strings.Join(reg.Names(), " "); got != "good lacking" {
		t.Fatalf("names %q", got)
	}
	if err := reg.Check(context.Background(), Options{}, "good", "good"); err != nil {
		t.Fatal(err)
	}
	err := reg.Check(context.Background(), Options{}, "good", "lacking", "torch")
	if !errors.Is(err, ErrUnavailable) {
		t.Fatalf("err %v", err)
	}
	for _, want := range []string{"engine lacking: python3 not found", "engine lacking: package transformers missing", `engine "torch" is not registered in this program (have good, lacking)`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("check error lacks %q:\n%v", want, err)
		}
	}
	if _, v, err := reg.Open(context.Background(), "good", "dir", Options{}); err != nil || v != "good/1" || opened.Threads != 1 {
		t.Fatalf("open: %v %q %+v", err, v, opened)
	}
	if _, _, err := reg.Open(context.Background(), "lacking", "dir", Options{}); err == nil || !strings.Contains(err.Error(), "open engine lacking: cannot start") {
		t.Fatalf("open: %v", err)
	}
	if _, _, err := reg.Open(context.Background(), "torch", "dir", Options{}); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("open unregistered: %v", err)
	}
}

// TestNilRegistry: a nil registry is empty for reading, so an option left
// nil refuses every engine by name, and refuses registrations.
func TestNilRegistry(t *testing.T) {
	var reg *Registry
	if n := reg.Names(); len(n) != 0 {
		t.Errorf("names %v", n)
	}
	if _, err := reg.Driver("native"); !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), `engine "native" is not registered in this program (have none)`) {
		t.Errorf("driver: %v", err)
	}
	if _, _, err := reg.Open(context.Background(), "native", "dir", Options{}); !errors.Is(err, ErrUnavailable) {
		t.Errorf("open: %v", err)
	}
	if err := reg.Check(context.Background(), Options{}, "native"); !errors.Is(err, ErrUnavailable) {
		t.Errorf("check: %v", err)
	}
	if err := reg.Check(context.Background(), Options{}); err != nil {
		t.Errorf("check of no engines: %v", err)
	}
	if err := reg.Register(Driver{Name: "x", Open: func(context.Context, string, Options) (Engine, error) { return nil, nil }}); err == nil {
		t.Error("a nil registry accepted a driver")
	}
}
