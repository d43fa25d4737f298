package main

import (
	"testing"
	"time"
)

// readCPU counts this process's own work (and no PostgreSQL process without a database to count for), and perItem
// divides what was spent between two readings. The PostgreSQL sum itself is not monotonic — a backend that exits
// takes its time with it, and tests connect and leave all the time — so which processes it counts is checked on
// their titles (TestServesDatabase).
func TestReadCPU(t *testing.T) {
	before := readCPU("")
	for start := time.Now(); time.Since(start) < 50*time.Millisecond; {
	}
	after := readCPU("")
	if after.self-before.self < 20*time.Millisecond {
		t.Errorf("50 ms of spinning counted as %v of this process's CPU", after.self-before.self)
	}
	if after.seen || after.postgres != 0 {
		t.Errorf("without a database, PostgreSQL's processes counted %v (seen %v)", after.postgres, after.seen)
	}
	self, postgres := cpuUse{self: time.Second, postgres: 2 * time.Second, seen: true}.
		perItem(cpuUse{self: 3 * time.Second, postgres: 6 * time.Second, seen: true}, 1000)
	if self != 2*time.Millisecond || postgres != 4*time.Millisecond {
		t.Errorf("perItem: %v and %v per item, want 2ms and 4ms", self, postgres)
	}
	if _, postgres := (cpuUse{self: time.Second}).perItem(cpuUse{self: 2 * time.Second, postgres: time.Hour, seen: true}, 10); postgres != 0 {
		t.Errorf("perItem with PostgreSQL unseen at the start: %v, want 0", postgres)
	}
}

// The PostgreSQL side counts the backends of the bench's own database and the server's background writers, never
// another database's backends.
func TestServesDatabase(t *testing.T) {
	for _, c := range []struct {
		title, database string
		want            bool
	}{
		{"postgres: postgres switchboard_bench_1 127.0.0.1(5432) idle\x00", "switchboard_bench_1", true},
		{"postgres: postgres switchboard_test_2 127.0.0.1(5433) UPDATE\x00", "switchboard_bench_1", false},
		{"postgres: walwriter \x00", "switchboard_bench_1", true},
		{"postgres: checkpointer ", "switchboard_bench_1", true},
		{"postgres: autovacuum launcher", "switchboard_bench_1", false},
		{"postgres: 15/main: postgres switchboard_bench_1 127.0.0.1(46864) idle", "switchboard_bench_1", true},
		{"postgres: 15/main: postgres postgres 127.0.0.1(46864) idle", "switchboard_bench_1", false},
		{"postgres: 15/main: walwriter \x00\x00", "switchboard_bench_1", true},
		{"postgres: 15/main: logical replication launcher ", "switchboard_bench_1", false},
		{"/usr/lib/postgresql/15/bin/postgres -D /var/lib/postgresql", "switchboard_bench_1", false},
	} {
		if got := servesDatabase(c.title, c.database); got != c.want {
			t.Errorf("servesDatabase(%q, %q) = %v, want %v", c.title, c.database, got, c.want)
		}
	}
	if got := postgresDatabase("postgres://u@127.0.0.1:5432/switchboard_bench_1?sslmode=disable"); got != "switchboard_bench_1" {
		t.Errorf("postgresDatabase = %q", got)
	}
	if got := postgresDatabase("file:/tmp/x.db"); got != "" {
		t.Errorf("postgresDatabase of a SQLite URL = %q, want none", got)
	}
}
