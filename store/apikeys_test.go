package store_test

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/switchboard/switchboard/internal/await"
	"github.com/switchboard/switchboard/store"
	"github.com/switchboard/switchboard/store/storetest"
)

// sameKey compares two reads of a key field by field; timestamps must be equal, in UTC, to the microsecond.
func sameKey(t *testing.T, what string, got, want store.APIKey) {
	t.Helper()
	if got.ID != want.ID || got.WorkspaceID != want.WorkspaceID || got.Name != want.Name ||
		got.SecretHash != want.SecretHash || got.DisplayPrefix != want.DisplayPrefix || got.Last4 != want.Last4 ||
		!slices.Equal(got.Scopes, want.Scopes) || got.CreatedBy != want.CreatedBy || got.Kind != want.Kind ||
		!slices.Equal(got.Origins, want.Origins) || got.ScopeTarget != want.ScopeTarget || got.DailyQuota != want.DailyQuota {
		t.Errorf("%s = %+v, want %+v", what, got, want)
	}
	wantTime(t, what+": created_at", got.CreatedAt, want.CreatedAt)
	wantTimePtr(t, what+": expires_at", got.ExpiresAt, want.ExpiresAt)
	wantTimePtr(t, what+": revoked_at", got.RevokedAt, want.RevokedAt)
	wantTimePtr(t, what+": last_used_at", got.LastUsedAt, want.LastUsedAt)
}

func TestAPIKeyCreate(t *testing.T) {
	// An expiry given in another zone with nanoseconds is stored in UTC, to the microsecond.
	expires := time.Date(2027, 1, 2, 3, 4, 5, 123456789, time.FixedZone("UTC-7", -7*3600))
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		w := newWorkspace(t, db, "keys")
		before := time.Now()
		secret, k := newKey(t, db, w.ID, func(n *store.NewAPIKey) {
			n.ExpiresAt = &expires
			n.Origins = []string{"https://www.acme.example", "https://*.acme.dev"}
		})

		if !strings.HasPrefix(k.ID, "key_") || k.WorkspaceID != w.ID || k.Name != "deploy" ||
			k.SecretHash != secret.Hash || k.DisplayPrefix != secret.DisplayPrefix || k.Last4 != secret.Last4 ||
			!slices.Equal(k.Scopes, []string{"links:read", "links:write"}) || k.CreatedBy != "cli" ||
			k.RevokedAt != nil || k.LastUsedAt != nil || k.Kind != store.KindSecret || len(k.Origins) != 2 {
			t.Errorf("Create = %+v", k)
		}
		recent(t, "created_at", k.CreatedAt, before)
		wantTimePtr(t, "expires_at", k.ExpiresAt, new(expires.UTC().Truncate(time.Microsecond)))
		if k.RevokedAt != nil {
			t.Errorf("a new key is revoked at %v", k.RevokedAt)
		}

		got, err := db.APIKeys.Get(ctx, w.ID, k.ID)
		if err != nil {
			t.Fatalf("Get: %v", err)
		}
		sameKey(t, "Get", got, k)
		if got.Workspace != nil {
			t.Errorf("Get loaded the workspace; only ByHash does")
		}
	})
}

func TestAPIKeyCreateWithoutExpiry(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		w := newWorkspace(t, db, "keys")
		_, k := newKey(t, db, w.ID, nil)
		got, err := db.APIKeys.Get(ctx, w.ID, k.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.ExpiresAt != nil || got.RevokedAt != nil || got.LastUsedAt != nil {
			t.Errorf("Get = %+v, want no expiry, revocation or last use", got)
		}
	})
}

func TestAPIKeyCreateErrors(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		w := newWorkspace(t, db, "keys")
		secret, _ := newKey(t, db, w.ID, nil)

		n := store.NewAPIKey{WorkspaceID: store.NewID("ws"), Name: "x", SecretHash: "h-" + w.ID, DisplayPrefix: "sb_sk_abcd",
			Last4: "wxyz", Scopes: []string{"links:read"}, CreatedBy: "cli"}
		if _, err := db.APIKeys.Create(ctx, n); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("Create in a missing workspace = %v, want ErrNotFound", err)
		}

		n.WorkspaceID, n.SecretHash = newWorkspace(t, db, "other").ID, secret.Hash
		if _, err := db.APIKeys.Create(ctx, n); !errors.Is(err, store.ErrConflict) {
			t.Errorf("Create with a hash already taken = %v, want ErrConflict", err)
		}
	})
}

func TestAPIKeyGetIsScopedToItsWorkspace(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		mine := newWorkspace(t, db, "mine")
		theirs := newWorkspace(t, db, "theirs")
		_, k := newKey(t, db, mine.ID, nil)

		tests := []struct {
			name, workspace, id string
		}{
			{"another workspace's key", theirs.ID, k.ID},
			{"a missing workspace", store.NewID("ws"), k.ID},
			{"no workspace", "", k.ID},
			{"a missing key", mine.ID, store.NewID("key")},
		}
		for _, tt := range tests {
			if got, err := db.APIKeys.Get(ctx, tt.workspace, tt.id); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("Get of %s = %+v, %v; want ErrNotFound", tt.name, got, err)
			}
		}
		if _, err := db.APIKeys.Get(ctx, mine.ID, k.ID); err != nil {
			t.Errorf("Get in its own workspace: %v", err)
		}
	})
}

func TestAPIKeyByHash(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		w := newWorkspace(t, db, "by hash")
		w, err := db.Workspaces.SetEnabledModels(ctx, w.ID, []string{"gpt-4o"})
		if err != nil {
			t.Fatal(err)
		}
		secret, k := newKey(t, db, w.ID, nil)
		newKey(t, db, w.ID, nil) // a neighbour that must not be returned

		got, err := db.APIKeys.ByHash(ctx, secret.Hash)
		if err != nil {
			t.Fatalf("ByHash: %v", err)
		}
		sameKey(t, "ByHash", got, k)
		if got.Workspace == nil {
			t.Fatal("ByHash did not load the workspace")
		}
		ws := *got.Workspace
		if ws.ID != w.ID || ws.Name != "by hash" || !slices.Equal(ws.EnabledModels, []string{"gpt-4o"}) {
			t.Errorf("ByHash workspace = %+v, want %+v", ws, w)
		}
		wantTime(t, "workspace created_at", ws.CreatedAt, w.CreatedAt)
		wantTime(t, "workspace updated_at", ws.UpdatedAt, w.UpdatedAt)

		if _, err := db.APIKeys.ByHash(ctx, strings.Repeat("0", 64)); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("ByHash(unknown) = %v, want ErrNotFound", err)
		}
	})
}

func TestAPIKeyByHashCarriesEnabledModels(t *testing.T) {
	tests := []struct {
		name   string
		models []string
	}{
		{"every model", nil},
		{"none", []string{}},
		{"some", []string{"a", "b"}},
	}
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		for _, tt := range tests {
			w := newWorkspace(t, db, tt.name)
			if _, err := db.Workspaces.SetEnabledModels(ctx, w.ID, tt.models); err != nil {
				t.Fatal(err)
			}
			secret, _ := newKey(t, db, w.ID, nil)
			got, err := db.APIKeys.ByHash(ctx, secret.Hash)
			if err != nil {
				t.Fatal(err)
			}
			if m := got.Workspace.EnabledModels; (m == nil) != (tt.models == nil) || !slices.Equal(m, tt.models) {
				t.Errorf("%s: ByHash workspace EnabledModels = %#v, want %#v", tt.name, m, tt.models)
			}
		}
	})
}

func TestAPIKeyByHashIncludesRevokedAndExpired(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		w := newWorkspace(t, db, "refused keys")
		past := time.Now().Add(-time.Hour)
		expired, _ := newKey(t, db, w.ID, func(n *store.NewAPIKey) { n.ExpiresAt = &past })
		revoked, k := newKey(t, db, w.ID, nil)
		if _, err := db.APIKeys.Revoke(ctx, k.ID); err != nil {
			t.Fatal(err)
		}
		// The verifier refuses them by these fields, so ByHash must return them.
		if got, err := db.APIKeys.ByHash(ctx, expired.Hash); err != nil || got.ExpiresAt == nil || got.ExpiresAt.After(time.Now()) {
			t.Errorf("ByHash of an expired key = %+v, %v", got, err)
		}
		if got, err := db.APIKeys.ByHash(ctx, revoked.Hash); err != nil || got.RevokedAt == nil {
			t.Errorf("ByHash of a revoked key = %+v, %v", got, err)
		}
	})
}

func TestAPIKeyListNewestFirst(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		w := newWorkspace(t, db, "list")
		other := newWorkspace(t, db, "other")
		newKey(t, db, other.ID, nil)
		var want []string
		for range 4 {
			_, k := newKey(t, db, w.ID, nil)
			want = append(want, k.ID)
		}
		if _, err := db.APIKeys.Revoke(ctx, want[1]); err != nil {
			t.Fatal(err)
		}
		slices.Reverse(want)

		got, err := db.APIKeys.List(ctx, w.ID)
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, k := range got {
			ids = append(ids, k.ID)
			if k.Workspace != nil {
				t.Errorf("List loaded the workspace of %s", k.ID)
			}
			if k.CreatedAt.Location() != time.UTC {
				t.Errorf("List: created_at %v not in UTC", k.CreatedAt)
			}
		}
		if !slices.Equal(ids, want) {
			t.Errorf("List = %q, want this workspace's keys newest first, revoked included: %q", ids, want)
		}

		empty, err := db.APIKeys.List(ctx, newWorkspace(t, db, "empty").ID)
		if err != nil || empty == nil || len(empty) != 0 {
			t.Errorf("List of a workspace without keys = %#v, %v; want an empty, non-nil list", empty, err)
		}
	})
}

func TestAPIKeyRevoke(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		w := newWorkspace(t, db, "revoke")
		_, k := newKey(t, db, w.ID, nil)
		_, bystander := newKey(t, db, w.ID, nil)

		before := time.Now()
		first, err := db.APIKeys.Revoke(ctx, k.ID)
		if err != nil {
			t.Fatalf("Revoke: %v", err)
		}
		if first.RevokedAt == nil {
			t.Fatal("Revoke returned a key without revoked_at")
		}
		recent(t, "revoked_at", *first.RevokedAt, before)
		want := k
		want.RevokedAt = first.RevokedAt
		sameKey(t, "Revoke", first, want)

		// Once the store's clock (microseconds) has passed the first revocation, a second one that overwrote it would
		// record a visibly later time.
		await.Until(t, "the clock to pass the first revocation", func() time.Time { return time.Now().UTC().Truncate(time.Microsecond) },
			func(now time.Time) bool { return now.After(*first.RevokedAt) })
		second, err := db.APIKeys.Revoke(ctx, k.ID)
		if err != nil {
			t.Fatalf("second Revoke: %v", err)
		}
		sameKey(t, "second Revoke", second, want)

		got, err := db.APIKeys.Get(ctx, w.ID, k.ID)
		if err != nil {
			t.Fatal(err)
		}
		sameKey(t, "Get after Revoke", got, want)

		if b, err := db.APIKeys.Get(ctx, w.ID, bystander.ID); err != nil || b.RevokedAt != nil {
			t.Errorf("another key of the workspace: %+v, %v; want it untouched", b, err)
		}
	})
}

func TestAPIKeyRevokeMissing(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		if _, err := db.APIKeys.Revoke(ctx, store.NewID("key")); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("Revoke(missing) = %v, want ErrNotFound", err)
		}
	})
}

func TestTouchLastUsed(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		w := newWorkspace(t, db, "last used")
		_, a := newKey(t, db, w.ID, nil)
		_, b := newKey(t, db, w.ID, nil)
		_, untouched := newKey(t, db, w.ID, nil)

		// Times from the Verifier's clock: local zone, nanoseconds.
		at := time.Date(2026, 11, 22, 10, 30, 15, 987654321, time.Local)
		used := map[string]time.Time{
			a.ID:               at,
			b.ID:               at.Add(time.Minute),
			store.NewID("key"): at, // deleted meanwhile: ignored
		}
		if err := db.APIKeys.TouchLastUsed(ctx, used); err != nil {
			t.Fatalf("TouchLastUsed: %v", err)
		}
		for _, k := range []store.APIKey{a, b, untouched} {
			got, err := db.APIKeys.Get(ctx, w.ID, k.ID)
			if err != nil {
				t.Fatal(err)
			}
			var want *time.Time
			if u, ok := used[k.ID]; ok {
				want = new(u.UTC().Truncate(time.Microsecond))
			}
			wantTimePtr(t, k.ID+" last_used_at", got.LastUsedAt, want)
		}

		// A later use moves it on.
		if err := db.APIKeys.TouchLastUsed(ctx, map[string]time.Time{a.ID: at.Add(time.Hour)}); err != nil {
			t.Fatal(err)
		}
		got, err := db.APIKeys.Get(ctx, w.ID, a.ID)
		if err != nil {
			t.Fatal(err)
		}
		wantTimePtr(t, "last_used_at after a later use", got.LastUsedAt, new(at.Add(time.Hour).UTC().Truncate(time.Microsecond)))

		for _, empty := range []map[string]time.Time{nil, {}} {
			if err := db.APIKeys.TouchLastUsed(ctx, empty); err != nil {
				t.Errorf("TouchLastUsed(%v) = %v, want nil", empty, err)
			}
		}
	})
}

// Every timestamp column survives a round trip exactly: UTC, microseconds, equal to what was written. Values
// cover a whole second, a single microsecond, nanoseconds to drop, and zones far from UTC on both sides.
func TestAPIKeyTimestampsRoundTrip(t *testing.T) {
	times := []time.Time{
		time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC),
		time.Date(2026, 11, 22, 10, 0, 0, 1000, time.UTC),
		time.Date(2026, 11, 22, 10, 0, 0, 999999999, time.UTC),
		time.Date(2099, 12, 31, 23, 59, 59, 999999000, time.FixedZone("UTC+14", 14*3600)),
		time.Date(2001, 3, 4, 5, 6, 7, 890123000, time.FixedZone("UTC-9:30", -(9*3600+1800))),
	}
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		w := newWorkspace(t, db, "times")
		for _, tm := range times {
			_, k := newKey(t, db, w.ID, func(n *store.NewAPIKey) { n.ExpiresAt = &tm })
			if err := db.APIKeys.TouchLastUsed(ctx, map[string]time.Time{k.ID: tm}); err != nil {
				t.Fatal(err)
			}
			got, err := db.APIKeys.Get(ctx, w.ID, k.ID)
			if err != nil {
				t.Fatal(err)
			}
			want := new(tm.UTC().Truncate(time.Microsecond))
			wantTimePtr(t, "expires_at", got.ExpiresAt, want)
			wantTimePtr(t, "last_used_at", got.LastUsedAt, want)
		}
	})
}
