// Command bench is `make bench`: it measures Switchboard's hot paths with wrk against a bare Echo handler that serves
// the same bytes, in the same run on the same machine, and prints a Markdown table of absolute numbers and ratios to
// the bare handler (the goals are ratios, see below), then measures the webhook dispatcher (deliveries per second and
// commit-to-receiver latency, see webhooks.go).
//
// Absolute req/s depend on the machine; the ratio to the bare handler is what stays comparable between machines and
// runs, because it divides out the cost of the Go HTTP stack, the loopback network and wrk itself. Benchmarks are
// measurements, not tests: a ratio below its goal is reported, not failed. The command exits non-zero only when the
// measurement itself is broken (wrk missing, a server that does not answer, non-2xx responses or socket errors).
//
//	go run ./bench [-duration 10s] [-rounds 3] [-connections 32] [-skip-postgres] [-webhooks-only] [-channels-only] [-rows regexp] [-cpuprofile file]
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
	"regexp"
	"runtime"
	"runtime/pprof"
	"slices"
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
	channelsOnly bool
	streamsOnly  bool
	brokersOnly  bool
	channelScale int
	scaleOnly    bool
	cpuProfile   string
	rows         *regexp.Regexp
}

func main() {
	if os.Getenv(streamClientsEnv) != "" {
		if err := streamClientsMain(); err != nil {
			fmt.Fprintln(os.Stderr, "bench: stream clients:", err)
			os.Exit(1)
		}
		return
	}
	var o options
	flag.DurationVar(&o.duration, "duration", 10*time.Second, "length of each measured wrk run")
	flag.IntVar(&o.rounds, "rounds", 3, "measured runs per target, alternating targets; the table shows medians")
	flag.IntVar(&o.connections, "connections", 32, "concurrent connections wrk keeps open")
	flag.BoolVar(&o.skipPostgres, "skip-postgres", false, "measure SQLite only")
	flag.BoolVar(&o.webhooksOnly, "webhooks-only", false, "measure only the webhook dispatcher (wrk is not needed)")
	flag.BoolVar(&o.channelsOnly, "channels-only", false, "measure only the messaging rows (wrk is not needed)")
	flag.BoolVar(&o.streamsOnly, "streams-only", false, "measure only the event stream rows (wrk is not needed)")
	flag.BoolVar(&o.brokersOnly, "brokers-only", false, "measure only the broker delivery rows (wrk is not needed)")
	flag.IntVar(&o.channelScale, "channel-scale", 1000, "sandbox instances the messaging scale row connects and restarts (0: no scale row)")
	flag.BoolVar(&o.scaleOnly, "scale-only", false, "with -channels-only: measure only the messaging scale row (no throughput or latency rounds)")
	flag.StringVar(&o.cpuProfile, "cpuprofile", "",
		"write a CPU profile of the measured rounds (all servers run in this process) to this file")
	rows := flag.String("rows", "", "measure only the rows whose name matches this regular expression (and their baselines)")
	flag.Parse()
	var err error
	if o.rows, err = regexp.Compile(*rows); err != nil {
		fmt.Fprintln(os.Stderr, "bench: -rows:", err)
		os.Exit(2)
	}
	if o.duration < time.Second || o.rounds < 1 || o.connections < 1 || flag.NArg() > 0 {
		fmt.Fprintln(os.Stderr, "bench: -duration must be at least 1s, -rounds and -connections at least 1, and no arguments")
		flag.Usage()
		os.Exit(2)
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err = run(ctx, o, os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// modelsGoal is the least acceptable ratio of Switchboard's GET /api/v1/models throughput to the bare handler's
// (0.60 before; 0.63–0.69 was measured on a quiet machine, so the bar moved up to what a lean API layer should keep).
const modelsGoal = 0.75

// warmUp is the length of the unmeasured run per target that fills caches and connection pools and lets the
// runtime grow its heap before the first measured round.
const warmUp = 2 * time.Second

// database is a Switchboard server over one database, with its links.
type database struct {
	name      string
	sb        *switchboard
	links     linkSetup
	ingestURL string
	spoolDir  string
	hot       *scenario // the hot-link redirect row
}

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
	limits := measureDBLimits(ctx, o, log)
	if o.streamsOnly {
		// The profile covers the whole section: the clients' setup is a small part of it.
		if err := prof.start(); err != nil {
			return err
		}
		return rowsFailed(runStreams(ctx, o, out, log))
	}
	if o.brokersOnly {
		return rowsFailed(runBrokers(ctx, o, out, log))
	}
	if !o.webhooksOnly && !o.channelsOnly {
		n, err := runHTTP(ctx, o, prof, out, log)
		if err != nil {
			return err
		}
		failed += n
	}
	if !o.channelsOnly {
		n, err := runWebhooks(ctx, o, prof, out, log)
		if err != nil {
			return err
		}
		failed += n
	}
	if !o.webhooksOnly {
		n, err := runChannels(ctx, o, prof, out, log)
		if err != nil {
			return err
		}
		failed += n
	}
	if !o.webhooksOnly && !o.channelsOnly {
		for _, section := range []func(context.Context, options, io.Writer, io.Writer) (int, error){runStreams, runBrokers} {
			n, err := section(ctx, o, out, log)
			if err != nil {
				return err
			}
			failed += n
		}
	}
	printDBLimits(out, limits)
	if failed > 0 {
		return fmt.Errorf("%d row(s) FAILED: the measurement is not valid (see the tables)", failed)
	}
	return nil
}

// rowsFailed is run's verdict on one section's result.
func rowsFailed(failed int, err error) error {
	if err == nil && failed > 0 {
		err = fmt.Errorf("%d row(s) FAILED: the measurement is not valid (see the tables)", failed)
	}
	return err
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

	sqlite, err := startSwitchboard(ctx, "file:"+filepath.Join(tmp, "switchboard.db"), filepath.Join(tmp, "spool-sqlite"))
	if err != nil {
		return 0, fmt.Errorf("Switchboard on SQLite: %w", err)
	}
	defer sqlite.close()
	dbs := []*database{{name: "SQLite", sb: sqlite, spoolDir: filepath.Join(tmp, "spool-sqlite")}}
	pgURL, dropPG, skipped := benchPostgres(ctx, o, true, log)
	defer dropPG()
	if pgURL != "" {
		pg, err := startSwitchboard(ctx, pgURL, filepath.Join(tmp, "spool-postgres"))
		if err != nil {
			return 0, fmt.Errorf("Switchboard on PostgreSQL: %w", err)
		}
		defer pg.close()
		dbs = append(dbs, &database{name: "PostgreSQL", sb: pg, spoolDir: filepath.Join(tmp, "spool-postgres")})
	} else if skipped != "" && !o.skipPostgres {
		fmt.Fprintln(log, "PostgreSQL rows skipped:", skipped)
	}
	for _, db := range dbs {
		if db.links, err = setupLinks(ctx, db.sb); err != nil {
			return 0, fmt.Errorf("links on %s: %w", db.name, err)
		}
		if db.ingestURL, err = setupIngest(ctx, db.sb); err != nil {
			return 0, fmt.Errorf("ingest on %s: %w", db.name, err)
		}
	}

	// The bare handlers serve exactly the bytes Switchboard answers, so both rows write the same response and the
	// ratio measures only what Switchboard does around it.
	body, err := fetch(ctx, sqlite.url+modelsPath, sqlite.headers())
	if err != nil {
		return 0, fmt.Errorf("Switchboard on SQLite: %w", err)
	}
	bare, err := startBare(body)
	if err != nil {
		return 0, fmt.Errorf("bare Echo: %w", err)
	}
	defer bare.close()
	bareRedirect, err := startBareRedirect(redirectLocation)
	if err != nil {
		return 0, fmt.Errorf("bare Echo: %w", err)
	}
	defer bareRedirect.close()
	hotScript, uniformScript, err := writeScripts(tmp)
	if err != nil {
		return 0, err
	}
	bareIngest, err := startBareIngest()
	if err != nil {
		return 0, fmt.Errorf("bare Echo: %w", err)
	}
	defer bareIngest.close()
	ingestScript, err := writeIngestScript(tmp)
	if err != nil {
		return 0, err
	}

	// The baseline gets the same headers, so that wrk sends byte for byte the same requests to both.
	modelsBaseline := &scenario{name: "GET /api/v1/models — bare Echo (baseline)", url: bare.url + modelsPath,
		headers: sqlite.headers()}
	redirectBaseline := &scenario{name: "GET /{slug} 302 — bare Echo (baseline)", url: bareRedirect.url + "/hot",
		script: hotScript}
	scenarios := []*scenario{modelsBaseline}
	for _, db := range dbs {
		scenarios = append(scenarios, modelsScenario(db.name, db.sb, modelsBaseline))
	}
	scenarios = append(scenarios, redirectBaseline)
	redirectRows := map[*scenario]*switchboard{}
	for _, db := range dbs {
		hot := &scenario{name: "GET /{slug} hot link, clicks recorded — " + db.name, url: db.sb.url + "/hot",
			script: hotScript, baseline: redirectBaseline, goal: redirectGoal}
		uniform := &scenario{name: fmt.Sprintf("GET /{slug} %d uniform links (vs hot) — %s", uniformLinks, db.name),
			url: db.sb.url + "/u0", script: uniformScript, baseline: hot, goal: uniformGoal}
		redirectRows[hot], redirectRows[uniform] = db.sb, db.sb
		db.hot = hot
		scenarios = append(scenarios, hot, uniform)
	}
	ingestBaseline := &scenario{name: "POST a signed JSON body — bare Echo (baseline)", url: bareIngest.url + ingestPath,
		script: ingestScript, post: []byte(ingestBody), postHeaders: []string{"Content-Type: application/json", ingestSignature()}}
	scenarios = append(scenarios, ingestBaseline)
	for _, db := range dbs {
		scenarios = append(scenarios, &scenario{name: "POST /in/{token} HMAC-verified, stored before 200 — " + db.name,
			url: db.ingestURL, script: ingestScript, baseline: ingestBaseline, minRPS: ingestGoal[db.name],
			post: []byte(ingestBody), postHeaders: []string{"Content-Type: application/json", ingestSignature()}})
	}

	var replicas *replicaSetup
	var replicasSkipped string
	if !o.skipPostgres && skipped == "" && slices.ContainsFunc(replicaRowNames(), o.rows.MatchString) {
		if replicas, err = startReplicas(ctx, tmp, bare.url, bareRedirect.url, hotScript, log); err != nil {
			fmt.Fprintln(log, "replica rows skipped:", err)
			replicasSkipped = err.Error()
		} else {
			defer replicas.close()
			scenarios = append(scenarios, replicas.scenarios...)
		}
	}

	scenarios = selectRows(scenarios, o.rows)
	for _, sc := range scenarios {
		if err := sc.preflight(ctx); err != nil {
			return 0, err
		}
	}
	w := wrkRunner{path: wrk, connections: o.connections}
	// measure runs one row and, for a redirect row, waits until its clicks are all in the database, so that the
	// writing of one row's clicks never runs during the next row.
	measure := func(sc *scenario, d time.Duration, label string) error {
		if err := w.measure(ctx, sc, d); err != nil {
			return err
		}
		line := fmt.Sprintf("%-10s %-62s %s", label, sc.name, sc.runs[len(sc.runs)-1])
		drain := replicaDrain(replicas, sc)
		if sb := redirectRows[sc]; sb != nil {
			drain = sb.drain
		}
		if drain != nil {
			took, err := drain(ctx)
			if err != nil {
				return err
			}
			line += fmt.Sprintf("  (clicks stored %s after the run)", took.Round(time.Millisecond))
		}
		fmt.Fprintln(log, line)
		return nil
	}
	for _, sc := range scenarios {
		if err := measure(sc, min(warmUp, o.duration), "warm-up"); err != nil {
			return 0, err
		}
		sc.runs = nil // the warm-up's failures stay recorded; its numbers are not measurements
	}
	if err := prof.start(); err != nil {
		return 0, err
	}
	// Alternating targets round by round spreads slow drifts of the machine (thermal throttling, noisy neighbours)
	// over every target instead of penalising whichever ran last.
	for r := 1; r <= o.rounds; r++ {
		for _, sc := range scenarios {
			if err := measure(sc, o.duration, fmt.Sprintf("round %d/%d", r, o.rounds)); err != nil {
				return 0, err
			}
		}
	}

	var ms []measurement
	var replays []replayRow
	for _, db := range dbs {
		bulk := fmt.Sprintf("POST /api/v1/links/bulk, %d links — %s", bulkSize, db.name)
		if o.rows.MatchString(bulk) {
			ms = append(ms, measurement{name: bulk, samples: db.links.bulk, goal: bulkGoal})
		}
		if idle := "redirect → counted in stats, idle — " + db.name; o.rows.MatchString(idle) {
			samples, err := db.sb.measureVisibility(ctx, db.links.visibleID, 50)
			if err != nil {
				return 0, fmt.Errorf("%s: %w", db.name, err)
			}
			ms = append(ms, measurement{name: idle, samples: samples, goal: visibleGoal})
		}
		for _, st := range []struct{ name, path string }{
			{"GET stats of a link with 1M clicks, 90 days by day — ", db.links.statsPath},
			{"GET stats by country of a link with 1M clicks, 90 days — ", db.links.countriesPath},
		} {
			if name := st.name + db.name; o.rows.MatchString(name) {
				samples, err := db.sb.timeRequests(ctx, st.path, 50)
				if err != nil {
					return 0, fmt.Errorf("%s: %w", db.name, err)
				}
				ms = append(ms, measurement{name: name, samples: samples, goal: statsGoal})
			}
		}
		schemaRows, err := measureSchemaBounds(ctx, db.sb, db.name, o.rows)
		if err != nil {
			return 0, fmt.Errorf("%s: schema bounds: %w", db.name, err)
		}
		ms = append(ms, schemaRows...)
		if steady := fmt.Sprintf("redirect → counted in stats, hot link at %d redirects/s — %s", steadyRate, db.name); o.rows.MatchString(steady) {
			stop := make(chan struct{})
			load := db.sb.steadyLoad("/hot", steadyRate, stop)
			samples, err := db.sb.measureVisibility(ctx, db.links.visibleID, 50)
			close(stop)
			load.Wait()
			if _, derr := db.sb.drain(ctx); err == nil {
				err = derr
			}
			if err != nil {
				return 0, fmt.Errorf("%s: %w", db.name, err)
			}
			ms = append(ms, measurement{name: steady, samples: samples, goal: visibleGoal})
		}
		if name := fmt.Sprintf("POST /in/{token} at %d/s → signed delivery at a receiver — %s", ingestDeliveryRate, db.name); o.rows.MatchString(name) {
			samples, err := measureIngestDelivery(ctx, db.sb, db.ingestURL, o.duration)
			if err != nil {
				return 0, fmt.Errorf("%s: %w", db.name, err)
			}
			ms = append(ms, measurement{name: name, samples: samples, goal: ingestDeliveryGoal, p99: true})
		}
		if name := "spool replay — " + db.name; o.rows.MatchString(name) {
			rows, err := measureReplay(ctx, w, db, db.spoolDir, db.hot, o.duration, log)
			if err != nil {
				return 0, fmt.Errorf("%s: replay: %w", db.name, err)
			}
			replays = append(replays, rows...)
		}
		if busy := "redirect → counted in stats, hot link under full load (wrk) — " + db.name; o.rows.MatchString(busy) {
			samples, err := visibleUnderLoad(ctx, w, db, hotScript, o.duration)
			if err != nil {
				return 0, fmt.Errorf("%s: %w", db.name, err)
			}
			ms = append(ms, measurement{name: busy, samples: samples, goal: visibleGoal})
		}
	}

	fmt.Fprintf(out, "\nwrk -t1 -c%d -d%s --latency, medians of %d round(s) per target; %s %s/%s, %d CPUs, GOMAXPROCS %d\n\n",
		o.connections, wrkDuration(o.duration), o.rounds, runtime.Version(), runtime.GOOS, runtime.GOARCH,
		runtime.NumCPU(), runtime.GOMAXPROCS(0))
	failed := printTable(out, scenarios)
	for _, sc := range scenarios {
		if sc.minRPS > 0 && len(sc.runs) > 0 {
			dbBound = append(dbBound, dbBoundRow{name: sc.name, database: databaseOf(sc.name), rate: sc.summary().rps, unit: "req/s"})
		}
	}
	if len(ms) > 0 {
		fmt.Fprintln(out)
		printMeasurements(out, ms)
	}
	if len(replays) > 0 {
		fmt.Fprintln(out)
		printReplay(out, replays)
	}
	if skipped != "" {
		fmt.Fprintf(out, "\nPostgreSQL rows skipped: %s\n", skipped)
	}
	if replicasSkipped != "" {
		fmt.Fprintf(out, "\nReplica rows skipped: %s\n", replicasSkipped)
	}
	return failed, nil
}

// selectRows keeps the rows whose names match and the baselines they are compared with, in their order.
func selectRows(all []*scenario, match *regexp.Regexp) []*scenario {
	keep := map[*scenario]bool{}
	for _, sc := range all {
		if match.MatchString(sc.name) {
			for b := sc; b != nil; b = b.baseline {
				keep[b] = true
			}
		}
	}
	var out []*scenario
	for _, sc := range all {
		if keep[sc] {
			out = append(out, sc)
		}
	}
	return out
}

// visibleUnderLoad measures the visibility of clicks of /vis while wrk loads the hot link of the same server.
func visibleUnderLoad(ctx context.Context, w wrkRunner, db *database, hotScript string, d time.Duration) ([]time.Duration, error) {
	load := &scenario{name: "load", url: db.sb.url + "/hot", script: hotScript}
	done := make(chan error, 1)
	go func() { done <- w.measure(ctx, load, d) }()
	var samples []time.Duration
	for {
		select {
		case err := <-done:
			if err == nil && len(samples) == 0 {
				err = errors.New("no sample during the load")
			}
			if _, derr := db.sb.drain(ctx); err == nil {
				err = derr
			}
			return samples, err
		default:
		}
		s, err := db.sb.measureVisibility(ctx, db.links.visibleID, 1)
		if err != nil {
			return nil, err
		}
		samples = append(samples, s...)
	}
}

// modelsScenario is the GET /api/v1/models row of a Switchboard server on the named database.
func modelsScenario(database string, s *switchboard, baseline *scenario) *scenario {
	return &scenario{name: "GET /api/v1/models — Switchboard, " + database, url: s.url + modelsPath,
		headers: s.headers(), baseline: baseline, goal: modelsGoal}
}
