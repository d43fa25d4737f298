package workspaces_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/switchboard/switchboard/internal/apikey"
	"github.com/switchboard/switchboard/internal/problem"
	"github.com/switchboard/switchboard/internal/workspaces"
)

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
			got, err := workspaces.ParseScopes(tt.in)
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
		pointer string // the field the error points at
		mention string // the error names the culprit
	}{
		{"nil", nil, "/scopes", "at least one scope"},
		{"empty", []string{}, "/scopes", "at least one scope"},
		{"only blanks", []string{"", " "}, "/scopes", "at least one scope"},
		{"unknown resource", []string{"billing:read"}, "/scopes/0", `"billing:read"`},
		{"unknown among known", []string{"links:read", "links:admin"}, "/scopes/1", `"links:admin"`},
		{"unknown resource", []string{"billing:write"}, "/scopes/0", `"billing:write"`},
		{"wrong case", []string{"Links:read"}, "/scopes/0", `"Links:read"`},
		{"resource without access", []string{"links"}, "/scopes/0", `"links"`},
		{"wildcard", []string{"*"}, "/scopes/0", `"*"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := workspaces.ParseScopes(tt.in)
			var p *problem.Error
			if !errors.As(err, &p) || p.Code != problem.ValidationFailed || len(p.Fields) != 1 {
				t.Fatalf("ParseScopes(%q) = %q, %v; want one invalid field", tt.in, got, err)
			}
			if f := p.Fields[0]; f.Pointer != tt.pointer || !strings.Contains(f.Detail, tt.mention) {
				t.Errorf("ParseScopes(%q) refused %q: %q, want %s naming %s", tt.in, f.Pointer, f.Detail, tt.pointer, tt.mention)
			}
			if got != nil {
				t.Errorf("ParseScopes(%q) returned %q with its error, want nil", tt.in, got)
			}
		})
	}
}

// Every preset grants scopes of the catalogue, and a key with exactly a preset's scopes is shown as that preset.
func TestPresets(t *testing.T) {
	seen := map[string]bool{}
	for _, p := range workspaces.Presets {
		if seen[p.ID] || p.ID == "" || p.ID == "custom" {
			t.Errorf("preset ID %q is empty, taken twice or the console's custom choice", p.ID)
		}
		seen[p.ID] = true
		parsed, err := workspaces.ParseScopes(p.Scopes)
		if err != nil {
			t.Errorf("preset %s: %v", p.ID, err)
		}
		reversed := slices.Clone(parsed)
		slices.Reverse(reversed)
		if got, ok := workspaces.PresetFor(reversed); !ok || got.ID != p.ID {
			t.Errorf("PresetFor(%q) = %q, %v; want %s", reversed, got.ID, ok, p.ID)
		}
	}
	if _, ok := workspaces.PresetFor([]string{"models:read", "links:read"}); ok {
		t.Error("a custom set is named as a preset")
	}
}
