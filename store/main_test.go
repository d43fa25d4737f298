package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/switchboard/switchboard/internal/apikey"
	"github.com/switchboard/switchboard/store"
	"github.com/switchboard/switchboard/store/storetest"
)

func TestMain(m *testing.M) {
	// pgx returns timestamptz in time.Local; on a machine set to UTC a missing conversion to UTC would go unnoticed.
	// A local zone with a half-hour offset makes every "read back in UTC" assertion bite.
	time.Local = time.FixedZone("UTC+5:30", 5*3600+1800)
	storetest.Main(m)
}

var ctx = context.Background()

func newWorkspace(t *testing.T, db *store.DB, name string) store.Workspace {
	t.Helper()
	w, err := db.Workspaces.Create(ctx, name)
	if err != nil {
		t.Fatalf("create workspace: %v", err)
	}
	return w
}

// newKey stores a key for a fresh secret in a workspace; edit may adjust what is stored.
func newKey(t *testing.T, db *store.DB, workspaceID string, edit func(*store.NewAPIKey)) (apikey.Secret, store.APIKey) {
	t.Helper()
	secret, err := apikey.Generate()
	if err != nil {
		t.Fatal(err)
	}
	n := store.NewAPIKey{
		WorkspaceID: workspaceID, Name: "deploy", SecretHash: secret.Hash, DisplayPrefix: secret.DisplayPrefix,
		Last4: secret.Last4, Scopes: []string{"links:read", "links:write"}, CreatedBy: "cli",
	}
	if edit != nil {
		edit(&n)
	}
	k, err := db.APIKeys.Create(ctx, n)
	if err != nil {
		t.Fatalf("create key: %v", err)
	}
	return secret, k
}

// wantTime checks a timestamp read from the database: in UTC, at most microsecond precision, equal to want.
func wantTime(t *testing.T, what string, got, want time.Time) {
	t.Helper()
	if got.Location() != time.UTC {
		t.Errorf("%s = %v is in %v, want UTC", what, got, got.Location())
	}
	if got.Nanosecond()%1000 != 0 {
		t.Errorf("%s = %v has sub-microsecond digits", what, got)
	}
	if !got.Equal(want) {
		t.Errorf("%s = %v, want %v", what, got, want)
	}
}

// wantTimePtr is wantTime for nullable columns; want nil means NULL.
func wantTimePtr(t *testing.T, what string, got, want *time.Time) {
	t.Helper()
	switch {
	case got == nil && want == nil:
	case got == nil || want == nil:
		t.Errorf("%s = %v, want %v", what, got, want)
	default:
		wantTime(t, what, *got, *want)
	}
}

// recent checks a timestamp the store set itself: UTC, microseconds, between before and now.
func recent(t *testing.T, what string, got, before time.Time) {
	t.Helper()
	wantTime(t, what, got, got.UTC().Truncate(time.Microsecond))
	if got.Before(before.Truncate(time.Microsecond)) || got.After(time.Now()) {
		t.Errorf("%s = %v, want between %v and now", what, got, before)
	}
}
