package hops

import (
	"testing"

	"github.com/switchboard/switchboard/internal/egress"
)

// TestUsualIPv4IsItsOwnCanonicalForm: every host usualIPv4 lets through unparsed is one that egress.LiteralAddr
// spells the same way, and the other spellings of an address still go through it.
func TestUsualIPv4IsItsOwnCanonicalForm(t *testing.T) {
	for _, host := range []string{"127.0.0.1", "0.0.0.0", "255.255.255.255", "10.20.30.40", "192.168.1.100"} {
		if !usualIPv4(host) {
			t.Errorf("usualIPv4(%q) = false", host)
		}
		addr, literal, err := egress.LiteralAddr(host)
		if err != nil || !literal || addr.String() != host {
			t.Errorf("LiteralAddr(%q) = %v %v %v: not its own canonical form", host, addr, literal, err)
		}
	}
	for _, host := range []string{"127.0.0.01", "0127.0.0.1", "256.0.0.1", "1.2.3", "1.2.3.4.5", "1..2.3", "1.2.3.",
		"2130706433", "0x7f.1", "1.2.3.4a", "", "1234.1.1.1", "::1", "[::1]"} {
		if usualIPv4(host) {
			t.Errorf("usualIPv4(%q) = true", host)
		}
	}
	for authority, want := range map[string]string{"127.0.0.1:8080": "127.0.0.1:8080", "0x7f.1:80": "127.0.0.1",
		"127.000.0.1": "127.0.0.1", "[0:0:0:0:0:0:0:1]:8080": "::1:8080", "Sb.Example.:443": "sb.example"} {
		host, port := canonicalHost(authority)
		if got := host + map[bool]string{true: ":" + port}[port != ""]; got != want {
			t.Errorf("canonicalHost(%q) = %q, want %q", authority, got, want)
		}
	}
}
