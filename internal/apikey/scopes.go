package apikey

import "strings"

// Scope is a permission a key holds: "<resource>:read" or "<resource>:write"; write implies read.
type Scope = string

// Resources lists the resources scopes are granted on, in display order, with what they cover and whether a
// write scope exists.
var Resources = []Resource{
	{Name: "models", Description: "AI models of the workspace and its own model upstreams", Writable: true},
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
