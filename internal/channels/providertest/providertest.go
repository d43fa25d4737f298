// Package providertest holds checks every channel provider's tests share.
package providertest

import "testing"

// FuzzNormalizeAddress fuzzes normalize from seeds: any input either fails or normalizes to an address that
// normalizes to itself (one person or account, one address), which the chat and contact records rely on.
func FuzzNormalizeAddress(f *testing.F, normalize func(string) (string, error), seeds ...string) {
	for _, seed := range seeds {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		if norm, err := normalize(raw); err == nil {
			if again, err := normalize(norm); err != nil || again != norm {
				t.Fatalf("NormalizeAddress(%q) = %q, which normalizes to %q, %v", raw, norm, again, err)
			}
		}
	})
}
