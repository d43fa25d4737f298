package xmpp

import (
	"testing"
)

// FuzzNormalizeAddress: any input either fails or normalizes to an address that normalizes to itself (one account,
// one address), and inbound geo URIs never yield a point off the map.
func FuzzNormalizeAddress(f *testing.F) {
	for _, seed := range []string{"alice@example.org", "Alice@Example.ORG/phone", "xmpp:bob@example.org?message", "example.org", "@x", "a@b@c", "ǅ@example.org", "geo:52.5,13.4", "geo:91,0", "geo:1,2,3;u=35", "geo:NaN,0"} {
		f.Add(seed)
	}
	p := New(Options{})
	f.Fuzz(func(t *testing.T, raw string) {
		if norm, err := p.NormalizeAddress(raw); err == nil {
			again, err := p.NormalizeAddress(norm)
			if err != nil || again != norm {
				t.Fatalf("NormalizeAddress(%q) = %q, which normalizes to %q, %v", raw, norm, again, err)
			}
		}
		if lat, lon, ok := geoURI(raw); ok && !(lat >= -90 && lat <= 90 && lon >= -180 && lon <= 180) {
			t.Fatalf("geoURI(%q) = %v, %v", raw, lat, lon)
		}
	})
}
