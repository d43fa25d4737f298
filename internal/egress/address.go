package egress

import (
	"net/netip"
	"strconv"
	"strings"
)

// blocked are the networks no delivery may reach unless the operator allows them: the blocks of the IANA IPv4 and
// IPv6 special-purpose address registries that are not ordinary public unicast space, each taken whole (so a few
// anycast services inside 192.0.0.0/24 and 2001::/23 are blocked too: no webhook receiver lives there).
var blocked = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),       // "this network", including the unspecified 0.0.0.0
	netip.MustParsePrefix("10.0.0.0/8"),      // private
	netip.MustParsePrefix("100.64.0.0/10"),   // carrier-grade NAT, shared address space
	netip.MustParsePrefix("127.0.0.0/8"),     // loopback
	netip.MustParsePrefix("169.254.0.0/16"),  // link-local, home of the cloud metadata service 169.254.169.254
	netip.MustParsePrefix("172.16.0.0/12"),   // private
	netip.MustParsePrefix("192.0.0.0/24"),    // IETF protocol assignments
	netip.MustParsePrefix("192.0.2.0/24"),    // documentation (TEST-NET-1)
	netip.MustParsePrefix("192.88.99.0/24"),  // deprecated 6to4 relay anycast
	netip.MustParsePrefix("192.168.0.0/16"),  // private
	netip.MustParsePrefix("198.18.0.0/15"),   // benchmarking
	netip.MustParsePrefix("198.51.100.0/24"), // documentation (TEST-NET-2)
	netip.MustParsePrefix("203.0.113.0/24"),  // documentation (TEST-NET-3)
	netip.MustParsePrefix("224.0.0.0/4"),     // multicast
	netip.MustParsePrefix("240.0.0.0/4"),     // reserved, including the limited broadcast 255.255.255.255

	// Reserved by the IETF: the unspecified ::, loopback ::1, IPv4-compatible ::a.b.c.d, IPv4-translated
	// ::ffff:0:a.b.c.d, local-use NAT64 64:ff9b:1::/48, discard-only 100::/64. (IPv4-mapped addresses are unmapped
	// and the well-known NAT64 prefix is judged by its embedded IPv4 before this list is consulted.)
	netip.MustParsePrefix("::/8"),
	netip.MustParsePrefix("2001::/23"),     // IETF protocol assignments: Teredo 2001::/32, benchmarking, ORCHID
	netip.MustParsePrefix("2001:db8::/32"), // documentation
	netip.MustParsePrefix("3fff::/20"),     // documentation
	netip.MustParsePrefix("5f00::/16"),     // segment routing (SRv6) SIDs
	netip.MustParsePrefix("fc00::/7"),      // unique local, the IPv6 private networks
	netip.MustParsePrefix("fe80::/10"),     // link-local
	netip.MustParsePrefix("fec0::/10"),     // deprecated site-local
	netip.MustParsePrefix("ff00::/8"),      // multicast
}

// IPv6 forms that carry an IPv4 address and reach it through a translator or tunnel.
var (
	nat64     = netip.MustParsePrefix("64:ff9b::/96") // well-known NAT64 prefix: the IPv4 is the last 32 bits
	sixToFour = netip.MustParsePrefix("2002::/16")    // 6to4: the IPv4 is bits 16 to 47
)

// allows reports whether a connection to addr is permitted: addr is in an allowed network, or it is public.
func (g *Guard) allows(addr netip.Addr) bool {
	// Prefix.Contains never matches an address with a zone, which would let fe80::1%eth0 through.
	addr = addr.Unmap().WithZone("")
	if !addr.IsValid() {
		return false
	}
	for _, p := range g.allowed {
		if p.Contains(addr) {
			return true
		}
	}
	return isPublic(addr)
}

// isPublic reports whether addr is in none of the blocked networks. A NAT64 or 6to4 address is judged by the IPv4
// address it embeds, since that is where its packets end up; the operator's allowed networks do not extend to the
// embedded address (a translator has no business reaching the operator's private networks), but an allowed network
// may name the IPv6 form itself. addr must be unmapped and without a zone.
func isPublic(addr netip.Addr) bool {
	if v4, ok := embeddedIPv4(addr); ok {
		return isPublic(v4)
	}
	for _, p := range blocked {
		if p.Contains(addr) {
			return false
		}
	}
	return true
}

// embeddedIPv4 returns the IPv4 address inside a NAT64 or 6to4 address.
func embeddedIPv4(addr netip.Addr) (netip.Addr, bool) {
	b := addr.As16()
	switch {
	case nat64.Contains(addr):
		return netip.AddrFrom4([4]byte(b[12:16])), true
	case sixToFour.Contains(addr):
		return netip.AddrFrom4([4]byte(b[2:6])), true
	}
	return netip.Addr{}, false
}

// literalAddr returns the address host denotes when it is an IP literal (isLiteral true), reading IPv4 the way
// browsers and inet_aton(3) do (see parseIPv4), so that no spelling of an address is ever sent to DNS, where a
// resolver may turn it into the very address it spells. A host that looks like an IPv4 address — its last label is a
// number — but denotes none, such as 1.2.3.256 or example.123, is an error wrapping ErrInvalidURL, as in browsers.
// IPv6 zones are refused too: a public receiver never needs one.
func literalAddr(host string) (addr netip.Addr, isLiteral bool, err error) {
	if strings.Contains(host, ":") {
		addr, err := netip.ParseAddr(host)
		if err != nil || addr.Zone() != "" {
			return netip.Addr{}, true, invalid("the host is not a valid IPv6 address")
		}
		return addr, true, nil
	}
	// One trailing dot marks a fully qualified name and does not change the address: 127.0.0.1. is 127.0.0.1.
	labels := strings.Split(strings.TrimSuffix(host, "."), ".")
	if !isNumber(labels[len(labels)-1]) {
		return netip.Addr{}, false, nil
	}
	addr, ok := parseIPv4(labels)
	if !ok {
		return netip.Addr{}, true, invalid("the host is not a valid IPv4 address")
	}
	return addr, true, nil
}

// isNumber reports whether label reads as a number to parseIPv4: decimal digits, or 0x followed by hex digits.
func isNumber(label string) bool {
	digits, base := label, 10
	if hex, ok := cutHexPrefix(label); ok {
		digits, base = hex, 16
	} else if label == "" {
		return false
	}
	for _, c := range digits {
		if !isDigit(c, base) {
			return false
		}
	}
	return true
}

// parseIPv4 implements the WHATWG URL standard's IPv4 parser, which matches inet_aton(3): one to four numbers, each
// decimal, octal (leading 0) or hexadecimal (leading 0x); all but the last are one byte each and the last fills the
// remaining bytes, so 127.1, 2130706433, 0x7f000001, 0x7f.0.0.1 and 0177.0.0.1 all denote 127.0.0.1.
func parseIPv4(labels []string) (netip.Addr, bool) {
	if len(labels) > 4 {
		return netip.Addr{}, false
	}
	var ip uint32
	for i, label := range labels {
		n, ok := parseIPv4Number(label)
		if !ok {
			return netip.Addr{}, false
		}
		if i < len(labels)-1 {
			if n > 0xff {
				return netip.Addr{}, false
			}
			ip |= n << (8 * (3 - i))
			continue
		}
		// The last number fills the 5-len(labels) bytes left over.
		if bits := 8 * (5 - len(labels)); bits < 32 && n >= 1<<bits {
			return netip.Addr{}, false
		}
		ip |= n
	}
	return netip.AddrFrom4([4]byte{byte(ip >> 24), byte(ip >> 16), byte(ip >> 8), byte(ip)}), true
}

// parseIPv4Number reads one number of an IPv4 literal: 0x or 0X then hex digits (none means 0), 0 then octal
// digits, or decimal digits; it fails on anything else and on values beyond 32 bits.
func parseIPv4Number(label string) (uint32, bool) {
	digits, base := label, 10
	if hex, ok := cutHexPrefix(label); ok {
		if hex == "" {
			return 0, true
		}
		digits, base = hex, 16
	} else if len(label) > 1 && label[0] == '0' {
		digits, base = label[1:], 8
	}
	// With an explicit base, ParseUint accepts digits only: no sign, no underscores.
	n, err := strconv.ParseUint(digits, base, 32)
	return uint32(n), err == nil
}

func cutHexPrefix(label string) (string, bool) {
	if len(label) >= 2 && label[0] == '0' && (label[1] == 'x' || label[1] == 'X') {
		return label[2:], true
	}
	return label, false
}

func isDigit(c rune, base int) bool {
	switch {
	case '0' <= c && c <= '9':
		return true
	case base == 16:
		return 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
	}
	return false
}

// LiteralAddr returns the address host denotes when it is an IP literal in any spelling browsers accept (decimal,
// octal and hexadecimal IPv4 parts, IPv4-mapped IPv6), isLiteral false for a name; see literalAddr.
func LiteralAddr(host string) (addr netip.Addr, isLiteral bool, err error) {
	addr, isLiteral, err = literalAddr(host)
	if err == nil && isLiteral {
		if v4, ok := embeddedIPv4(addr); ok {
			addr = v4
		}
	}
	return addr, isLiteral, err
}
