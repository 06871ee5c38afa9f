package native

import (
	"context"
	"strings"
	"testing"

	"github.com/marlowlab/marlow/harness/engine"
)

// TestCheckRefusesFusedBuild: the driver's check refuses a GOAMD64=v3 build
// (fused multiply-adds change the logged bits) and passes any other; run
// with GOAMD64=v3 to see the refusal.
func TestCheckRefusesFusedBuild(t *testing.T) {
	errs := Driver().Check(context.Background(), engine.Options{})
	if fusedMultiplyAdds {
		if len(errs) != 1 || !strings.Contains(errs[0].Error(), "GOAMD64=v1") {
			t.Fatalf("fused build: check gave %v, want one error naming GOAMD64=v1", errs)
		}
		return
	}
	if len(errs) != 0 {
		t.Fatalf("check of a GOAMD64=v1 build: %v", errs)
	}
}
