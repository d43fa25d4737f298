package apikey_test

import (
	"errors"
	"testing"

	"github.com/switchboard/switchboard/internal/apikey"
)

func TestNormalizeOrigin(t *testing.T) {
	for raw, want := range map[string]string{
		"https://www.example.com":      "https://www.example.com",
		" HTTPS://WWW.Example.COM/ ":   "https://www.example.com",
		"https://example.com:443":      "https://example.com",
		"http://example.com:80":        "http://example.com",
		"http://127.0.0.1:5173":        "http://127.0.0.1:5173",
		"http://localhost:3000":        "http://localhost:3000",
		"https://*.example.com":        "https://*.example.com",
		"https://*.example.com:8443":   "https://*.example.com:8443",
		"https://[::1]:8080":           "https://[::1]:8080",
		"null":                         "",
		"":                             "",
		"ftp://example.com":            "",
		"example.com":                  "",
		"https://example.com/path":     "",
		"https://example.com?q=1":      "",
		"https://user@example.com":     "",
		"https://*.com":                "",
		"https://*":                    "",
		"https://www.*.example.com":    "",
		"https://ex*ample.com":         "",
		"https://example.com:0":        "",
		"https://example.com:99999":    "",
		"https://exa mple.com":         "",
		"https://-bad-.example.com":    "",
		"javascript://example.com%0a1": "",
	} {
		got, err := apikey.NormalizeOrigin(raw)
		if got != want || (want == "") != (err != nil) {
			t.Errorf("NormalizeOrigin(%q) = %q, %v; want %q", raw, got, err, want)
		}
		if err != nil && !errors.Is(err, apikey.ErrOrigin) {
			t.Errorf("NormalizeOrigin(%q): %v does not wrap ErrOrigin", raw, err)
		}
	}
}

func TestOriginAllowed(t *testing.T) {
	origins := []string{"https://www.example.com", "https://*.example.dev", "http://localhost:3000"}
	for origin, want := range map[string]bool{
		"https://www.example.com":          true,
		"https://shop.example.dev":         true,
		"https://a.b.example.dev":          true,
		"http://localhost:3000":            true,
		"https://example.dev":              false,
		"https://.example.dev":             false,
		"http://shop.example.dev":          false,
		"https://shop.example.dev:444":     false,
		"https://evil.com/.example.dev":    false,
		"https://evil.com:1.example.dev":   false,
		"https://www.example.com.evil.com": false,
		"http://www.example.com":           false,
		"http://localhost:3001":            false,
		"null":                             false,
		"":                                 false,
	} {
		if got := apikey.OriginAllowed(origins, origin); got != want {
			t.Errorf("OriginAllowed(%q) = %v, want %v", origin, got, want)
		}
	}
	if apikey.OriginAllowed(nil, "https://www.example.com") {
		t.Error("no origins allowed an origin")
	}
}
