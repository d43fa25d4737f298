package workspaces

import (
	"time"

	"github.com/switchboard/switchboard/store"
)

// Workspace is a tenant as the capability hands it out to its adapters (the console, the CLI).
type Workspace struct {
	ID   string
	Name string
	// EnabledModels lists the model IDs the workspace may use; nil means every model of the catalogue.
	EnabledModels []string
	CreatedAt     time.Time
	UpdatedAt     time.Time
}

// Kinds of key.
const (
	// KindSecret keys ("sb_sk_…") are kept on servers.
	KindSecret = store.KindSecret
	// KindBrowser keys ("sb_pk_…") may be published in pages: bound to origins, one narrow scope.
	KindBrowser = store.KindBrowser
)

// Key is an API key as the capability hands it out: everything about it an owner may see, and not its secret's
// hash, which only the store and the verifier need. The secret itself is returned once, by CreateKey.
type Key struct {
	ID          string
	WorkspaceID string
	Name        string
	// DisplayPrefix and Last4 are what a list shows of the secret ("sb_sk_ab12…wxyz").
	DisplayPrefix string
	Last4         string
	Scopes        []string
	CreatedBy     string
	CreatedAt     time.Time
	ExpiresAt     *time.Time
	RevokedAt     *time.Time
	LastUsedAt    *time.Time
	// Kind is KindSecret or KindBrowser.
	Kind string
	// Origins are the origins whose pages may use a browser key (exact origins and "https://*.example.com" patterns).
	Origins []string
	// ScopeTarget is what a browser key's scope aims at, where it needs one: the custom event type it publishes,
	// the instance it sends into.
	ScopeTarget string
	// DailyQuota bounds what a browser key may create in a day; 0 for other keys.
	DailyQuota int
	// InstanceIDs are the messaging instances the key reaches; empty means every instance of its workspace.
	InstanceIDs []string
}

// Status is "revoked", "expired" or "active" at time t.
func (k Key) Status(t time.Time) string {
	switch {
	case k.RevokedAt != nil:
		return "revoked"
	case k.ExpiresAt != nil && !t.Before(*k.ExpiresAt):
		return "expired"
	}
	return "active"
}

func workspaceOf(w store.Workspace) Workspace {
	return Workspace{ID: w.ID, Name: w.Name, EnabledModels: w.EnabledModels, CreatedAt: w.CreatedAt, UpdatedAt: w.UpdatedAt}
}

func keyOf(k store.APIKey) Key {
	return Key{ID: k.ID, WorkspaceID: k.WorkspaceID, Name: k.Name, DisplayPrefix: k.DisplayPrefix, Last4: k.Last4,
		Scopes: k.Scopes, CreatedBy: k.CreatedBy, CreatedAt: k.CreatedAt, ExpiresAt: k.ExpiresAt, RevokedAt: k.RevokedAt,
		LastUsedAt: k.LastUsedAt, Kind: k.Kind, Origins: k.Origins, ScopeTarget: k.ScopeTarget, DailyQuota: k.DailyQuota,
		InstanceIDs: k.InstanceIDs}
}

// workspaceResult converts what a store call returned, passing its error through.
func workspaceResult(w store.Workspace, err error) (Workspace, error) {
	if err != nil {
		return Workspace{}, err
	}
	return workspaceOf(w), nil
}

// keyResult converts what a store call returned, passing its error through.
func keyResult(k store.APIKey, err error) (Key, error) {
	if err != nil {
		return Key{}, err
	}
	return keyOf(k), nil
}

// listed converts a list a store call returned, passing its error through.
func listed[S, D any](of func(S) D, vs []S, err error) ([]D, error) {
	if err != nil {
		return nil, err
	}
	out := make([]D, len(vs))
	for i, v := range vs {
		out[i] = of(v)
	}
	return out, nil
}
