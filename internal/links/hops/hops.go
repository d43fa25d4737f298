// Package hops remembers, for a few seconds, where this server just redirected each client, so that the request a
// client makes by following one of those redirects back to this server is known for what it is: a hop of a loop
// (a link whose destination is itself under another spelling, such as localhost, [::1] or a name that resolves
// here) or of a chain through a name of this server. Such a request is not a person's click, and is not counted as
// one. Destinations that name this server are refused when links are saved, but only by their spelling: a name's
// address can change afterwards, and one cannot know every name that resolves here.
//
// A hop is recognised by the client's address, the host it asked for and the path and query it requested, matched
// against the Locations recently sent to that address. Hosts are compared as clients send them (case, a default
// port and the spellings of IP literals do not matter); the scheme is not compared.
package hops

import (
	"hash/maphash"
	"strings"
	"sync"
	"time"

	"github.com/switchboard/switchboard/internal/egress"
)

// Window is how long a redirect is remembered at least (at most twice as long): clients follow a redirect at
// once, a slow mobile network within a second or two.
const Window = 2 * time.Second

const shards = 32

// Memory remembers recent redirects. The zero value is not usable; use New. It is safe for concurrent use and costs
// one map insertion per redirect; memory stays bounded by what was sent in the last two windows.
type Memory struct {
	seed   maphash.Seed
	window time.Duration
	shards [shards]shard
}

type shard struct {
	mu sync.Mutex
	// current and previous hold the redirects sent in this window and the one before; rotated is when current
	// began.
	current, previous map[uint64]struct{}
	rotated           time.Time
}

// New returns an empty memory that keeps each redirect for window to twice window (Window when zero).
func New(window time.Duration) *Memory {
	if window <= 0 {
		window = Window
	}
	m := &Memory{seed: maphash.MakeSeed(), window: window}
	for i := range m.shards {
		m.shards[i].current, m.shards[i].previous = map[uint64]struct{}{}, map[uint64]struct{}{}
	}
	return m
}

// Sent remembers that client was redirected to location at now. Locations without a host (relative, mailto:) lead
// nowhere back here and are not kept.
func (m *Memory) Sent(client, location string, now time.Time) {
	host, port, target, ok := splitLocation(location)
	if !ok {
		return
	}
	k := m.key(client, host, port, target)
	s := &m.shards[k%shards]
	s.mu.Lock()
	s.rotate(now, m.window)
	s.current[k] = struct{}{}
	s.mu.Unlock()
}

// Followed reports whether a request of client for host (the Host header) and requestURI (path and query, as
// sent) follows a redirect this server sent within the window. The redirect is forgotten: a second identical
// request is a new visit unless another redirect led to it too.
func (m *Memory) Followed(client, host, requestURI string, now time.Time) bool {
	h, port := canonicalHost(host)
	k := m.key(client, h, port, requestURI)
	s := &m.shards[k%shards]
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rotate(now, m.window)
	if _, ok := s.current[k]; ok {
		delete(s.current, k)
		return true
	}
	if _, ok := s.previous[k]; ok {
		delete(s.previous, k)
		return true
	}
	return false
}

func (s *shard) rotate(now time.Time, window time.Duration) {
	switch age := now.Sub(s.rotated); {
	case age < window:
	case age < 2*window:
		s.previous, s.current, s.rotated = s.current, make(map[uint64]struct{}, len(s.current)), now
	default:
		clear(s.previous)
		clear(s.current)
		s.rotated = now
	}
}

// key hashes a client, a canonical host and port (see canonicalHost) and a target; the host and its port are
// hashed as "host:port" without building that string.
func (m *Memory) key(client, host, port, target string) uint64 {
	var h maphash.Hash
	h.SetSeed(m.seed)
	_, _ = h.WriteString(client)
	_ = h.WriteByte(0)
	_, _ = h.WriteString(host)
	if port != "" {
		_ = h.WriteByte(':')
		_, _ = h.WriteString(port)
	}
	_ = h.WriteByte(0)
	_, _ = h.WriteString(target)
	return h.Sum64()
}

// splitLocation returns the canonical host of an absolute http(s) URL and its path and query as a client requests
// them (the fragment is never sent; an empty path is requested as /).
func splitLocation(location string) (host, port, target string, ok bool) {
	scheme, rest, ok := strings.Cut(location, "://")
	if !ok {
		return "", "", "", false
	}
	end := strings.IndexAny(rest, "/?#")
	if end < 0 {
		end = len(rest)
	}
	authority, target := rest[:end], rest[end:]
	if authority == "" || strings.Contains(authority, "@") {
		return "", "", "", false
	}
	target, _, _ = strings.Cut(target, "#")
	if target == "" || target[0] == '?' {
		target = "/" + target
	}
	if scheme == "" {
		return "", "", "", false
	}
	host, port = canonicalHost(authority)
	return host, port, target, true
}

// canonicalHost is a host[:port] as it is compared, split in host and port: lower case, without a default port (80
// or 443: a Host header does not say its scheme), an IP literal in its usual form.
func canonicalHost(authority string) (string, string) {
	host, port := authority, ""
	if i := strings.LastIndexByte(authority, ':'); i >= 0 && !strings.Contains(authority[i:], "]") {
		host, port = authority[:i], authority[i+1:]
	}
	if port == "80" || port == "443" {
		port = ""
	}
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	if host != "" && (host[0] == '[' || host[0] >= '0' && host[0] <= '9') && !usualIPv4(host) {
		if addr, literal, err := egress.LiteralAddr(strings.Trim(host, "[]")); err == nil && literal {
			host = addr.String()
		}
	}
	return host, port
}

// usualIPv4 reports whether host is an IPv4 address in its usual form (four decimal parts of 0 to 255, without
// leading zeros), which is its own canonical form: the Host of a server reached by its address, on every request,
// needs no parsing.
func usualIPv4(host string) bool {
	parts, n, digits := 0, 0, 0
	for i := 0; i <= len(host); i++ {
		if i == len(host) || host[i] == '.' {
			if digits == 0 || n > 255 {
				return false
			}
			parts++
			n, digits = 0, 0
			continue
		}
		c := host[i]
		if c < '0' || c > '9' || digits > 0 && n == 0 {
			return false // not a digit, or a leading zero
		}
		n = n*10 + int(c-'0')
		digits++
		if digits > 3 {
			return false
		}
	}
	return parts == 4
}
