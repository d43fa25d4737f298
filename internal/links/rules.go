// Package links is the short-link capability. Its Service owns every rule of links: it checks them beyond the API's
// schema, creates, changes and deletes them in transactions with their events, reads their statistics, and serves the
// redirect side (links resolved for the redirect cache, clicks admitted against max_clicks, expiries announced by
// Run). The rules that need no database — slug generation and validation, the reserved words, destination URL checks
// and short URL building — are pure functions of their inputs (rules.go).
package links

import (
	"crypto/rand"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/switchboard/switchboard/internal/egress"
)

// Alphabet is what generated slugs are made of: digits and letters without the look-alikes 0/O/o, 1/l/I.
const Alphabet = "23456789abcdefghijkmnpqrstuvwxyzABCDEFGHJKLMNPQRSTUVWXYZ"

// GeneratedLength is the length of a generated slug: 56^7 ≈ 1.7e12 slugs, so a collision among even millions of
// links is rare and a retry resolves it.
const GeneratedLength = 7

// Generate returns a random slug of GeneratedLength characters of Alphabet, drawn with crypto/rand without bias.
func Generate() string {
	// Rejection sampling: bytes ≥ 224 (4×56) are dropped so every character is equally likely.
	const limit = 256 - 256%len(Alphabet)
	out := make([]byte, 0, GeneratedLength)
	var buf [16]byte
	for len(out) < GeneratedLength {
		_, _ = rand.Read(buf[:]) // crypto/rand.Read never fails (Go ≥ 1.24 crashes the program instead)
		for _, b := range buf {
			if int(b) < limit && len(out) < GeneratedLength {
				out = append(out, Alphabet[int(b)%len(Alphabet)])
			}
		}
	}
	return string(out)
}

// ValidSlug reports whether s has the shape of a slug (the API's Slug pattern, ^[A-Za-z0-9][A-Za-z0-9_-]{0,62}$):
// 1–63 letters, digits, "_" and "-", starting with a letter or digit. It runs on every redirect, before any lookup,
// so it is a byte loop rather than a regular expression.
func ValidSlug(s string) bool {
	if len(s) == 0 || len(s) > 63 {
		return false
	}
	for i := 0; i < len(s); i++ {
		b := s[i]
		switch {
		case b >= 'a' && b <= 'z', b >= 'A' && b <= 'Z', b >= '0' && b <= '9':
		case (b == '_' || b == '-') && i > 0:
		default:
			return false
		}
	}
	return true
}

// StaticReserved are slugs refused besides the first segments of the product's own routes: paths that browsers,
// crawlers and operators expect to mean something on any host, and names that would invite phishing.
var StaticReserved = []string{
	"static", "assets", "favicon.ico", "robots.txt", ".well-known", "login", "logout", "admin", "www",
	"api", "docs", "user", "healthz", "readyz", "metrics", "problems", "openapi.yaml", "openapi.json",
}

// Reserved is a set of slugs nobody may take, compared case-insensitively.
type Reserved map[string]struct{}

// NewReserved builds the set from words and from the first path segment of each route path ("/docs/*" reserves
// "docs"; parameters such as "/:slug" and wildcards reserve nothing).
func NewReserved(words []string, routePaths []string) Reserved {
	r := Reserved{}
	for _, w := range words {
		r[strings.ToLower(w)] = struct{}{}
	}
	for _, p := range routePaths {
		seg, _, _ := strings.Cut(strings.TrimPrefix(p, "/"), "/")
		if seg == "" || strings.ContainsAny(seg, ":*") {
			continue
		}
		r[strings.ToLower(seg)] = struct{}{}
	}
	return r
}

// Has reports whether slug is reserved, regardless of case.
func (r Reserved) Has(slug string) bool {
	_, ok := r[strings.ToLower(slug)]
	return ok
}

// MaxURLLength is the longest destination accepted.
const MaxURLLength = 2048

// Policy is what the operator decided about destinations.
type Policy struct {
	// AllowedSchemes are schemes allowed besides http and https (lower-case, without ":").
	AllowedSchemes []string
	// BlockedHosts are refused, with all their subdomains.
	BlockedHosts []string
	// OwnHosts are the hosts of this service (the product's and every short domain): a destination there would be
	// a redirect loop or a chain that hides the real target.
	OwnHosts []string
	// OwnPorts are the ports of those hosts' URLs: a destination on this machine's own addresses (localhost,
	// loopback and unspecified addresses in any spelling) at one of them is a loop too, whatever the name.
	OwnPorts []string
}

// NewPolicy normalises the operator's lists (case, trailing dots, ports of own hosts).
func NewPolicy(allowedSchemes, blockedHosts, ownHosts []string) Policy {
	p := Policy{}
	for _, s := range allowedSchemes {
		if s = strings.ToLower(strings.TrimSuffix(strings.TrimSpace(s), ":")); s != "" {
			p.AllowedSchemes = append(p.AllowedSchemes, s)
		}
	}
	for _, h := range blockedHosts {
		if h = NormalizeHost(h); h != "" {
			p.BlockedHosts = append(p.BlockedHosts, h)
		}
	}
	for _, h := range ownHosts {
		// A host without a port answers on the default ports of both schemes.
		ports := []string{"80", "443"}
		if _, pt, err := net.SplitHostPort(strings.TrimSpace(h)); err == nil {
			ports = []string{pt}
		}
		for _, port := range ports {
			if !slices.Contains(p.OwnPorts, port) {
				p.OwnPorts = append(p.OwnPorts, port)
			}
		}
		if h = NormalizeHost(h); h != "" && !slices.Contains(p.OwnHosts, h) {
			p.OwnHosts = append(p.OwnHosts, h)
		}
	}
	return p
}

// NormalizeHost returns a host name as hosts are compared: lower case, without port, brackets or trailing dot.
func NormalizeHost(h string) string {
	h = strings.TrimSpace(h)
	if host, _, err := net.SplitHostPort(h); err == nil {
		h = host
	}
	h = strings.TrimSuffix(strings.TrimPrefix(h, "["), "]")
	return strings.ToLower(strings.TrimRight(h, "."))
}

// CheckDestination returns nil when raw may be a link's destination (or expired URL) under the policy, and
// otherwise an error whose message says what is wrong, written for the API's errors[].detail.
func (p Policy) CheckDestination(raw string) error {
	if len(raw) > MaxURLLength {
		return fmt.Errorf("must be at most %d characters", MaxURLLength)
	}
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("must be a valid absolute URL")
	}
	if u.Scheme == "" {
		return fmt.Errorf("must be an absolute URL with a scheme, such as https://example.com/page")
	}
	scheme := strings.ToLower(u.Scheme)
	web := scheme == "http" || scheme == "https"
	if !web && !slices.Contains(p.AllowedSchemes, scheme) {
		allowed := append([]string{"http", "https"}, p.AllowedSchemes...)
		return fmt.Errorf("scheme %q is not allowed; use one of %s", scheme, strings.Join(allowed, ", "))
	}
	if u.User != nil {
		return fmt.Errorf("must not contain a user name or password")
	}
	if web && (u.Opaque != "" || u.Host == "") {
		return fmt.Errorf("must name a host, such as https://example.com/page")
	}
	if u.Host == "" {
		return nil // mailto:, tel: and the like
	}
	if port := u.Port(); port != "" {
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			return fmt.Errorf("port %s is not a port (1 to 65535)", port)
		}
	}
	host := NormalizeHost(u.Host)
	if host == "" {
		return fmt.Errorf("must name a host, such as https://example.com/page")
	}
	for _, r := range host {
		if r > 0x7e || r < 0x21 {
			// Without IDNA mapping a Unicode host could pass the blocklist in one spelling and be visited in
			// another; the ASCII (punycode) form is unambiguous.
			return fmt.Errorf("host %q must be written in its ASCII form (xn--… for internationalised names)", u.Host)
		}
	}
	if slices.Contains(p.OwnHosts, host) || p.ownAddress(host, u) {
		return fmt.Errorf("must not point to a short link or page of this service (it would loop)")
	}
	for _, b := range p.BlockedHosts {
		if host == b || strings.HasSuffix(host, "."+b) {
			return fmt.Errorf("host %s is blocked by the operator", host)
		}
	}
	return nil
}

// ownAddress reports whether a destination names this machine (localhost, a loopback or unspecified address in
// any spelling: [::1], 2130706433, 0x7f.1, 0.0.0.0) at one of the service's ports.
func (p Policy) ownAddress(host string, u *url.URL) bool {
	port := u.Port()
	if port == "" {
		port = "80"
		if strings.EqualFold(u.Scheme, "https") {
			port = "443"
		}
	}
	if !slices.Contains(p.OwnPorts, port) {
		return false
	}
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	addr, literal, err := egress.LiteralAddr(host)
	return err == nil && literal && (addr.IsLoopback() || addr.IsUnspecified())
}

// NormalizeDestination returns a checked destination as it is stored and sent in Location: characters that may
// not appear raw in a URL (spaces, <, >, ", control characters, non-ASCII) percent-encoded in the path, query and
// fragment, so a redirect never carries them and every client reads the same URL. What is already encoded stays.
func NormalizeDestination(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Opaque != "" {
		return raw
	}
	u.RawQuery = escapeRaw(u.RawQuery)
	if u.RawFragment != "" {
		u.RawFragment = escapeRaw(u.RawFragment)
	}
	return u.String()
}

// escapeRaw percent-encodes the bytes of a query or fragment that are never valid raw in a URL.
func escapeRaw(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c <= 0x20 || c >= 0x7f || c == '<' || c == '>' || c == '"' || c == '`' || c == '{' || c == '}' || c == '|' || c == '\\' || c == '^' {
			fmt.Fprintf(&b, "%%%02X", c)
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}

// ShortURL is the URL a link is shared as: the scheme of the short base URL, the link's domain and its slug.
func ShortURL(scheme, domain, slug string) string { return scheme + "://" + domain + "/" + slug }
