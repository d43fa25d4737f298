// Command bench is `make bench`: it measures Switchboard's hot paths with wrk against a bare Echo handler that
// serves the same bytes, in the same run on the same machine, and prints a Markdown table of absolute numbers and
// ratios (DESIGN.md §8), then measures the webhook dispatcher (deliveries per second and commit-to-receiver latency,
// see webhooks.go).
//
// Absolute req/s depend on the machine; the ratio to the bare handler is what stays comparable between machines and
// runs, because it divides out the cost of the Go HTTP stack, the loopback network and wrk itself. Benchmarks are
// measurements, not tests: a ratio below its goal is reported, not failed. The command exits non-zero only when the
// measurement itself is broken (wrk missing, a server that does not answer, non-2xx responses or socket errors).
//
//	go run ./bench [-duration 10s] [-rounds 3] [-connections 32] [-skip-postgres] [-webhooks-only] [-cpuprofile file]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"syscall"
	"time"
)

// options are the command-line flags.
type options struct {
	duration     time.Duration
	rounds       int
	connections  int
	skipPostgres bool
	webhooksOnly bool
	cpuProfile   string
}

func main() {
	var o options
	flag.DurationVar(&o.duration, "duration", 10*time.Second, "length of each measured wrk run")
	flag.IntVar(&o.rounds, "rounds", 3, "measured runs per target, alternating targets; the table shows medians")
	flag.IntVar(&o.connections, "connections", 32, "concurrent connections wrk keeps open")
	flag.BoolVar(&o.skipPostgres, "skip-postgres", false, "measure SQLite only")
	flag.BoolVar(&o.webhooksOnly, "webhooks-only", false, "measure only the webhook dispatcher (wrk is not needed)")
	flag.StringVar(&o.cpuProfile, "cpuprofile", "",
		"write a CPU profile of the measured rounds (all servers run in this process) to this file")
	flag.Parse()
	if o.duration < time.Second || o.rounds < 1 || o.connections < 1 || flag.NArg() > 0 {
		fmt.Fprintln(os.Stderr, "bench: -duration must be at least 1s, -rounds and -connections at least 1, and no arguments")
		flag.Usage()
		os.Exit(2)
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, o, os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// modelsGoal is the least acceptable ratio of Switchboard's GET /api/v1/models throughput to the bare handler's.
const modelsGoal = 0.60

// warmUp is the length of the unmeasured run per target that fills caches and connection pools and lets the
// runtime grow its heap before the first measured round.
const warmUp = 2 * time.Second

// run measures the HTTP hot paths and then the webhook dispatcher, and prints their tables to out (progress goes to
// log). The CPU profile, when asked for, covers every measured round.
func run(ctx context.Context, o options, out, log io.Writer) error {
	prof := &profile{}
	if o.cpuProfile != "" {
		f, err := os.Create(o.cpuProfile)
		if err != nil {
			return err
		}
		prof.f = f
	}
	defer prof.stop()
	failed := 0
	if !o.webhooksOnly {
		n, err := runHTTP(ctx, o, prof, out, log)
		if err != nil {
			return err
		}
		failed += n
	}
	n, err := runWebhooks(ctx, o, prof, out, log)
	if err != nil {
		return err
	}
	if failed += n; failed > 0 {
		return fmt.Errorf("%d row(s) FAILED: the measurement is not valid (see the tables)", failed)
	}
	return nil
}

// profile is the CPU profile of the measured rounds: started before the first one (after the warm-ups), stopped at
// the end. Without a file it does nothing.
type profile struct {
	f       *os.File
	started bool
}

func (p *profile) start() error {
	if p.f == nil || p.started {
		return nil
	}
	p.started = true
	return pprof.StartCPUProfile(p.f)
}

func (p *profile) stop() {
	if p.started {
		pprof.StopCPUProfile()
	}
	if p.f != nil {
		_ = p.f.Close()
	}
}

// runHTTP starts every HTTP target, measures them with wrk and prints the table; it returns how many rows failed.
func runHTTP(ctx context.Context, o options, prof *profile, out, log io.Writer) (int, error) {
	wrk, err := exec.LookPath("wrk")
	if err != nil {
		return 0, errors.New("wrk not found in PATH: run `make tools` (installs Debian's wrk package) or apt-get install wrk")
	}
	tmp, err := os.MkdirTemp("", "switchboard-bench-")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(tmp)

	// The bare handler serves exactly the bytes Switchboard answers, so both rows write the same response and the
	// ratio measures only what Switchboard does around it.
	sqlite, err := startSwitchboard(ctx, "file:"+filepath.Join(tmp, "switchboard.db"))
	if err != nil {
		return 0, fmt.Errorf("Switchboard on SQLite: %w", err)
	}
	defer sqlite.close()
	body, err := fetch(ctx, sqlite.url+modelsPath, sqlite.headers())
	if err != nil {
		return 0, fmt.Errorf("Switchboard on SQLite: %w", err)
	}
	bare, err := startBare(body)
	if err != nil {
		return 0, fmt.Errorf("bare Echo: %w", err)
	}
	defer bare.close()

	// The baseline gets the same headers, so that wrk sends byte for byte the same requests to both.
	baseline := &scenario{name: "GET /api/v1/models — bare Echo (baseline)", url: bare.url + modelsPath,
		headers: sqlite.headers()}
	scenarios := []*scenario{baseline, modelsScenario("SQLite", sqlite, baseline)}

	var skipped string
	if o.skipPostgres {
		skipped = "-skip-postgres was given"
	} else {
		pgURL, drop, err := createPostgresDB(ctx)
		if err != nil {
			skipped = err.Error()
			fmt.Fprintln(log, "PostgreSQL rows skipped:", skipped)
		} else {
			defer func() {
				if err := drop(); err != nil {
					fmt.Fprintln(log, "bench:", err)
				}
			}()
			pg, err := startSwitchboard(ctx, pgURL)
			if err != nil {
				return 0, fmt.Errorf("Switchboard on PostgreSQL: %w", err)
			}
			defer pg.close()
			scenarios = append(scenarios, modelsScenario("PostgreSQL", pg, baseline))
		}
	}

	for _, sc := range scenarios {
		if err := sc.preflight(ctx); err != nil {
			return 0, err
		}
	}

	w := wrkRunner{path: wrk, connections: o.connections}
	for _, sc := range scenarios {
		if err := w.measure(ctx, sc, min(warmUp, o.duration)); err != nil {
			return 0, err
		}
		fmt.Fprintf(log, "warm-up    %-45s %s\n", sc.name, sc.runs[0])
		sc.runs = nil // the warm-up's failures stay recorded; its numbers are not measurements
	}
	if err := prof.start(); err != nil {
		return 0, err
	}
	// Alternating targets round by round spreads slow drifts of the machine (thermal throttling, noisy neighbours)
	// over every target instead of penalising whichever ran last.
	for r := 1; r <= o.rounds; r++ {
		for _, sc := range scenarios {
			if err := w.measure(ctx, sc, o.duration); err != nil {
				return 0, err
			}
			fmt.Fprintf(log, "round %d/%d  %-45s %s\n", r, o.rounds, sc.name, sc.runs[len(sc.runs)-1])
		}
	}

	fmt.Fprintf(out, "\nwrk -t1 -c%d -d%s --latency, medians of %d round(s) per target; %s %s/%s, %d CPUs, GOMAXPROCS %d\n\n",
		o.connections, wrkDuration(o.duration), o.rounds, runtime.Version(), runtime.GOOS, runtime.GOARCH,
		runtime.NumCPU(), runtime.GOMAXPROCS(0))
	failed := printTable(out, scenarios)
	if skipped != "" {
		fmt.Fprintf(out, "\nPostgreSQL rows skipped: %s\n", skipped)
	}
	return failed, nil
}

// modelsScenario is the GET /api/v1/models row of a Switchboard server on the named database.
func modelsScenario(database string, s *switchboard, baseline *scenario) *scenario {
	return &scenario{name: "GET /api/v1/models — Switchboard, " + database, url: s.url + modelsPath,
		headers: s.headers(), baseline: baseline, goal: modelsGoal}
}
