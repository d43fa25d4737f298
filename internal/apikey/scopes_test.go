package apikey_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/switchboard/switchboard/internal/apikey"
)

func TestAllListsTheCatalogueInDisplayOrder(t *testing.T) {
	want := []string{
		"models:read",
		"links:read", "links:write",
		"webhooks:read", "webhooks:write",
		"messaging:read", "messaging:write",
		"automation:read", "automation:write",
	}
	if got := apikey.All(); !slices.Equal(got, want) {
		t.Errorf("All() = %q, want %q", got, want)
	}
}

func TestParseScopes(t *testing.T) {
	tests := []struct {
		name string
		in   []string
		want []string
	}{
		{"one scope", []string{"links:read"}, []string{"links:read"}},
		{"duplicates removed", []string{"links:read", "links:read", "links:read"}, []string{"links:read"}},
		{"catalogue order, not input order",
			[]string{"automation:write", "models:read", "links:write", "links:read"},
			[]string{"models:read", "links:read", "links:write", "automation:write"}},
		{"write does not add read", []string{"webhooks:write"}, []string{"webhooks:write"}},
		{"surrounding space trimmed", []string{"  links:read ", "\tmodels:read\n"}, []string{"models:read", "links:read"}},
		{"blank entries ignored", []string{"", "links:read", "  "}, []string{"links:read"}},
		{"whole catalogue", apikey.All(), apikey.All()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := apikey.ParseScopes(tt.in)
			if err != nil {
				t.Fatalf("ParseScopes(%q) error: %v", tt.in, err)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("ParseScopes(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestParseScopesErrors(t *testing.T) {
	tests := []struct {
		name    string
		in      []string
		mention string // the error names the culprit
	}{
		{"nil", nil, "at least one scope"},
		{"empty", []string{}, "at least one scope"},
		{"only blanks", []string{"", " "}, "at least one scope"},
		{"unknown resource", []string{"billing:read"}, `"billing:read"`},
		{"unknown among known", []string{"links:read", "links:admin"}, `"links:admin"`},
		{"write on a read-only resource", []string{"models:write"}, `"models:write"`},
		{"wrong case", []string{"Links:read"}, `"Links:read"`},
		{"resource without access", []string{"links"}, `"links"`},
		{"wildcard", []string{"*"}, `"*"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := apikey.ParseScopes(tt.in)
			if err == nil {
				t.Fatalf("ParseScopes(%q) = %q, want an error", tt.in, got)
			}
			if !strings.Contains(err.Error(), tt.mention) {
				t.Errorf("ParseScopes(%q) error %q does not mention %s", tt.in, err, tt.mention)
			}
			if got != nil {
				t.Errorf("ParseScopes(%q) returned %q with its error, want nil", tt.in, got)
			}
		})
	}
}

func TestGrants(t *testing.T) {
	tests := []struct {
		held     []string
		required string
		want     bool
	}{
		{[]string{"links:read"}, "links:read", true},
		{[]string{"links:write"}, "links:write", true},
		{[]string{"links:write"}, "links:read", true}, // write implies read
		{[]string{"links:read"}, "links:write", false},
		{[]string{"links:write"}, "webhooks:read", false}, // other resources are not implied
		{[]string{"links:write"}, "webhooks:write", false},
		{[]string{"webhooks:read", "links:read"}, "links:read", true},
		{[]string{"messaging:write"}, "messaging:read", true},
		{[]string{"automation:read"}, "automation:write", false},
		{nil, "models:read", false},
		{[]string{"links:write"}, "link:read", false}, // no prefix matching
		{[]string{"links:writer"}, "links:read", false},
	}
	for _, tt := range tests {
		if got := apikey.Grants(tt.held, tt.required); got != tt.want {
			t.Errorf("Grants(%q, %q) = %v, want %v", tt.held, tt.required, got, tt.want)
		}
	}
}

func TestGrantsAll(t *testing.T) {
	tests := []struct {
		held, required []string
		want           bool
	}{
		{[]string{"links:read"}, nil, true}, // an operation without scopes needs none
		{nil, nil, true},
		{[]string{"links:write", "webhooks:read"}, []string{"links:read", "links:write", "webhooks:read"}, true},
		{[]string{"links:write"}, []string{"links:read", "webhooks:read"}, false},
		{[]string{"links:read"}, []string{"links:read", "links:write"}, false},
		{apikey.All(), apikey.All(), true},
	}
	for _, tt := range tests {
		if got := apikey.GrantsAll(tt.held, tt.required); got != tt.want {
			t.Errorf("GrantsAll(%q, %q) = %v, want %v", tt.held, tt.required, got, tt.want)
		}
	}
}
