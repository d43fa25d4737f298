package apikey

import (
	"slices"

	"github.com/switchboard/switchboard/store"
)

// BrowserScope is what a browser key may do: one operation of the API, aimed at one target where the scope needs
// one. Browser keys are published in pages, so each scope is a job a visitor may be given in full: it reads nothing
// of the workspace but what the operation returns, and changes nothing but what it creates.
type BrowserScope struct {
	Name        string
	Description string
	// Operations are the operationIds the scope allows: one job, which may be answered by more than one
	// operation (a link's statistics and their breakdowns).
	Operations []string
	// Target names what the key is aimed at, chosen when it is made ("" when the scope needs none): the custom event
	// type it publishes, the instance it sends into, the link whose statistics it reads.
	Target string
	// Quota is true when the scope creates things under the key's daily quota.
	Quota bool
}

// Browser scope targets.
const (
	TargetEventType = "event_type"
	TargetInstance  = "instance"
	TargetLink      = "link"
)

// targetParams are the path parameters that name a scope's target, for the targets named in the path.
var targetParams = map[string]string{TargetInstance: "instance_id", TargetLink: "link_id"}

// TargetParam is the path parameter that must name the key's target for a request of the scope to be in it, or "".
func (s BrowserScope) TargetParam() string { return targetParams[s.Target] }

// Allows reports whether the operation operationID is one of the scope's.
func (s BrowserScope) Allows(operationID string) bool {
	return slices.Contains(s.Operations, operationID)
}

// BrowserScopes are the scopes a browser key may hold (one per key), in display order.
var BrowserScopes = []BrowserScope{
	{Name: "links:create", Description: "Create short links (a share button, a link form), up to a daily quota",
		Operations: []string{"createLink"}, Quota: true},
	{Name: "events:publish", Description: "Publish events of one custom type (a form, a page view, a click)",
		Operations: []string{"publishEvent"}, Target: TargetEventType},
	{Name: "messages:send", Description: "Send messages through one instance (a chat widget)",
		Operations: []string{"sendMessage"}, Target: TargetInstance},
	// One link chosen when the key is made, never "every link of the workspace": a page shows the numbers of the
	// link it is about, and a visitor who reads the key learns nothing of the others. The breakdowns (by country,
	// referrer, device…) are the same numbers of the same link, grouped.
	{Name: "links:read_stats", Description: "Read the click statistics of one link (a public counter)",
		Operations: []string{"getLinkStats", "getLinkStatsByDimension"}, Target: TargetLink},
}

// BrowserScopeNamed returns the browser scope called name, or false.
func BrowserScopeNamed(name string) (BrowserScope, bool) {
	for _, s := range BrowserScopes {
		if s.Name == name {
			return s, true
		}
	}
	return BrowserScope{}, false
}

// Browser reports whether k is a browser key.
func (k Key) Browser() bool { return k.Kind == KindBrowser }

// Kinds of key, as store.APIKey records them.
const (
	KindSecret  = store.KindSecret
	KindBrowser = store.KindBrowser
)
