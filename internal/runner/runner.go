// Package runner owns the background work of a serve process. Every job — the HTTP server, the webhook
// dispatcher, the click recorder, announcers, pruners, listeners — is added to one Runner in main and started and
// stopped by it, so that no constructor starts a goroutine that could outlive the database it uses.
//
// Jobs stop in stages: when the process is told to stop, the jobs of stage 0 are stopped together, and only when
// all of them have returned are those of stage 1 stopped, and so on. That is how a shutdown drains in the right
// order: the HTTP server and the webhook dispatcher drain side by side (stage 0), then the click recorder drains
// what the last requests recorded (stage 1), and only after Run returned does main close the database.
package runner

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
)

// Job is background work: Run runs until ctx ends, then finishes what it holds and returns.
type Job struct {
	Name  string
	Stage int
	Run   func(ctx context.Context) error
}

// Runner runs jobs until it is told to stop. Add every job before Run.
type Runner struct {
	log  *slog.Logger
	jobs []Job
}

// New returns a runner that logs a job's failure.
func New(log *slog.Logger) *Runner {
	if log == nil {
		log = slog.Default()
	}
	return &Runner{log: log}
}

// Go adds a job to a stage: stage 0 stops first.
func (r *Runner) Go(stage int, name string, run func(ctx context.Context) error) {
	r.jobs = append(r.jobs, Job{Name: name, Stage: stage, Run: run})
}

// Run starts every job and returns when all have returned: after ctx ends, or after a job returned an error (the
// others are then stopped as if ctx had ended). A job that returns nil before it is stopped is simply done. Run
// returns the jobs' errors, each named after its job.
func (r *Runner) Run(ctx context.Context) error {
	stages := map[int][]Job{}
	for _, j := range r.jobs {
		stages[j.Stage] = append(stages[j.Stage], j)
	}
	order := make([]int, 0, len(stages))
	for s := range stages {
		order = append(order, s)
	}
	slices.Sort(order)

	failed := make(chan struct{})
	var once sync.Once
	var mu sync.Mutex
	var errs []error
	type running struct {
		cancel context.CancelFunc
		wg     *sync.WaitGroup
	}
	run := make([]running, len(order))
	for i, s := range order {
		jobCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		wg := &sync.WaitGroup{}
		run[i] = running{cancel, wg}
		for _, j := range stages[s] {
			wg.Go(func() {
				if err := j.Run(jobCtx); err != nil {
					r.log.Error("background job failed", "job", j.Name, "error", err)
					mu.Lock()
					errs = append(errs, fmt.Errorf("%s: %w", j.Name, err))
					mu.Unlock()
					once.Do(func() { close(failed) })
				}
			})
		}
	}
	select {
	case <-ctx.Done():
	case <-failed:
	}
	for _, st := range run {
		st.cancel()
		st.wg.Wait()
	}
	return errors.Join(errs...)
}
