package main

import (
	"strings"
	"testing"
	"time"
)

// A progress line is written when forced and otherwise at most once per interval; the rate is measured over at
// least an interval.
func TestProgress(t *testing.T) {
	var b strings.Builder
	p := newProgress(&b, time.Hour)
	p.report(true, "start %d", 1)
	p.report(false, "skipped")
	p.report(true, "end %d", 2)
	if b.String() != "start 1\nend 2\n" {
		t.Errorf("lines %q", b.String())
	}
	if r := p.rate(0); r != "" {
		t.Errorf("the first rate %q", r)
	}
	fast := newProgress(&b, 0)
	fast.rate(0)
	if r := fast.rate(1000); !strings.HasSuffix(r, "rows/s") {
		t.Errorf("rate %q", r)
	}
}
