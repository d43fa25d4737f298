package egress

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"
)

// publicAddr stands for a receiver on the internet. Tests only judge it, never connect to it.
const publicAddr = "93.184.215.14"

// loopback is the allowlist the tests' local servers need.
var loopback = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}

// testLookup answers host names from answers as a name server would (an empty answer is a name without addresses),
// so no test depends on DNS, and fails the test for any other name: IP literals in particular must never get here.
func testLookup(t *testing.T, answers map[string][]string) LookupFunc {
	t.Helper()
	return func(_ context.Context, _, host string) ([]netip.Addr, error) {
		answer, ok := answers[host]
		if !ok {
			t.Errorf("unexpected lookup of %q", host)
			return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
		}
		addrs := make([]netip.Addr, len(answer))
		for i, a := range answer {
			addrs[i] = netip.MustParseAddr(a)
		}
		return addrs, nil
	}
}

func TestParseNetworks(t *testing.T) {
	tests := []struct {
		csv     string
		want    []string
		wantErr string
	}{
		{csv: "", want: nil},
		{csv: "  ", want: nil},
		{csv: "127.0.0.0/8, ::1/128", want: []string{"127.0.0.0/8", "::1/128"}},
		{csv: " 10.0.0.0/8 ,, 192.168.1.7/32, ", want: []string{"10.0.0.0/8", "192.168.1.7/32"}},
		{csv: "10.0.0.0/8, banana", wantErr: `egress: allowed network "banana" is not in CIDR notation`},
		{csv: "10.1.2.3", wantErr: `egress: allowed network "10.1.2.3" is not in CIDR notation`},
		{csv: "10.0.0.0/33", wantErr: `egress: allowed network "10.0.0.0/33" is not in CIDR notation`},
		{csv: "fe80::/10%eth0", wantErr: `egress: allowed network "fe80::/10%eth0" is not in CIDR notation`},
		{csv: "10.1.2.3/8", wantErr: `egress: allowed network "10.1.2.3/8" has bits set beyond its prefix length ` +
			`(did you mean 10.0.0.0/8 or 10.1.2.3/32?)`},
		{csv: "::ffff:10.0.0.0/104", wantErr: `egress: allowed network "::ffff:10.0.0.0/104" is IPv4-mapped IPv6`},
	}
	for _, tt := range tests {
		t.Run(tt.csv, func(t *testing.T) {
			got, err := ParseNetworks(tt.csv)
			if tt.wantErr != "" {
				if err == nil || !strings.HasPrefix(err.Error(), tt.wantErr) {
					t.Fatalf("ParseNetworks(%q) error = %v, want one starting %q", tt.csv, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseNetworks(%q): %v", tt.csv, err)
			}
			var gotStrings []string
			for _, p := range got {
				gotStrings = append(gotStrings, p.String())
			}
			if !slices.Equal(gotStrings, tt.want) {
				t.Errorf("ParseNetworks(%q) = %v, want %v", tt.csv, gotStrings, tt.want)
			}
		})
	}
}

// checkURLCase is a URL and what CheckURL must say about it: nil, ErrBlocked, ErrUnresolvable or ErrInvalidURL.
type checkURLCase struct {
	url  string
	want error
}

func runCheckURL(t *testing.T, g *Guard, tests []checkURLCase) {
	t.Helper()
	for _, tt := range tests {
		t.Run(tt.url[:min(len(tt.url), 60)], func(t *testing.T) {
			err := g.CheckURL(t.Context(), tt.url)
			if !errors.Is(err, tt.want) || (tt.want == nil) != (err == nil) {
				t.Fatalf("CheckURL(%q) = %v, want %v", tt.url, err, tt.want)
			}
			// The same words for every blocked target, whatever the address and however it was written.
			if tt.want == ErrBlocked && err.Error() != "the URL's host is not allowed" {
				t.Errorf("CheckURL(%q) says %q", tt.url, err)
			}
		})
	}
}

func TestCheckURL(t *testing.T) {
	g := NewGuard(Policy{}, WithLookup(testLookup(t, map[string][]string{
		"hooks.example":    {publicAddr, "2606:4700::1111"},
		"private.example":  {"10.0.0.1"},
		"metadata.example": {"169.254.169.254"},
		"mixed.example":    {publicAddr, "127.0.0.1"},
		"mapped.example":   {"::ffff:192.168.0.1"},
		"nat64.example":    {"64:ff9b::a9fe:a9fe"},
		"empty.example":    {},
	})))
	runCheckURL(t, g, []checkURLCase{
		// Public targets.
		{"https://hooks.example/", nil},
		{"https://hooks.example:8443/in?source=switchboard", nil},
		{"https://" + publicAddr + "/", nil},
		{"https://[2606:4700::1111]:443/", nil},
		{"https://[64:ff9b::808:808]/", nil}, // NAT64 of 8.8.8.8
		{"https://[2002:808:808::1]/", nil},  // 6to4 of 8.8.8.8
		{"https://hooks.example/" + strings.Repeat("a", MaxURLLength-len("https://hooks.example/")), nil},

		// Loopback, however it is written.
		{"https://127.0.0.1/", ErrBlocked},
		{"https://127.0.0.1./", ErrBlocked},
		{"https://127.255.255.254:8080/", ErrBlocked},
		{"https://[::1]/", ErrBlocked},
		{"https://[::ffff:127.0.0.1]/", ErrBlocked},
		{"https://[::ffff:7f00:1]/", ErrBlocked},
		{"https://[::127.0.0.1]/", ErrBlocked}, // IPv4-compatible
		{"https://2130706433/", ErrBlocked},
		{"https://0x7f000001/", ErrBlocked},
		{"https://0X7F000001/", ErrBlocked},
		{"https://0x7f.0.0.1/", ErrBlocked},
		{"https://0177.0.0.1/", ErrBlocked},
		{"https://017700000001/", ErrBlocked},
		{"https://127.1/", ErrBlocked},
		{"https://127.0.1/", ErrBlocked},
		// Unspecified, which Linux connects to the local host.
		{"https://0.0.0.0/", ErrBlocked},
		{"https://0/", ErrBlocked},
		{"https://[::]/", ErrBlocked},
		// Private, link-local and shared.
		{"https://10.0.0.1/", ErrBlocked},
		{"https://172.16.0.1/", ErrBlocked},
		{"https://192.168.1.1/", ErrBlocked},
		{"https://[fd00::1]/", ErrBlocked},
		{"https://169.254.169.254/latest/meta-data/", ErrBlocked},
		{"https://[fe80::1]/", ErrBlocked},
		{"https://100.64.0.1/", ErrBlocked},
		// Multicast, broadcast, reserved, documentation, benchmarking, protocol assignments.
		{"https://224.0.0.1/", ErrBlocked},
		{"https://[ff02::1]/", ErrBlocked},
		{"https://255.255.255.255/", ErrBlocked},
		{"https://240.0.0.1/", ErrBlocked},
		{"https://192.0.2.1/", ErrBlocked},
		{"https://198.51.100.1/", ErrBlocked},
		{"https://203.0.113.1/", ErrBlocked},
		{"https://[2001:db8::1]/", ErrBlocked},
		{"https://198.18.0.1/", ErrBlocked},
		{"https://192.0.0.1/", ErrBlocked},
		// IPv6 forms that carry a blocked IPv4 address.
		{"https://[64:ff9b::a00:1]/", ErrBlocked},  // NAT64 of 10.0.0.1
		{"https://[64:ff9b::7f00:1]/", ErrBlocked}, // NAT64 of 127.0.0.1
		{"https://[2002:a9fe:a9fe::1]/", ErrBlocked},
		{"https://[2001:0:4136:e378:8000:63bf:3fff:fdd2]/", ErrBlocked}, // Teredo
		// Names are judged by every address they resolve to.
		{"https://private.example/", ErrBlocked},
		{"https://metadata.example/", ErrBlocked},
		{"https://mixed.example/", ErrBlocked},
		{"https://mapped.example/", ErrBlocked},
		{"https://nat64.example/", ErrBlocked},
		{"https://empty.example/", ErrUnresolvable},

		// The URL's form.
		{"", ErrInvalidURL},
		{"/relative/path", ErrInvalidURL},
		{"hooks.example/path", ErrInvalidURL},
		{"ftp://hooks.example/", ErrInvalidURL},
		{"http://hooks.example/", ErrInvalidURL},
		{"javascript:alert(1)", ErrInvalidURL},
		{"https:hooks.example", ErrInvalidURL},
		{"https:///path", ErrInvalidURL},
		{"https://:443/", ErrInvalidURL},
		{"https://user:secret@hooks.example/", ErrInvalidURL},
		{"https://user@hooks.example/", ErrInvalidURL},
		{"https://@hooks.example/", ErrInvalidURL},
		{"https://hooks.example/#top", ErrInvalidURL},
		{"https://hooks.example/#", ErrInvalidURL},
		{"https://hooks.example/" + strings.Repeat("a", MaxURLLength), ErrInvalidURL},
		{"https://hooks.example:0/", ErrInvalidURL},
		{"https://hooks.example:65536/", ErrInvalidURL},
		{"https://hooks.example:https/", ErrInvalidURL},
		{"https://hooks .example/", ErrInvalidURL},
		{"https://%31%32%37.0.0.1/", ErrInvalidURL},
		// Hosts that look like IPv4 addresses but denote none are not sent to DNS.
		{"https://1.2.3.256/", ErrInvalidURL},
		{"https://4294967296/", ErrInvalidURL},
		{"https://1.2.3.4.5/", ErrInvalidURL},
		{"https://09.0.0.1/", ErrInvalidURL},
		{"https://hooks.123/", ErrInvalidURL},
		{"https://[fe80::1%25eth0]/", ErrInvalidURL},
	})
}

func TestCheckURLWithAllowedNetworks(t *testing.T) {
	g := NewGuard(Policy{AllowHTTP: true, AllowedNetworks: loopback}, WithLookup(testLookup(t, map[string][]string{
		"localhost.example": {"127.0.0.1", "::1"},
		"private.example":   {"10.0.0.1"},
		"mixed.example":     {"127.0.0.1", "10.0.0.1"},
	})))
	runCheckURL(t, g, []checkURLCase{
		{"http://127.0.0.1:8080/hook", nil},
		{"https://127.0.0.1/", nil},
		{"http://127.1/", nil},
		{"http://2130706433/", nil},
		{"http://[::1]/", nil},
		{"http://[::ffff:127.0.0.1]/", nil},
		{"http://localhost.example/", nil},

		{"http://10.0.0.1/", ErrBlocked},
		{"http://169.254.169.254/", ErrBlocked},
		{"http://[::2]/", ErrBlocked},
		{"http://private.example/", ErrBlocked},
		{"http://mixed.example/", ErrBlocked},
		// The allowlist names addresses, not what a translator may reach from them.
		{"http://[64:ff9b::7f00:1]/", ErrBlocked},

		{"ftp://127.0.0.1/", ErrInvalidURL},
	})
}

func TestCheckURLLookupFailures(t *testing.T) {
	tests := []struct {
		name   string
		lookup LookupFunc
	}{
		{"no such host", func(_ context.Context, _, host string) ([]netip.Addr, error) {
			return nil, &net.DNSError{Err: "no such host", Name: host, Server: "10.0.0.53:53", IsNotFound: true}
		}},
		{"server failure", func(_ context.Context, _, host string) ([]netip.Addr, error) {
			return nil, &net.DNSError{Err: "server misbehaving", Name: host, Server: "10.0.0.53:53"}
		}},
		{"slow name server", func(ctx context.Context, _, _ string) ([]netip.Addr, error) {
			if _, ok := ctx.Deadline(); !ok {
				t.Error("lookup without a deadline")
			}
			<-ctx.Done()
			return nil, ctx.Err()
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewGuard(Policy{}, WithLookup(tt.lookup))
			ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
			defer cancel()
			err := g.CheckURL(ctx, "https://hooks.example/")
			if err != ErrUnresolvable {
				t.Fatalf("CheckURL = %v, want ErrUnresolvable itself (no resolver details)", err)
			}
		})
	}
}
