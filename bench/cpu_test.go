package main

import (
	"testing"
	"time"
)

// readCPU counts this process's own work, and perItem divides what was spent between two readings.
func TestReadCPU(t *testing.T) {
	before := readCPU()
	for start := time.Now(); time.Since(start) < 50*time.Millisecond; {
	}
	after := readCPU()
	if after.self-before.self < 20*time.Millisecond {
		t.Errorf("50 ms of spinning counted as %v of this process's CPU", after.self-before.self)
	}
	if after.postgres < before.postgres {
		t.Errorf("PostgreSQL's processes went back in time: %v, then %v", before.postgres, after.postgres)
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
