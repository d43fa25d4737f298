package apikey

import (
	"fmt"
	"slices"
	"strings"
)

// Scope is a permission a key holds: "<resource>:read" or "<resource>:write"; write implies read.
type Scope = string

// Resources lists the resources scopes are granted on, in display order, with what they cover and whether a
// write scope exists.
var Resources = []Resource{
	{Name: "models", Description: "AI models of the workspace", Writable: false},
	{Name: "links", Description: "Short links and their analytics", Writable: true},
	{Name: "webhooks", Description: "Webhook endpoints and deliveries", Writable: true},
	{Name: "messaging", Description: "Channel instances, messages, groups and contacts", Writable: true},
	{Name: "automation", Description: "Inbound publishing endpoints and workflow hooks", Writable: true},
}

// Resource is one row of the scope catalogue.
type Resource struct {
	Name        string
	Description string
	Writable    bool
}

// All returns every scope of the catalogue, in display order.
func All() []Scope {
	var out []Scope
	for _, r := range Resources {
		out = append(out, r.Name+":read")
		if r.Writable {
			out = append(out, r.Name+":write")
		}
	}
	return out
}

// ParseScopes validates a list of scopes (from a flag or a form), removes duplicates and returns them in catalogue
// order. An empty list is an error: a key that can do nothing is a mistake.
func ParseScopes(in []string) ([]Scope, error) {
	known := All()
	seen := map[string]bool{}
	for _, s := range in {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		if !slices.Contains(known, s) {
			return nil, fmt.Errorf("unknown scope %q (known scopes: %s)", s, strings.Join(known, ", "))
		}
		seen[s] = true
	}
	if len(seen) == 0 {
		return nil, fmt.Errorf("at least one scope is required (known scopes: %s)", strings.Join(known, ", "))
	}
	var out []Scope
	for _, s := range known {
		if seen[s] {
			out = append(out, s)
		}
	}
	return out, nil
}

// Grants reports whether the held scopes allow required: the scope itself, or the write scope of the same
// resource when required is a read scope.
func Grants(held []Scope, required Scope) bool {
	for _, h := range held {
		if h == required {
			return true
		}
		if res, ok := strings.CutSuffix(required, ":read"); ok && h == res+":write" {
			return true
		}
	}
	return false
}

// GrantsAll reports whether held allows every one of required.
func GrantsAll(held, required []Scope) bool {
	for _, r := range required {
		if !Grants(held, r) {
			return false
		}
	}
	return true
}

// Preset is a named set of scopes offered when creating a key in the console.
type Preset struct {
	ID          string
	Name        string
	Description string
	Scopes      []Scope
}

// Presets are the console's scope presets, in display order; "custom" (a per-resource matrix) is not one of them.
var Presets = []Preset{
	{ID: "full", Name: "Full access", Description: "Read and write everything in the workspace.", Scopes: All()},
	{ID: "read", Name: "Read only", Description: "Read everything, change nothing.", Scopes: readScopes()},
	{ID: "links", Name: "Short links", Description: "Create and manage short links and read their analytics.",
		Scopes: []Scope{"links:write"}},
	{ID: "messaging", Name: "Messaging", Description: "Channel instances, messages, groups and contacts.",
		Scopes: []Scope{"messaging:write"}},
	{ID: "automation", Name: "Automation", Description: "Inbound publishing endpoints and webhooks for workflow tools.",
		Scopes: []Scope{"webhooks:write", "automation:write"}},
}

func readScopes() []Scope {
	var out []Scope
	for _, r := range Resources {
		out = append(out, r.Name+":read")
	}
	return out
}

// PresetFor names the preset whose scopes are exactly scopes (in any order), or returns false.
func PresetFor(scopes []Scope) (Preset, bool) {
	for _, p := range Presets {
		if len(p.Scopes) == len(scopes) && sameSet(p.Scopes, scopes) {
			return p, true
		}
	}
	return Preset{}, false
}

func sameSet(a, b []Scope) bool {
	for _, s := range a {
		if !slices.Contains(b, s) {
			return false
		}
	}
	return true
}
