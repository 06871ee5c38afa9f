package runner

import (
	"context"
	"sync"

	"github.com/marlowlab/marlow/harness/engine"
)

// runPool executes the pending jobs on place.Jobs goroutines, in order,
// recording each outcome in sum. A run on GPUs holds one of place.Slots
// while it executes, so no two runs share a slot's devices; there are never
// more goroutines than slots when the plan uses GPUs, so a free slot is
// always there. Once ctx is cancelled no further job starts (its outcome
// stays not-started).
func runPool(ctx context.Context, x *executor, jobs []job, pending []int, place Placement, sum *Summary) {
	workers := min(max(place.Jobs, 1), max(len(pending), 1))
	free := make(chan []engine.Device, len(place.Slots))
	for _, s := range place.Slots {
		free <- s
	}
	next := make(chan int)
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if ctx.Err() != nil {
					continue // stays not-started
				}
				var devs []engine.Device
				if place.OnGPU(jobs[i].run.ID) {
					devs = <-free
				}
				sum.Outcomes[i] = x.execute(ctx, jobs[i], devs)
				if devs != nil {
					free <- devs
				}
			}
		}()
	}
feed:
	for _, i := range pending {
		if ctx.Err() != nil {
			break
		}
		select {
		case <-ctx.Done():
			break feed
		case next <- i:
		}
	}
	close(next)
	wg.Wait()
}
