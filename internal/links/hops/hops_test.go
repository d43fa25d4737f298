package hops_test

import (
	"testing"
	"time"

	"github.com/switchboard/switchboard/internal/links/hops"
)

func TestFollowedMatchesTheRedirectAsTheClientRequestsIt(t *testing.T) {
	now := time.Date(2026, 11, 27, 8, 0, 0, 0, time.UTC)
	cases := []struct {
		name, location, host, uri string
	}{
		{"same spelling", "http://localhost:8080/loop", "localhost:8080", "/loop"},
		{"case, default port, fragment", "HTTP://LocalHost:80/loop?a=1#top", "localhost", "/loop?a=1"},
		{"decimal IPv4", "http://2130706433:8080/loop", "127.0.0.1:8080", "/loop"},
		{"hexadecimal IPv4", "http://0x7f.1:8080/loop", "127.0.0.1:8080", "/loop"},
		{"IPv6", "http://[0:0:0:0:0:0:0:1]:8080/loop", "[::1]:8080", "/loop"},
		{"empty path", "https://sb.example", "sb.example:443", "/"},
		{"query without path", "https://sb.example?x=1", "sb.example", "/?x=1"},
		{"trailing dot", "https://sb.example./go", "sb.example", "/go"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := hops.New(0)
			m.Sent("203.0.113.9", tc.location, now)
			if m.Followed("198.51.100.1", tc.host, tc.uri, now) {
				t.Error("another client's request was taken for a followed redirect")
			}
			if !m.Followed("203.0.113.9", tc.host, tc.uri, now.Add(time.Second)) {
				t.Errorf("%s requested as %s%s was not recognised", tc.location, tc.host, tc.uri)
			}
			if m.Followed("203.0.113.9", tc.host, tc.uri, now.Add(time.Second)) {
				t.Error("one redirect was recognised twice: a second request is a new visit")
			}
		})
	}
}

func TestFollowedIgnoresOtherRequests(t *testing.T) {
	now := time.Date(2026, 11, 27, 8, 0, 0, 0, time.UTC)
	m := hops.New(0)
	m.Sent("203.0.113.9", "http://localhost:8080/loop", now)
	m.Sent("203.0.113.9", "mailto:someone@example.com", now)
	m.Sent("203.0.113.9", "/relative", now)
	for _, r := range []struct{ host, uri string }{
		{"localhost:8081", "/loop"}, {"localhost:8080", "/loop2"}, {"localhost:8080", "/loop?x"}, {"localhost:8080", "/relative"},
	} {
		if m.Followed("203.0.113.9", r.host, r.uri, now) {
			t.Errorf("%s%s was taken for the redirect to localhost:8080/loop", r.host, r.uri)
		}
	}
}

// A redirect is remembered for the window at least and forgotten after twice the window.
func TestFollowedExpires(t *testing.T) {
	now := time.Date(2026, 11, 27, 8, 0, 0, 0, time.UTC)
	m := hops.New(time.Second)
	for _, tc := range []struct {
		after time.Duration
		want  bool
	}{{900 * time.Millisecond, true}, {1500 * time.Millisecond, true}, {2100 * time.Millisecond, false}} {
		m.Sent("c", "http://h/x", now)
		if got := m.Followed("c", "h", "/x", now.Add(tc.after)); got != tc.want {
			t.Errorf("followed %v after the redirect: %v, want %v", tc.after, got, tc.want)
		}
		now = now.Add(time.Hour)
	}
}
