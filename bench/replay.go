package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"time"

	"github.com/switchboard/switchboard/internal/links/clicks"
)

const (
	// replayClicks are spooled per replay row: an outage of about two minutes at the hot-link rate.
	replayClicks = 200_000
	// replayGoal is the least acceptable replay rate, in clicks per second, with no redirects coming in.
	replayGoal = 20_000.0
)

// replayRow is one replay of a spool: how fast the clicks reached the database and, under load, how fast redirects
// were served meanwhile.
type replayRow struct {
	name     string
	rate     float64 // clicks per second
	goal     float64 // 0: reported only
	redirect *scenario
}

// measureReplay drops replayClicks spooled clicks (as an outage leaves them, over 1 000 links and as many visitors)
// into the spool of a running server and measures how long its recorder takes to store them: alone, and while wrk
// sends redirects of the hot link at full speed (the redirect row's ratio against the bare Echo 302 must still meet
// its goal: the replay yields to live traffic).
func measureReplay(ctx context.Context, w wrkRunner, db *database, spoolDir string, hot *scenario, d time.Duration, log io.Writer) ([]replayRow, error) {
	var ids []string
	if err := db.sb.db.Bun().NewSelect().Table("links").Column("id").Order("id").Limit(1000).Scan(ctx, &ids); err != nil {
		return nil, err
	}
	hits := func() []clicks.Hit {
		out := make([]clicks.Hit, replayClicks)
		at := time.Now().Add(-2 * time.Minute)
		for i := range out {
			t := at.Add(time.Duration(i) * 2 * time.Minute / replayClicks)
			out[i] = clicks.Hit{ID: clicks.NewHitID(t), At: t, LinkID: ids[i%len(ids)], UserAgent: browserAgent,
				IP: fmt.Sprintf("198.18.%d.%d", (i/1000)%250, i%250)}
		}
		return out
	}
	replay := func() (float64, error) {
		if err := clicks.WriteSegment(spoolDir, hits()); err != nil {
			return 0, err
		}
		took, err := db.sb.drain(ctx)
		return replayClicks / took.Seconds(), err
	}

	alone, err := replay()
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(log, "replay     %d spooled clicks, no redirects — %s: %.0f clicks/s\n", replayClicks, db.name, alone)
	loaded := &scenario{name: "GET /{slug} hot link during a spool replay — " + db.name, url: hot.url, script: hot.script,
		baseline: hot.baseline, goal: hot.goal}
	if err := clicks.WriteSegment(spoolDir, hits()); err != nil {
		return nil, err
	}
	start := time.Now()
	if err := w.measure(ctx, loaded, d); err != nil {
		return nil, err
	}
	if _, err := db.sb.drain(ctx); err != nil {
		return nil, err
	}
	// The clicks of wrk's redirects were stored too: the rate counts both.
	under := (replayClicks + float64(loaded.runs[0].requests)) / time.Since(start).Seconds()
	fmt.Fprintf(log, "replay     %d spooled clicks under full redirect load — %s: %.0f clicks/s, redirects %.0f/s\n",
		replayClicks, db.name, under, loaded.runs[0].rps)
	return []replayRow{
		{name: fmt.Sprintf("spool replay, %d clicks, no redirects — %s", replayClicks, db.name), rate: alone, goal: replayGoal},
		{name: fmt.Sprintf("spool replay, %d clicks, redirects at full load — %s", replayClicks, db.name), rate: under, redirect: loaded},
	}, nil
}

// printReplay writes the replay table: clicks per second stored, and the redirects served meanwhile against the
// bare Echo 302 and the redirect goal. A missed goal is a result like any other (marked "no"), not a failed
// measurement: a replay that could not run returns its error before this.
func printReplay(w io.Writer, rows []replayRow) {
	fmt.Fprintln(w, "| replay | clicks/s stored | goal | redirects meanwhile | vs bare Echo | goal | met |")
	fmt.Fprintln(w, "|---|---:|---|---:|---:|---|---|")
	for _, r := range rows {
		goal, redirects, ratio, rgoal, met := "—", "—", "—", "—", "yes"
		if r.goal > 0 {
			goal = fmt.Sprintf("≥ %.0f", r.goal)
			if r.rate < r.goal {
				met = "no"
			}
		}
		if r.redirect != nil {
			s := r.redirect.summary()
			redirects, ratio, rgoal = fmt.Sprintf("%.0f req/s", s.rps), fmt.Sprintf("%.2f", s.ratio), fmt.Sprintf("≥ %.2f", r.redirect.goal)
			switch {
			case math.IsNaN(s.ratio):
				ratio = "— (the bare Echo row was left out by -rows)"
			case !s.goalMet:
				met = "no"
			}
		}
		fmt.Fprintf(w, "| %s | %.0f | %s | %s | %s | %s | %s |\n", r.name, r.rate, goal, redirects, ratio, rgoal, met)
	}
}
