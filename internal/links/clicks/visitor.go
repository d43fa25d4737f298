package clicks

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"hash"
	"net/netip"
	"net/url"
	"strings"
	"unicode/utf8"
)

// parseIP reads the client address as the redirect handler saw it (Echo's RealIP: the connection's, or the
// forwarded one behind a trusted proxy). IPv4-mapped IPv6 addresses count as IPv4.
func parseIP(s string) (netip.Addr, bool) {
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Addr{}, false
	}
	return a.WithZone("").Unmap(), true
}

// ipPrefix is the network of an address, kept instead of the address: the /24 of IPv4, the /48 of IPv6 (a site).
func ipPrefix(a netip.Addr) string {
	bits := 48
	if a.Is4() {
		bits = 24
	}
	p, err := a.Prefix(bits)
	if err != nil {
		return ""
	}
	var buf [len("ffff:ffff:ffff::/48")]byte
	return string(p.AppendTo(buf[:0])) // one allocation, where Prefix.String takes two
}

// visitorHasher computes visitor hashes under one day's salt: hex HMAC-SHA256 of the full address and the user
// agent. The salt is random, shared by every process and deleted after two days, so a hash identifies a visitor
// only within its day and can never be recomputed from an address later.
type visitorHasher struct {
	mac hash.Hash
	buf []byte
}

func newVisitorHasher(salt []byte) *visitorHasher {
	return &visitorHasher{mac: hmac.New(sha256.New, salt)}
}

func (v *visitorHasher) hash(ip netip.Addr, ua string) string {
	v.mac.Reset()
	v.buf = ip.AppendTo(v.buf[:0])
	v.buf = append(v.buf, 0)
	v.buf = append(v.buf, ua...)
	v.mac.Write(v.buf)
	var sum [sha256.Size]byte
	var text [2 * sha256.Size]byte
	hex.Encode(text[:], v.mac.Sum(sum[:0]))
	return string(text[:]) // one allocation, where hex.EncodeToString takes two
}

// maxUserAgent is how much of a User-Agent is stored (the API's Click.user_agent maxLength).
const maxUserAgent = 512

// cleanText makes header text storable on both databases: valid UTF-8 (PostgreSQL refuses anything else), no NUL
// or other control characters, at most max bytes cut at a character boundary.
func cleanText(s string, max int) string {
	clean := utf8.ValidString(s)
	for i := 0; clean && i < len(s); i++ {
		if s[i] < 0x20 || s[i] == 0x7f {
			clean = false
		}
	}
	if !clean {
		s = strings.Map(func(r rune) rune {
			if r < 0x20 || r == 0x7f || r == utf8.RuneError {
				return -1
			}
			return r
		}, strings.ToValidUTF8(s, ""))
	}
	if len(s) <= max {
		return s
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut]
}

// referrerHost is the host of a Referer header, lower-case, or "" when there is none or it is not an absolute
// URL with a plausible host name.
func referrerHost(referer string) string {
	if referer == "" {
		return ""
	}
	u, err := url.Parse(referer)
	if err != nil || u.Host == "" {
		return ""
	}
	h := strings.TrimSuffix(strings.ToLower(u.Hostname()), ".")
	if h == "" || len(h) > 253 || cleanText(h, 253) != h {
		return ""
	}
	return h
}
