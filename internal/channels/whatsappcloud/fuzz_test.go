package whatsappcloud

import "testing"

// FuzzNormalizeAddress: any input either fails or normalizes to an address that normalizes to itself (one person,
// one address).
func FuzzNormalizeAddress(f *testing.F) {
	for _, seed := range []string{"123456789", "-1001234567890", "@Acme_Bot", "+1 (555) 010-0002", "15550100002", "0", "+0", "@", "-0", "  42 "} {
		f.Add(seed)
	}
	p := New(Options{})
	f.Fuzz(func(t *testing.T, raw string) {
		if norm, err := p.NormalizeAddress(raw); err == nil {
			if again, err := p.NormalizeAddress(norm); err != nil || again != norm {
				t.Fatalf("NormalizeAddress(%q) = %q, which normalizes to %q, %v", raw, norm, again, err)
			}
		}
	})
}
