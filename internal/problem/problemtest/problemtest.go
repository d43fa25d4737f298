// Package problemtest is the one assertion of the services' tests on the problems they return.
package problemtest

import (
	"errors"
	"slices"
	"testing"

	"github.com/switchboard/switchboard/internal/problem"
)

// Want fails the test unless err is a problem of code whose invalid fields are exactly at (each a body pointer, a
// parameter's or a header's name; none when none are given), in order, and returns it.
func Want(t testing.TB, err error, code problem.Code, at ...string) *problem.Error {
	t.Helper()
	var p *problem.Error
	if !errors.As(err, &p) || p.Code != code {
		t.Fatalf("error %v, want the problem %s", err, code)
	}
	var got []string
	for _, f := range p.Fields {
		got = append(got, f.Pointer+f.Parameter+f.Header) // one of them is set
	}
	if !slices.Equal(got, at) {
		t.Fatalf("problem %s names the fields %q, want %q", code, got, at)
	}
	return p
}
