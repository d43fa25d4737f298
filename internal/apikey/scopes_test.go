package apikey_test

import (
	"slices"
	"testing"

	"github.com/switchboard/switchboard/internal/apikey"
)

func TestAllListsTheCatalogueInDisplayOrder(t *testing.T) {
	want := []string{
		"models:read", "models:write",
		"links:read", "links:write",
		"webhooks:read", "webhooks:write",
		"messaging:read", "messaging:write",
		"automation:read", "automation:write",
	}
	if got := apikey.All(); !slices.Equal(got, want) {
		t.Errorf("All() = %q, want %q", got, want)
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
