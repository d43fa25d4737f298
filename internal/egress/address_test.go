package egress

import (
	"errors"
	"net/netip"
	"strings"
	"testing"
)

// literalCases are hosts and what they denote: the address, "name" for a host name, "invalid" for an error.
var literalCases = []struct {
	host string
	want string
}{
	{"127.0.0.1", "127.0.0.1"},
	{"127.0.0.1.", "127.0.0.1"},
	{"127.1", "127.0.0.1"},
	{"127.0.1", "127.0.0.1"},
	{"2130706433", "127.0.0.1"},
	{"0x7f000001", "127.0.0.1"},
	{"0X7f000001", "127.0.0.1"},
	{"0x7f.0.0.1", "127.0.0.1"},
	{"0x7f.0x0.0x0.0x1", "127.0.0.1"},
	{"0177.0.0.1", "127.0.0.1"},
	{"017700000001", "127.0.0.1"},
	{"0177.1", "127.0.0.1"},
	{"0x", "0.0.0.0"},
	{"0", "0.0.0.0"},
	{"00", "0.0.0.0"},
	{"169.254.43518", "169.254.169.254"},
	{"0xa9fea9fe", "169.254.169.254"},
	{"10.0.0.1", "10.0.0.1"},
	{"4294967295", "255.255.255.255"},
	{"::1", "::1"},
	{"::ffff:127.0.0.1", "::ffff:127.0.0.1"},
	{"64:ff9b::a00:1", "64:ff9b::a00:1"},

	{"hooks.example", "name"},
	{"127.0.0.1.example", "name"},
	{"0x7f000001.example", "name"},
	{"0xg", "name"},
	{"xn--bcher-kva.example", "name"},

	{"1.2.3.256", "invalid"},
	{"1.256.3", "invalid"},
	{"1.2.65536", "invalid"},
	{"1.16777216", "invalid"},
	{"4294967296", "invalid"},
	{"0x100000000", "invalid"},
	{"1.2.3.4.5", "invalid"},
	{"127..1", "invalid"},
	{".1", "invalid"},
	{"08.0.0.1", "invalid"},
	{"0x7g.1", "invalid"},
	{"+1.2.3.4", "invalid"},
	{"hooks.123", "invalid"},
	{"hooks.0x1", "invalid"},
	{"::1::", "invalid"},
	{"fe80::1%eth0", "invalid"},
}

func TestLiteralAddr(t *testing.T) {
	for _, tt := range literalCases {
		t.Run(tt.host, func(t *testing.T) {
			addr, isLiteral, err := literalAddr(tt.host)
			var got string
			switch {
			case err != nil:
				if !errors.Is(err, ErrInvalidURL) {
					t.Fatalf("literalAddr(%q) error %v does not wrap ErrInvalidURL", tt.host, err)
				}
				got = "invalid"
			case !isLiteral:
				got = "name"
			default:
				got = addr.String()
			}
			if got != tt.want {
				t.Errorf("literalAddr(%q) = %s, want %s", tt.host, got, tt.want)
			}
		})
	}
}

func TestAllows(t *testing.T) {
	open := NewGuard(Policy{})
	allowing := NewGuard(Policy{AllowedNetworks: []netip.Prefix{
		netip.MustParsePrefix("127.0.0.0/8"),
		netip.MustParsePrefix("fe80::/10"),
		netip.MustParsePrefix("64:ff9b::a00:0/120"),
	}})
	tests := []struct {
		addr     string
		public   bool // allowed by a guard without allowed networks
		allowing bool // allowed by a guard with the allowed networks above
	}{
		// The edges of blocked networks.
		{"9.255.255.255", true, true},
		{"10.0.0.0", false, false},
		{"10.255.255.255", false, false},
		{"11.0.0.0", true, true},
		{"100.63.255.255", true, true},
		{"100.64.0.0", false, false},
		{"100.127.255.255", false, false},
		{"100.128.0.0", true, true},
		{"126.255.255.255", true, true},
		{"127.0.0.0", false, true},
		{"127.255.255.255", false, true},
		{"128.0.0.0", true, true},
		{"172.15.255.255", true, true},
		{"172.16.0.0", false, false},
		{"172.31.255.255", false, false},
		{"172.32.0.0", true, true},
		{"198.17.255.255", true, true},
		{"198.18.0.0", false, false},
		{"198.19.255.255", false, false},
		{"198.20.0.0", true, true},
		{"223.255.255.255", true, true},
		{"224.0.0.0", false, false},
		{"255.255.255.255", false, false},
		// IPv6 and the IPv6 forms of IPv4 addresses.
		{"2606:4700::1111", true, true},
		{"::", false, false},
		{"::1", false, false},
		{"::ffff:127.0.0.1", false, true},
		{"::ffff:8.8.8.8", true, true},
		{"::ffff:0:a00:1", false, false}, // IPv4-translated 10.0.0.1
		{"64:ff9b::808:808", true, true},
		{"64:ff9b::a9fe:a9fe", false, false},
		{"64:ff9b::7f00:1", false, false},    // the allowed 127.0.0.0/8 does not extend to its NAT64 form…
		{"64:ff9b::a00:1", false, true},      // …but a NAT64 prefix may be allowed itself
		{"64:ff9b:1::808:808", false, false}, // local-use NAT64
		{"2002:808:808::1", true, true},
		{"2002:c0a8:101::1", false, false},
		{"2001::1", false, false},
		{"2001:db8::1", false, false},
		{"3fff::1", false, false},
		{"fc00::1", false, false},
		{"fdff:ffff::1", false, false},
		{"fe80::1", false, true},
		{"fe80::1%eth0", false, true}, // zones do not hide an address from the allowed networks or the blocks
		{"fec0::1", false, false},
		{"ff02::1", false, false},
	}
	for _, tt := range tests {
		t.Run(tt.addr, func(t *testing.T) {
			addr := netip.MustParseAddr(tt.addr)
			if got := open.allows(addr); got != tt.public {
				t.Errorf("without allowed networks, allows(%s) = %t, want %t", addr, got, tt.public)
			}
			if got := allowing.allows(addr); got != tt.allowing {
				t.Errorf("with allowed networks, allows(%s) = %t, want %t", addr, got, tt.allowing)
			}
		})
	}
	if open.allows(netip.Addr{}) {
		t.Error("the zero Addr is allowed")
	}
}

// Whatever host literalAddr reads as an address is read consistently with net/netip: a host netip parses (without a
// zone) denotes that very address; an address accepted is valid, zone-free, IPv4 when the host has no colon, and
// its text parses back to it; and an address netip calls loopback, private, link-local, multicast, unspecified or
// otherwise not global unicast is never allowed without an allowed network.
func FuzzLiteralAddr(f *testing.F) {
	for _, tt := range literalCases {
		f.Add(tt.host)
	}
	open := NewGuard(Policy{})
	f.Fuzz(func(t *testing.T, host string) {
		addr, isLiteral, err := literalAddr(host)
		if err != nil && !errors.Is(err, ErrInvalidURL) {
			t.Fatalf("literalAddr(%q) error %v does not wrap ErrInvalidURL", host, err)
		}
		if want, perr := netip.ParseAddr(host); perr == nil && want.Zone() == "" && (err != nil || !isLiteral || addr != want) {
			t.Fatalf("literalAddr(%q) = %v, %v, %v; netip reads %v", host, addr, isLiteral, err, want)
		}
		if err != nil || !isLiteral {
			if addr.IsValid() {
				t.Fatalf("literalAddr(%q) returned %v with %v, %v", host, addr, isLiteral, err)
			}
			return
		}
		if !addr.IsValid() || addr.Zone() != "" || (!strings.Contains(host, ":") && !addr.Is4()) {
			t.Fatalf("literalAddr(%q) = %v", host, addr)
		}
		if back, err := netip.ParseAddr(addr.String()); err != nil || back != addr {
			t.Fatalf("literalAddr(%q) = %v, which netip reads back as %v, %v", host, addr, back, err)
		}
		if u := addr.Unmap(); open.allows(addr) && (!u.IsGlobalUnicast() || u.IsPrivate()) {
			t.Fatalf("%q denotes %v, which netip does not call public, and it is allowed", host, addr)
		}
	})
}
