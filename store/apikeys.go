package store

import (
	"context"
	"errors"
	"time"

	"github.com/uptrace/bun"
)

// APIKey is a stored API key. The secret is never stored: only its SHA-256 and the characters shown for recognition.
type APIKey struct {
	bun.BaseModel `bun:"table:api_keys,alias:k"`

	ID            string     `bun:"id,pk"`
	WorkspaceID   string     `bun:"workspace_id"`
	Name          string     `bun:"name"`
	SecretHash    string     `bun:"secret_hash"`
	DisplayPrefix string     `bun:"display_prefix"`
	Last4         string     `bun:"last4"`
	Scopes        []string   `bun:"scopes,type:json"`
	CreatedBy     string     `bun:"created_by"`
	CreatedAt     time.Time  `bun:"created_at"`
	ExpiresAt     *time.Time `bun:"expires_at"`
	RevokedAt     *time.Time `bun:"revoked_at"`
	LastUsedAt    *time.Time `bun:"last_used_at"`
	// Kind is KindSecret or KindBrowser.
	Kind string `bun:"kind"`
	// Origins are the origins whose pages may use the key (exact origins and "https://*.example.com" patterns);
	// empty means the operator's list decides.
	Origins []string `bun:"origins,type:json"`
	// ScopeTarget is what a browser key's scope aims at, where it needs a target: the custom event type it
	// publishes, the instance it sends into.
	ScopeTarget string `bun:"scope_target"`
	// DailyQuota bounds what a browser key may create in a day (short links); 0 for other keys.
	DailyQuota int `bun:"daily_quota"`
	// InstanceIDs are the messaging instances a secret key reaches; empty means every instance of its workspace.
	InstanceIDs []string `bun:"instance_ids,type:json"`

	// Workspace is loaded by ByHash only, so that one query tells the request path everything it needs.
	Workspace *Workspace `bun:"rel:belongs-to,join:workspace_id=id"`
}

// Kinds of key.
const (
	// KindSecret keys ("sb_sk_…") are kept on servers.
	KindSecret = "secret"
	// KindBrowser keys ("sb_pk_…") may be published in pages: bound to origins, one narrow scope.
	KindBrowser = "browser"
)

// NewAPIKey is what Create needs: the hash and display parts come from package apikey, never the secret itself.
type NewAPIKey struct {
	WorkspaceID   string
	Name          string
	SecretHash    string
	DisplayPrefix string
	Last4         string
	Scopes        []string
	CreatedBy     string
	ExpiresAt     *time.Time
	// Kind is KindSecret when empty.
	Kind        string
	Origins     []string
	ScopeTarget string
	DailyQuota  int
	InstanceIDs []string
}

// APIKeys is the repository of API keys.
type APIKeys struct{ workspaceScoped[APIKey] }

// Create stores a new key. Returns ErrNotFound if the workspace does not exist and ErrConflict if the secret hash
// is already taken (a 190-bit collision: in practice never).
func (s *APIKeys) Create(ctx context.Context, n NewAPIKey) (APIKey, error) {
	k := APIKey{
		ID: NewID("key"), WorkspaceID: n.WorkspaceID, Name: n.Name, SecretHash: n.SecretHash,
		DisplayPrefix: n.DisplayPrefix, Last4: n.Last4, Scopes: n.Scopes, CreatedBy: n.CreatedBy,
		CreatedAt: now(), Kind: n.Kind, Origins: n.Origins, ScopeTarget: n.ScopeTarget, DailyQuota: n.DailyQuota,
		InstanceIDs: n.InstanceIDs,
	}
	if k.Kind == "" {
		k.Kind = KindSecret
	}
	if k.Origins == nil {
		k.Origins = []string{}
	}
	if k.InstanceIDs == nil {
		k.InstanceIDs = []string{}
	}
	if n.ExpiresAt != nil {
		t := n.ExpiresAt.UTC().Truncate(time.Microsecond)
		k.ExpiresAt = &t
	}
	if len(n.Scopes) == 0 {
		return APIKey{}, errors.New("store: an API key needs at least one scope")
	}
	if err := s.create(ctx, s.db.w, &k); err != nil {
		return APIKey{}, err
	}
	return k, nil
}

// Get returns one key of a workspace. Returns ErrNotFound if it does not exist in that workspace.
func (s *APIKeys) Get(ctx context.Context, workspaceID, id string) (APIKey, error) {
	return s.get(ctx, workspaceID, id)
}

// ByID returns a key of any workspace: the operator's look-up. Returns ErrNotFound if it does not exist.
func (s *APIKeys) ByID(ctx context.Context, id string) (APIKey, error) {
	var k APIKey
	err := s.db.r.NewSelect().Model(&k).Where("k.id = ?", id).Scan(ctx)
	return k, mapErr(err)
}

// ByHash returns the key whose secret hashes to hash, with its Workspace, revoked and expired ones included (the
// caller tells them apart). Returns ErrNotFound if no key has that hash.
func (s *APIKeys) ByHash(ctx context.Context, hash string) (APIKey, error) {
	var k APIKey
	err := s.db.r.NewSelect().Model(&k).Relation("Workspace").Where("k.secret_hash = ?", hash).Scan(ctx)
	return k, mapErr(err)
}

// List returns the keys of a workspace, newest first, revoked ones included.
func (s *APIKeys) List(ctx context.Context, workspaceID string) ([]APIKey, error) {
	ks := []APIKey{}
	err := s.db.r.NewSelect().Model(&ks).Where("k.workspace_id = ?", workspaceID).Order("k.id DESC").Scan(ctx)
	return ks, mapErr(err)
}

// Revoke marks a key revoked now and announces the change to every process watching keys. It is the operator's
// revoke (the CLI): any workspace. Revoking a revoked key changes nothing and returns it as it is. Returns
// ErrNotFound if the key does not exist.
func (s *APIKeys) Revoke(ctx context.Context, id string) (APIKey, error) {
	return s.revoke(ctx, "", id)
}

// RevokeInWorkspace is Revoke limited to one workspace. Returns ErrNotFound if the key is not in that workspace.
func (s *APIKeys) RevokeInWorkspace(ctx context.Context, workspaceID, id string) (APIKey, error) {
	return s.revoke(ctx, workspaceID, id)
}

func (s *APIKeys) revoke(ctx context.Context, workspaceID, id string) (APIKey, error) {
	var k APIKey
	err := s.db.RunInTx(ctx, func(ctx context.Context, tx bun.Tx) error {
		if err := selectKey(ctx, tx, workspaceID, id, &k); err != nil {
			return err
		}
		if k.RevokedAt != nil {
			return nil
		}
		t := now()
		if _, err := tx.NewUpdate().Table("api_keys").Set("revoked_at = ?", t).Where("id = ?", id).Exec(ctx); err != nil {
			return err
		}
		k.RevokedAt = &t
		return s.db.announceAccessChange(ctx, tx)
	})
	if err == nil {
		s.db.keys.changed()
	}
	return k, mapErr(err)
}

// SetOrigins replaces the origins of a key (workspaceID "" for any workspace: the operator's CLI) and announces the
// change to every process watching keys, so that cached keys are read again on their next request. Returns
// ErrNotFound if the key does not exist (in that workspace).
func (s *APIKeys) SetOrigins(ctx context.Context, workspaceID, id string, origins []string) (APIKey, error) {
	return s.setList(ctx, workspaceID, id, "origins", func(k *APIKey) { k.Origins = orEmpty(origins) })
}

// SetInstances replaces the instances a key reaches (empty: every instance), as SetOrigins does its origins.
func (s *APIKeys) SetInstances(ctx context.Context, workspaceID, id string, instanceIDs []string) (APIKey, error) {
	return s.setList(ctx, workspaceID, id, "instance_ids", func(k *APIKey) { k.InstanceIDs = orEmpty(instanceIDs) })
}

// setList changes one column of a key with set and announces the change to every process watching keys.
func (s *APIKeys) setList(ctx context.Context, workspaceID, id, column string, set func(*APIKey)) (APIKey, error) {
	var k APIKey
	err := s.db.RunInTx(ctx, func(ctx context.Context, tx bun.Tx) error {
		if err := selectKey(ctx, tx, workspaceID, id, &k); err != nil {
			return err
		}
		set(&k)
		if _, err := tx.NewUpdate().Model(&k).Column(column).WherePK().Exec(ctx); err != nil {
			return err
		}
		return s.db.announceAccessChange(ctx, tx)
	})
	if err == nil {
		s.db.keys.changed()
	}
	return k, mapErr(err)
}

func orEmpty(list []string) []string {
	if list == nil {
		return []string{}
	}
	return list
}

// selectKey reads key id into k, of any workspace when workspaceID is "".
func selectKey(ctx context.Context, tx bun.Tx, workspaceID, id string, k *APIKey) error {
	q := tx.NewSelect().Model(k).Where("k.id = ?", id)
	if workspaceID != "" {
		q = q.Where("k.workspace_id = ?", workspaceID)
	}
	return q.Scan(ctx)
}

// TouchLastUsed records when keys were last used. Keys that no longer exist are ignored.
func (s *APIKeys) TouchLastUsed(ctx context.Context, used map[string]time.Time) error {
	if len(used) == 0 {
		return nil
	}
	return s.db.RunInTx(ctx, func(ctx context.Context, tx bun.Tx) error {
		for id, t := range used {
			if _, err := tx.NewUpdate().Table("api_keys").Set("last_used_at = ?", t.UTC().Truncate(time.Microsecond)).
				Where("id = ?", id).Exec(ctx); err != nil {
				return err
			}
		}
		return nil
	})
}
