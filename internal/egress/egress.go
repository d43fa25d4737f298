// Package egress is the only way Switchboard sends HTTP requests to customer-controlled URLs (webhook receivers).
// It judges a target twice: when the URL is registered (Guard.CheckURL) and again for every connection, on the very
// address being dialled (Guard.Client), so a customer can aim Switchboard neither at the operator's own network (SSRF)
// nor, by changing DNS answers after registration, at anything it was refused at registration (DNS rebinding).
package egress

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// MaxURLLength is the longest target URL CheckURL accepts, in bytes.
const MaxURLLength = 2048

// lookupTimeout bounds the DNS lookup of CheckURL: registration is an API request, and a customer's slow name server
// must not hold it open.
const lookupTimeout = 5 * time.Second

// The errors of CheckURL and of the Client. Their messages are written for API clients.
var (
	// ErrBlocked means the target's host is, or resolves to, an address the policy does not allow. Its message is
	// the same for every blocked address, so it tells a prober nothing about the operator's network.
	ErrBlocked = errors.New("the URL's host is not allowed")
	// ErrUnresolvable means the target's host name has no address: it does not exist, has no A or AAAA records, or
	// its lookup failed or timed out. The underlying DNS error is dropped because it names the resolver's address.
	ErrUnresolvable = errors.New("the URL's host could not be resolved")
	// ErrInvalidURL is wrapped by the errors that say what is wrong with a URL's form ("invalid URL: …").
	ErrInvalidURL = errors.New("invalid URL")
)

// Policy is the operator's egress configuration.
type Policy struct {
	// AllowHTTP permits plain http:// targets (SWITCHBOARD_WEBHOOK_ALLOW_HTTP); by default only https:// is allowed.
	AllowHTTP bool
	// AllowedNetworks are exempt from the block on non-public addresses (SWITCHBOARD_WEBHOOK_ALLOWED_NETWORKS), for
	// receivers on the operator's own network and for tests (127.0.0.0/8, ::1/128). Use ParseNetworks to read them.
	AllowedNetworks []netip.Prefix
}

// ParseNetworks reads a comma-separated list of CIDR prefixes such as "127.0.0.0/8, ::1/128"; blanks around and
// between entries are ignored, so an empty string yields no networks.
// It returns an error naming the first entry that is not CIDR notation, that has bits set beyond its prefix length
// (10.1.2.3/8 is ambiguous: 10.0.0.0/8 or 10.1.2.3/32?), or that is IPv4-mapped IPv6 (addresses are unmapped before
// they are compared, so such a prefix would never match).
func ParseNetworks(csv string) ([]netip.Prefix, error) {
	var networks []netip.Prefix
	for entry := range strings.SplitSeq(csv, ",") {
		entry = strings.TrimSpace(entry)
		if entry == "" {
			continue
		}
		p, err := netip.ParsePrefix(entry)
		switch {
		case err != nil:
			return nil, fmt.Errorf("egress: allowed network %q is not in CIDR notation (such as 10.0.0.0/8 or fd00::/8)",
				entry)
		case p != p.Masked():
			return nil, fmt.Errorf("egress: allowed network %q has bits set beyond its prefix length (did you mean %s or %s?)",
				entry, p.Masked(), netip.PrefixFrom(p.Addr(), p.Addr().BitLen()))
		case p.Addr().Is4In6():
			return nil, fmt.Errorf("egress: allowed network %q is IPv4-mapped IPv6: write it as an IPv4 prefix", entry)
		}
		networks = append(networks, p)
	}
	return networks, nil
}

// LookupFunc resolves a host name to its addresses, as net.Resolver.LookupNetIP does; the Guard always asks for network
// "ip" (both families).
type LookupFunc func(ctx context.Context, network, host string) ([]netip.Addr, error)

// Option adjusts a Guard made by NewGuard.
type Option func(*Guard)

// WithLookup makes the Guard resolve host names with lookup instead of net.DefaultResolver, both in CheckURL and when
// the Client dials, so tests can answer without DNS and change the answer between the two (DNS rebinding).
func WithLookup(lookup LookupFunc) Option {
	return func(g *Guard) { g.lookup = lookup }
}

// Guard applies a Policy to outbound requests. Make one with NewGuard; it is immutable and safe for concurrent use.
type Guard struct {
	allowHTTP bool
	allowed   []netip.Prefix
	lookup    LookupFunc
}

// NewGuard returns a Guard enforcing p, resolving names with net.DefaultResolver unless an option says otherwise.
func NewGuard(p Policy, opts ...Option) *Guard {
	g := &Guard{
		allowHTTP: p.AllowHTTP,
		// A copy: the Guard is shared between goroutines and must not change under them.
		allowed: append([]netip.Prefix(nil), p.AllowedNetworks...),
		lookup:  net.DefaultResolver.LookupNetIP,
	}
	for _, opt := range opts {
		opt(g)
	}
	return g
}

// CheckURL validates a target URL when it is registered. raw must be an absolute https:// URL (or http:// when the
// policy allows it) of at most MaxURLLength bytes, with a host, without credentials or fragment, with a port, if any,
// from 1 to 65535. An IP-literal host — in any notation a browser or inet_aton(3) accepts, such as 2130706433 or
// 0x7f.1 — must be allowed; a host name is resolved, with a timeout, and every address it has must be allowed.
//
// It returns an error wrapping ErrInvalidURL that says what is wrong with the URL's form, ErrBlocked when the host is
// or resolves to an address the policy blocks, or ErrUnresolvable when the name has no address (including when ctx
// ends first). Every message is safe to show to API clients.
func (g *Guard) CheckURL(ctx context.Context, raw string) error {
	if len(raw) > MaxURLLength {
		return invalid(fmt.Sprintf("longer than %d bytes", MaxURLLength))
	}
	u, err := url.Parse(raw)
	if err != nil {
		// The parser's message quotes the URL back; a short reason reads better in an API response.
		return invalid("malformed")
	}
	if err := g.checkScheme(u.Scheme); err != nil {
		return err
	}
	if u.User != nil {
		return invalid("credentials (user:password@) are not allowed")
	}
	// url.URL cannot tell "https://h/#" from "https://h/", and a '#' can only start a fragment.
	if strings.Contains(raw, "#") {
		return invalid("a fragment (#…) is not allowed")
	}
	host := u.Hostname()
	if host == "" {
		return invalid("the host is missing")
	}
	if port := u.Port(); port != "" {
		if n, err := strconv.ParseUint(port, 10, 16); err != nil || n == 0 {
			return invalid("the port must be from 1 to 65535")
		}
	}
	return g.checkHost(ctx, host)
}

// checkHost resolves host with a timeout and returns ErrBlocked unless the policy allows every address it has
// (ErrUnresolvable when it has none).
func (g *Guard) checkHost(ctx context.Context, host string) error {
	ctx, cancel := context.WithTimeout(ctx, lookupTimeout)
	defer cancel()
	addrs, err := g.resolve(ctx, host)
	if err != nil {
		return err
	}
	for _, a := range addrs {
		if !g.allows(a) {
			return ErrBlocked
		}
	}
	return nil
}

// checkScheme returns an error wrapping ErrInvalidURL unless the policy allows scheme (lower case, as url.Parse leaves
// it).
func (g *Guard) checkScheme(scheme string) error {
	switch {
	case scheme == "https", scheme == "http" && g.allowHTTP:
		return nil
	case g.allowHTTP:
		return invalid("the scheme must be https or http")
	default:
		return invalid("the scheme must be https")
	}
}

// resolve returns the addresses host stands for: the one an IP literal denotes, never sent to DNS, or those the
// lookup returns for a name. It returns an error wrapping ErrInvalidURL for a malformed IP literal and
// ErrUnresolvable when a name has no address.
func (g *Guard) resolve(ctx context.Context, host string) ([]netip.Addr, error) {
	addr, isLiteral, err := literalAddr(host)
	switch {
	case err != nil:
		return nil, err
	case isLiteral:
		return []netip.Addr{addr}, nil
	}
	addrs, err := g.lookup(ctx, "ip", host)
	if err != nil || len(addrs) == 0 {
		return nil, ErrUnresolvable
	}
	return addrs, nil
}

func invalid(reason string) error {
	return fmt.Errorf("%w: %s", ErrInvalidURL, reason)
}
