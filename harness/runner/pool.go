package runner

import (
	"context"
	"runtime"
	"sync"
)

// runPool executes the pending jobs on at most workers goroutines
// (runtime.NumCPU() when 0), in order, recording each outcome in sum. Once
// ctx is cancelled no further job starts (its outcome stays not-started).
func runPool(ctx context.Context, x *executor, jobs []job, pending []int, workers int, sum *Summary) {
	if workers <= 0 {
		workers = runtime.NumCPU()
	}
	workers = min(workers, max(len(pending), 1))
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
				sum.Outcomes[i] = x.execute(ctx, jobs[i])
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
