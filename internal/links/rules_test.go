package links

import (
	"regexp"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/switchboard/switchboard/api"
)

func TestGenerate(t *testing.T) {
	seen := map[string]bool{}
	counts := map[rune]int{}
	for range 2000 {
		s := Generate()
		if len(s) != GeneratedLength || !ValidSlug(s) {
			t.Fatalf("Generate() = %q: want %d characters of a valid slug", s, GeneratedLength)
		}
		for _, r := range s {
			if !strings.ContainsRune(Alphabet, r) {
				t.Fatalf("Generate() = %q contains %q, not in the alphabet", s, r)
			}
			counts[r]++
		}
		if seen[s] {
			t.Fatalf("Generate() repeated %q within 2000 draws", s)
		}
		seen[s] = true
	}
	// 14000 characters over 56 symbols: 250 expected each; a biased or truncated alphabet shows up far outside.
	for _, r := range Alphabet {
		if n := counts[r]; n < 150 || n > 350 {
			t.Errorf("character %q drawn %d times in 14000, want about 250", r, n)
		}
	}
}

func TestAlphabetHasNoLookAlikes(t *testing.T) {
	for _, r := range "0Oo1lI" {
		if strings.ContainsRune(Alphabet, r) {
			t.Errorf("Alphabet contains the look-alike %q", r)
		}
	}
}

// slugPattern is the API's Slug pattern, read from api/openapi.yaml: the oracle ValidSlug must agree with.
var slugPattern = func() *regexp.Regexp {
	var spec struct {
		Components struct {
			Schemas struct {
				Slug struct {
					Pattern string `yaml:"pattern"`
				} `yaml:"Slug"`
			} `yaml:"schemas"`
		} `yaml:"components"`
	}
	if err := yaml.Unmarshal(api.Spec, &spec); err != nil {
		panic(err)
	}
	return regexp.MustCompile(spec.Components.Schemas.Slug.Pattern)
}()

// slugCases are slugs and whether they are valid.
var slugCases = []struct {
	slug string
	ok   bool
}{
	{"a", true},
	{"A", true},
	{"black-friday", true},
	{"Black_Friday-2026", true},
	{"9", true},
	{"a-", true},
	{"a_", true},
	{strings.Repeat("a", 63), true},
	{strings.Repeat("a", 64), false},
	{"", false},
	{"-lead", false},
	{"_lead", false},
	{"has space", false},
	{"dot.ted", false},
	{"slash/ed", false},
	{"plus+", false},
	{"a%20", false},
	{"nul\x00", false},
	{"ümlaut", false},
	{"trailing\n", false},
}

func TestValidSlug(t *testing.T) {
	for _, tc := range slugCases {
		if got := ValidSlug(tc.slug); got != tc.ok {
			t.Errorf("ValidSlug(%q) = %v, want %v", tc.slug, got, tc.ok)
		}
		if want := slugPattern.MatchString(tc.slug); tc.ok != want {
			t.Errorf("the table says %q is valid: %v; the spec's pattern says %v", tc.slug, tc.ok, want)
		}
	}
}

// ValidSlug agrees with the spec's pattern on every string of up to two bytes and on every length around the limit.
func TestValidSlugAgreesWithThePattern(t *testing.T) {
	check := func(s string) {
		if got, want := ValidSlug(s), slugPattern.MatchString(s); got != want {
			t.Errorf("ValidSlug(%q) = %v, the pattern says %v", s, got, want)
		}
	}
	check("")
	for a := range 256 {
		check(string([]byte{byte(a)}))
		for b := range 256 {
			check(string([]byte{byte(a), byte(b)}))
		}
	}
	for n := 60; n <= 66; n++ {
		check(strings.Repeat("a", n))
		check("a" + strings.Repeat("-", n-1))
	}
}

// ValidSlug agrees with the spec's pattern on any string.
func FuzzValidSlug(f *testing.F) {
	for _, tc := range slugCases {
		f.Add(tc.slug)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := ValidSlug(s), slugPattern.MatchString(s); got != want {
			t.Errorf("ValidSlug(%q) = %v, the spec's pattern says %v", s, got, want)
		}
	})
}

func TestReserved(t *testing.T) {
	r := NewReserved([]string{"Static", "www"}, []string{
		"/api/v1/links", "/docs/*", "/openapi.yaml", "/:slug", "/*", "/", "/user/api", "/problems/:code",
	})
	for _, tc := range []struct {
		slug string
		want bool
	}{
		{"api", true}, {"API", true}, {"docs", true}, {"openapi.yaml", true}, {"user", true},
		{"problems", true}, {"static", true}, {"STATIC", true}, {"www", true},
		{"slug", false}, {":slug", false}, {"links", false}, {"v1", false}, {"apis", false},
	} {
		if got := r.Has(tc.slug); got != tc.want {
			t.Errorf("Has(%q) = %v, want %v", tc.slug, got, tc.want)
		}
	}
}

func TestCheckDestination(t *testing.T) {
	p := NewPolicy([]string{"MAILTO:", "tel"}, []string{"Evil.example.", "phish.test"},
		[]string{"sb.example.com", "localhost:8080", "Go.Example.ORG"})
	for _, tc := range []struct {
		name, url string
		want      string // a fragment of the error, "" for accepted
	}{
		{"https", "https://example.com/pricing?a=1#top", ""},
		{"http with port", "http://example.com:8081/x", ""},
		{"allowed scheme", "mailto:team@example.com", ""},
		{"allowed scheme in other case", "TEL:+4930123456", ""},
		{"uppercase https", "HTTPS://Example.com/", ""},
		{"relative", "/pricing", "absolute URL"},
		{"no scheme", "example.com/pricing", "absolute URL"},
		{"scheme not allowed", "javascript:alert(1)", `scheme "javascript" is not allowed`},
		{"ftp", "ftp://example.com/file", `scheme "ftp" is not allowed`},
		{"no host", "https:///path", "must name a host"},
		{"opaque http", "https:example.com", "must name a host"},
		{"user info", "https://user:pass@example.com/", "user name or password"},
		{"user only", "https://user@example.com/", "user name or password"},
		{"too long", "https://example.com/" + strings.Repeat("a", 2049-len("https://example.com/")), "at most 2048"},
		{"exactly 2048", "https://example.com/" + strings.Repeat("a", 2048-len("https://example.com/")), ""},
		{"loop to short domain", "https://sb.example.com/abc", "would loop"},
		{"loop in other case and port", "http://SB.EXAMPLE.COM.:443/abc", "would loop"},
		{"loop to product host", "http://localhost:8080/docs", "would loop"},
		{"loop to product host other port", "http://localhost/x", "would loop"},
		{"loop to second domain", "https://go.example.org/x", "would loop"},
		{"subdomain of own host is fine", "https://www.sb.example.com/", ""},
		{"blocked", "https://evil.example/x", "blocked"},
		{"blocked subdomain", "https://a.b.EVIL.example./x", "blocked"},
		{"blocked other entry", "http://phish.test", "blocked"},
		{"suffix but not subdomain", "https://notevil.example/x", ""},
		{"unicode host", "https://bücher.example/", "ASCII form"},
		{"punycode host", "https://xn--bcher-kva.example/", ""},
		{"ipv6", "https://[2001:db8::1]:8443/x", ""},
		{"invalid", "https://exa mple.com/", "valid absolute URL"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := p.CheckDestination(tc.url)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("CheckDestination(%q) = %v, want accepted", tc.url, err)
			case tc.want != "" && err == nil:
				t.Fatalf("CheckDestination(%q) accepted, want an error with %q", tc.url, tc.want)
			case tc.want != "" && !strings.Contains(err.Error(), tc.want):
				t.Fatalf("CheckDestination(%q) = %q, want it to contain %q", tc.url, err, tc.want)
			}
		})
	}
}

func TestNormalizeHost(t *testing.T) {
	for in, want := range map[string]string{
		"Example.COM":       "example.com",
		"example.com.":      "example.com",
		"example.com:8080":  "example.com",
		"[2001:DB8::1]:443": "2001:db8::1",
		" sb.example.com ":  "sb.example.com",
	} {
		if got := NormalizeHost(in); got != want {
			t.Errorf("NormalizeHost(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestShortURL(t *testing.T) {
	if got := ShortURL("https", "sb.example.com", "Black-Friday"); got != "https://sb.example.com/Black-Friday" {
		t.Errorf("ShortURL = %q", got)
	}
}

func TestDestinationsAreNormalised(t *testing.T) {
	p := Policy{AllowedSchemes: []string{"mailto"}}
	for _, bad := range []string{"https://example.com:0/", "https://example.com:65536/", "https://example.com:99999/x"} {
		if err := p.CheckDestination(bad); err == nil {
			t.Errorf("%s accepted", bad)
		}
	}
	for raw, want := range map[string]string{
		`https://example.com/a b?q=<x>&r="y"#f g`: `https://example.com/a%20b?q=%3Cx%3E&r=%22y%22#f%20g`,
		"https://example.com/ok?x=1%202":          "https://example.com/ok?x=1%202",
		"https://example.com:8443/p":              "https://example.com:8443/p",
		"mailto:someone@example.com":              "mailto:someone@example.com",
	} {
		if err := p.CheckDestination(raw); err != nil {
			t.Errorf("%s refused: %v", raw, err)
		}
		if got := NormalizeDestination(raw); got != want {
			t.Errorf("NormalizeDestination(%q) = %q, want %q", raw, got, want)
		}
	}
}

func TestOwnAddressesLoopWhateverTheSpelling(t *testing.T) {
	p := NewPolicy(nil, nil, []string{"127.0.0.1:8080", "sb.example.com"})
	for _, dest := range []string{"http://127.0.0.1:8080/x", "http://localhost:8080/x", "http://[::1]:8080/x",
		"http://2130706433:8080/x", "http://0x7f.1:8080/x", "http://0.0.0.0:8080/x", "http://[::ffff:127.0.0.1]:8080/x",
		"http://app.localhost:8080/", "https://sb.example.com/other"} {
		if err := p.CheckDestination(dest); err == nil || !strings.Contains(err.Error(), "loop") {
			t.Errorf("%s: %v, want a loop refusal", dest, err)
		}
	}
	for _, dest := range []string{"http://localhost:3000/dev", "http://[::1]:9999/", "https://example.com:8080/"} {
		if err := p.CheckDestination(dest); err != nil {
			t.Errorf("%s refused: %v", dest, err)
		}
	}
}
