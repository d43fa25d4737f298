package workspaces

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/switchboard/switchboard/internal/apikey"
	"github.com/switchboard/switchboard/internal/problem"
	"github.com/switchboard/switchboard/store"
)

// Preset is a named set of scopes to choose instead of listing scopes one by one.
type Preset struct {
	ID          string
	Name        string
	Description string
	Scopes      []apikey.Scope
}

// Presets are the scope presets, in display order; a custom set of scopes is not one of them.
var Presets = []Preset{
	{ID: "full", Name: "Full access", Description: "Read and write everything in the workspace.", Scopes: apikey.All()},
	{ID: "read", Name: "Read only", Description: "Read everything, change nothing.", Scopes: readScopes()},
	{ID: "links", Name: "Short links", Description: "Create and manage short links and read their analytics.",
		Scopes: []apikey.Scope{"links:write"}},
	{ID: "messaging", Name: "Messaging", Description: "Channel instances, messages, groups and contacts.",
		Scopes: []apikey.Scope{"messaging:write"}},
	{ID: "automation", Name: "Automation", Description: "Inbound publishing endpoints and webhooks for workflow tools.",
		Scopes: []apikey.Scope{"webhooks:write", "automation:write"}},
}

func readScopes() []apikey.Scope {
	var out []apikey.Scope
	for _, r := range apikey.Resources {
		out = append(out, r.Name+":read")
	}
	return out
}

// PresetFor names the preset whose scopes are exactly scopes (in any order), or returns false.
func PresetFor(scopes []apikey.Scope) (Preset, bool) {
	for _, p := range Presets {
		if len(p.Scopes) == len(scopes) && sameSet(p.Scopes, scopes) {
			return p, true
		}
	}
	return Preset{}, false
}

func sameSet(a, b []apikey.Scope) bool {
	for _, s := range a {
		if !slices.Contains(b, s) {
			return false
		}
	}
	return true
}

// ParseScopes validates a custom set of scopes: each of the catalogue (white space around it dropped, blanks
// ignored), at least one — a key that can do nothing is a mistake. It returns them without duplicates in catalogue
// order, or a ValidationFailed error at FieldScopes (an unknown scope at FieldScopes/i).
func ParseScopes(in []string) ([]apikey.Scope, error) {
	scopes, invalid := parseScopes(in)
	return scopes, invalid.Err()
}

// parseScopes is ParseScopes for callers that collect the invalid fields of a whole input.
func parseScopes(in []string) ([]apikey.Scope, problem.Fields) {
	known := apikey.All()
	seen := map[string]bool{}
	var invalid problem.Fields
	for i, s := range in {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		if !slices.Contains(known, s) {
			invalid.Add(fmt.Sprintf("%s/%d", FieldScopes, i),
				fmt.Sprintf("unknown scope %q (known scopes: %s)", s, strings.Join(known, ", ")))
		}
		seen[s] = true
	}
	if len(invalid) > 0 {
		return nil, invalid
	}
	if len(seen) == 0 {
		invalid.Add(FieldScopes, fmt.Sprintf("at least one scope is required (known scopes: %s)", strings.Join(known, ", ")))
		return nil, invalid
	}
	var out []apikey.Scope
	for _, s := range known {
		if seen[s] {
			out = append(out, s)
		}
	}
	return out, nil
}

// CreatedByCLI is the creator recorded for keys the operator's CLI creates; other keys record their console user.
const CreatedByCLI = "cli"

// NewKey is what CreateKey needs.
type NewKey struct {
	WorkspaceID string
	// Name tells people where the key is used (see Name).
	Name string
	// Preset is the ID of one of Presets, whose scopes the key gets; empty for the custom set Scopes.
	Preset string
	// Scopes is the custom set of scopes (see ParseScopes), used only without a Preset.
	Scopes []string
	// ExpiresIn is the key's lifetime from now; 0 means it never expires.
	ExpiresIn time.Duration
	// CreatedBy is the ID of the console user creating the key, or CreatedByCLI.
	CreatedBy string
	// Origins are the origins whose pages may use the key (see ParseOrigins); none means the key works from
	// servers, and from pages only where the operator allows their origin.
	Origins []string
	// Kind is apikey.KindSecret (the default) or apikey.KindBrowser. A browser key needs Origins and one
	// BrowserScope instead of a Preset or Scopes, with its Target where the scope needs one.
	Kind         string
	BrowserScope string
	// Target is what the browser scope aims at: a custom event type of the workspace (events:publish), an instance
	// of the workspace (messages:send).
	Target string
	// DailyQuota bounds how many things a browser key creates in a day (links:create); 0 takes
	// DefaultDailyQuota.
	DailyQuota int
	// Instances are the messaging instances a secret key reaches (IDs of the workspace's instances); none means
	// every instance. A browser key aims at its Target instead.
	Instances []string
}

// MaxKeyInstances bounds the instances one key lists.
const MaxKeyInstances = 100

// Bounds of a browser key's daily quota.
const (
	DefaultDailyQuota = 100
	MaxDailyQuota     = 100_000
)

// ParseOrigins validates the origins a key lists (see apikey.NormalizeOrigin; blanks ignored, at most
// apikey.MaxOrigins) and returns them normalized without duplicates, in the order given, or a ValidationFailed
// error at FieldOrigins/i.
func ParseOrigins(in []string) ([]string, error) {
	origins, invalid := parseOrigins(in)
	return origins, invalid.Err()
}

func parseOrigins(in []string) ([]string, problem.Fields) {
	out := []string{}
	var invalid problem.Fields
	for i, raw := range in {
		if strings.TrimSpace(raw) == "" {
			continue
		}
		o, err := apikey.NormalizeOrigin(raw)
		if err != nil {
			invalid.Add(fmt.Sprintf("%s/%d", FieldOrigins, i), fmt.Sprintf("%q: %v", clip(raw, 100), err))
			continue
		}
		if !slices.Contains(out, o) {
			out = append(out, o)
		}
	}
	if len(out) > apikey.MaxOrigins {
		invalid.Add(FieldOrigins, fmt.Sprintf("at most %d origins", apikey.MaxOrigins))
	}
	return out, invalid
}

// clip shortens what an error quotes back.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// CreateKey generates a key and stores it — only the SHA-256 of its secret and the characters that let people
// recognise it. The returned secret is the only copy there will ever be: show it once, never log it. Errors:
// ValidationFailed (every invalid field of n at once: FieldName, FieldPreset, FieldScopes, FieldOrigins,
// FieldExpiresIn), NotFound (no such workspace).
func (s *Service) CreateKey(ctx context.Context, n NewKey) (key Key, secret string, err error) {
	name, invalid := checkName(n.Name)
	var scopes []apikey.Scope
	var browser browserGrant
	switch n.Kind {
	case "", apikey.KindSecret:
		var invalidScopes problem.Fields
		scopes, invalidScopes = keyScopes(n)
		invalid = append(invalid, invalidScopes...)
	case apikey.KindBrowser:
		var invalidGrant problem.Fields
		browser, invalidGrant = s.browserGrant(ctx, n)
		invalid = append(invalid, invalidGrant...)
		scopes = []apikey.Scope{browser.scope}
	default:
		invalid.Add(FieldKind, `must be "secret" or "browser"`)
	}
	origins, invalidOrigins := parseOrigins(n.Origins)
	invalid = append(invalid, invalidOrigins...)
	instances, invalidInstances, err := s.parseInstances(ctx, n.WorkspaceID, n.Instances)
	if err != nil {
		return Key{}, "", err
	}
	invalid = append(invalid, invalidInstances...)
	if n.Kind == apikey.KindBrowser && len(instances) > 0 {
		invalid.Add(FieldInstances, "a browser key reaches the one instance of its target; limit secret keys to instances")
	}
	if n.Kind == apikey.KindBrowser && len(origins) == 0 && len(invalidOrigins) == 0 {
		invalid.Add(FieldOrigins, "a browser key needs the origins of the pages it is published in")
	}
	if n.ExpiresIn < 0 {
		invalid.Add(FieldExpiresIn, "must be positive")
	}
	if err := invalid.Err(); err != nil {
		return Key{}, "", err
	}
	var expiresAt *time.Time
	if n.ExpiresIn > 0 {
		t := time.Now().Add(n.ExpiresIn)
		expiresAt = &t
	}
	generate := apikey.Generate
	if n.Kind == apikey.KindBrowser {
		generate = apikey.GenerateBrowser
	}
	generated, err := generate()
	if err != nil {
		return Key{}, "", err
	}
	k, err := s.db.APIKeys.Create(ctx, store.NewAPIKey{
		WorkspaceID: n.WorkspaceID, Name: name, Scopes: scopes, CreatedBy: n.CreatedBy, ExpiresAt: expiresAt,
		Origins: origins, Kind: n.Kind, ScopeTarget: browser.target, DailyQuota: browser.dailyQuota, InstanceIDs: instances, SecretHash: generated.Hash, DisplayPrefix: generated.DisplayPrefix, Last4: generated.Last4,
	})
	if errors.Is(err, store.ErrNotFound) {
		return Key{}, "", noWorkspace(n.WorkspaceID)
	}
	if err != nil {
		return Key{}, "", err
	}
	return keyOf(k), generated.Plain, nil
}

// browserGrant is what a browser key may do.
type browserGrant struct {
	scope, target string
	dailyQuota    int
}

// browserGrant checks the browser scope of n, its target (which must exist in n's workspace) and its daily quota.
func (s *Service) browserGrant(ctx context.Context, n NewKey) (browserGrant, problem.Fields) {
	var invalid problem.Fields
	scope, ok := apikey.BrowserScopeNamed(n.BrowserScope)
	if !ok {
		var names []string
		for _, b := range apikey.BrowserScopes {
			names = append(names, b.Name)
		}
		invalid.Add(FieldBrowserScope, "choose one of "+strings.Join(names, ", "))
		return browserGrant{}, invalid
	}
	g := browserGrant{scope: scope.Name, target: strings.TrimSpace(n.Target)}
	switch scope.Target {
	case "":
		g.target = ""
	case apikey.TargetEventType:
		if _, err := s.db.EventTypes.Get(ctx, s.db.Reader(), n.WorkspaceID, g.target); err != nil {
			invalid.Add(FieldTarget, "name a custom event type of the workspace (custom.…)")
		}
	case apikey.TargetInstance:
		if _, err := s.db.Instances.Get(ctx, n.WorkspaceID, g.target); err != nil {
			invalid.Add(FieldTarget, "name an instance of the workspace (ins_…)")
		}
	case apikey.TargetLink:
		if _, err := s.db.Links.Get(ctx, n.WorkspaceID, g.target); err != nil {
			invalid.Add(FieldTarget, "name a link of the workspace (lnk_…)")
		}
	}
	if scope.Quota {
		switch g.dailyQuota = n.DailyQuota; {
		case g.dailyQuota == 0:
			g.dailyQuota = DefaultDailyQuota
		case g.dailyQuota < 0 || g.dailyQuota > MaxDailyQuota:
			invalid.Add(FieldDailyQuota, fmt.Sprintf("from 1 to %d a day", MaxDailyQuota))
		}
	}
	return g, invalid
}

// keyScopes are the scopes of n's preset, or its custom set.
func keyScopes(n NewKey) ([]apikey.Scope, problem.Fields) {
	if n.Preset == "" {
		return parseScopes(n.Scopes)
	}
	for _, p := range Presets {
		if p.ID == n.Preset {
			return p.Scopes, nil
		}
	}
	var invalid problem.Fields
	invalid.Add(FieldPreset, fmt.Sprintf("unknown preset %q", n.Preset))
	return nil, invalid
}

// Keys lists the keys of a workspace, newest first, revoked ones included; never their secrets, which are not
// stored. Errors: NotFound (no such workspace).
func (s *Service) Keys(ctx context.Context, workspaceID string) ([]Key, error) {
	if _, err := s.db.Workspaces.Get(ctx, workspaceID); errors.Is(err, store.ErrNotFound) {
		return nil, noWorkspace(workspaceID)
	} else if err != nil {
		return nil, err
	}
	keys, err := s.db.APIKeys.List(ctx, workspaceID)
	return listed(keyOf, keys, err)
}

// Key returns one key of a workspace. Errors: NotFound (no such key in that workspace).
func (s *Service) Key(ctx context.Context, workspaceID, id string) (Key, error) {
	k, err := s.db.APIKeys.Get(ctx, workspaceID, id)
	if errors.Is(err, store.ErrNotFound) {
		return Key{}, noKey(id)
	}
	return keyResult(k, err)
}

// RevokeKey revokes a key of any workspace: the operator's revoke. The key is refused from the next request on, by
// every process; revoking a revoked key changes nothing and returns it as it is. Errors: NotFound (no such key).
func (s *Service) RevokeKey(ctx context.Context, id string) (Key, error) {
	k, err := s.db.APIKeys.Revoke(ctx, id)
	return s.changed(id, k, err)
}

// RevokeWorkspaceKey is RevokeKey limited to the keys of one workspace: a member's revoke. Errors: NotFound (no such
// key in that workspace).
func (s *Service) RevokeWorkspaceKey(ctx context.Context, workspaceID, id string) (Key, error) {
	k, err := s.db.APIKeys.RevokeInWorkspace(ctx, workspaceID, id)
	return s.changed(id, k, err)
}

// changed finishes a change of key id (a revocation, new origins): the store announced it to every process, and
// this process's cache forgets the key at once.
func (s *Service) changed(id string, k store.APIKey, err error) (Key, error) {
	if errors.Is(err, store.ErrNotFound) {
		return Key{}, noKey(id)
	}
	if err != nil {
		return Key{}, err
	}
	s.cfg.ForgetKey(k.SecretHash)
	return keyOf(k), nil
}

// SetKeyOrigins replaces the origins of a key of a workspace (workspaceID "" for any workspace: the operator's CLI),
// normalized as CreateKey does. The change takes effect on the key's next request in every process. A browser key
// keeps at least one origin: it is published in pages, and without origins it would answer none (revoke it
// instead). A revoked key is not changed. Errors: ValidationFailed (an invalid origin at FieldOrigins/i, too many at
// FieldOrigins), OriginsRequired (no origin left for a browser key), Conflict (the key is revoked), NotFound (no
// such key in that workspace).
func (s *Service) SetKeyOrigins(ctx context.Context, workspaceID, id string, in []string) (Key, error) {
	origins, invalid := parseOrigins(in)
	if err := invalid.Err(); err != nil {
		return Key{}, err
	}
	k, err := s.keyToChange(ctx, workspaceID, id)
	if err != nil {
		return Key{}, err
	}
	switch {
	case k.RevokedAt != nil:
		return Key{}, problem.Errorf(problem.Conflict, "The API key %s is revoked; a revoked key is not changed.", id)
	case k.Kind == apikey.KindBrowser && len(origins) == 0:
		p := problem.New(problem.OriginsRequired,
			"A browser key works only from the pages of its origins, so it keeps at least one; revoke the key to end it.")
		p.Fields = []problem.Field{{Pointer: FieldOrigins, Detail: "a browser key needs at least one origin"}}
		return Key{}, p
	}
	k, err = s.db.APIKeys.SetOrigins(ctx, k.WorkspaceID, id, origins)
	return s.changed(id, k, err)
}

// parseInstances checks a key's instances: IDs of instances of the workspace, at most MaxKeyInstances, duplicates
// and blanks dropped.
func (s *Service) parseInstances(ctx context.Context, workspaceID string, in []string) ([]string, problem.Fields, error) {
	var out []string
	var invalid problem.Fields
	for i, raw := range in {
		id := strings.TrimSpace(raw)
		if id == "" || slices.Contains(out, id) {
			continue
		}
		_, err := s.db.Instances.Get(ctx, workspaceID, id)
		if errors.Is(err, store.ErrNotFound) {
			invalid.Add(fmt.Sprintf("%s/%d", FieldInstances, i), fmt.Sprintf("%q: no instance of the workspace has this ID", clip(id, 100)))
			continue
		}
		if err != nil {
			return nil, nil, err
		}
		out = append(out, id)
	}
	if len(out) > MaxKeyInstances {
		invalid.Add(FieldInstances, fmt.Sprintf("at most %d instances", MaxKeyInstances))
	}
	return out, invalid, nil
}

// SetKeyInstances replaces the instances a secret key reaches (none: every instance of its workspace), for a key of
// a workspace (workspaceID "" for any workspace: the operator's CLI). The change takes effect on the key's next
// request in every process. Errors: ValidationFailed (an instance not in the key's workspace at FieldInstances/i,
// too many, a browser key), Conflict (the key is revoked), NotFound (no such key in that workspace).
func (s *Service) SetKeyInstances(ctx context.Context, workspaceID, id string, in []string) (Key, error) {
	k, err := s.keyToChange(ctx, workspaceID, id)
	if err != nil {
		return Key{}, err
	}
	instances, invalid, err := s.parseInstances(ctx, k.WorkspaceID, in)
	if err != nil {
		return Key{}, err
	}
	if k.Kind == apikey.KindBrowser {
		invalid.Add(FieldInstances, "a browser key reaches the one instance of its target")
	}
	if err := invalid.Err(); err != nil {
		return Key{}, err
	}
	if k.RevokedAt != nil {
		return Key{}, problem.Errorf(problem.Conflict, "The API key %s is revoked; a revoked key is not changed.", id)
	}
	k, err = s.db.APIKeys.SetInstances(ctx, k.WorkspaceID, id, instances)
	return s.changed(id, k, err)
}

// keyToChange reads a key of a workspace (workspaceID "" for any workspace) that is about to change.
func (s *Service) keyToChange(ctx context.Context, workspaceID, id string) (store.APIKey, error) {
	var k store.APIKey
	var err error
	if workspaceID == "" {
		k, err = s.db.APIKeys.ByID(ctx, id)
	} else {
		k, err = s.db.APIKeys.Get(ctx, workspaceID, id)
	}
	if errors.Is(err, store.ErrNotFound) {
		return k, noKey(id)
	}
	return k, err
}

func noKey(id string) error {
	return problem.Errorf(problem.NotFound, "There is no API key %s.", id)
}
