package store_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/switchboard/switchboard/store"
	"github.com/switchboard/switchboard/store/storetest"
)

func endpointIDs(es []store.WebhookEndpoint) []string {
	ids := make([]string, len(es))
	for i, e := range es {
		ids[i] = e.ID
	}
	return ids
}

func sameIDs(t *testing.T, what string, got, want []string) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s = %v, want %v", what, got, want)
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("%s = %v, want %v", what, got, want)
		}
	}
}

// Lists are keyset pages on the ID: newest first after Before, oldest first after After, scoped to the workspace.
func TestWebhookEndpointsListPages(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		w := newWorkspace(t, db, "pages")
		var ids []string
		for range 5 {
			ids = append(ids, newEndpoint(t, db, w.ID, "*").ID)
		}
		newEndpoint(t, db, newWorkspace(t, db, "other").ID, "*")

		first, more, err := db.Webhooks.List(ctx, w.ID, store.Page{Limit: 2})
		if err != nil || !more {
			t.Fatalf("first page: more=%v, %v", more, err)
		}
		sameIDs(t, "first page", endpointIDs(first), []string{ids[4], ids[3]})
		second, more, _ := db.Webhooks.List(ctx, w.ID, store.Page{Limit: 2, Before: ids[3]})
		sameIDs(t, "second page", endpointIDs(second), []string{ids[2], ids[1]})
		last, more2, _ := db.Webhooks.List(ctx, w.ID, store.Page{Limit: 2, Before: ids[1]})
		sameIDs(t, "last page", endpointIDs(last), []string{ids[0]})
		if !more || more2 {
			t.Errorf("has more: second %v, last %v", more, more2)
		}
		asc, more, _ := db.Webhooks.List(ctx, w.ID, store.Page{Limit: 3, After: ids[0]})
		sameIDs(t, "oldest first", endpointIDs(asc), ids[1:4])
		if !more {
			t.Error("oldest first: more should follow")
		}
		empty, more, err := db.Webhooks.List(ctx, newWorkspace(t, db, "empty").ID, store.Page{Limit: 20})
		if err != nil || empty == nil || len(empty) != 0 || more {
			t.Errorf("empty workspace: %v %v %v", empty, more, err)
		}
	})
}

func TestWebhookEndpointUpdate(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		w := newWorkspace(t, db, "update")
		e, err := db.Webhooks.Create(ctx, store.NewWebhookEndpoint{
			WorkspaceID: w.ID, URL: "https://a.example/hook", Description: "first", Events: []string{"*"}, RateLimit: ptr(5),
			SealSecret: func(id string) string { return "secret-" + id }, SealHeaders: func(string) *string { return ptr("sealed") },
		})
		if err != nil {
			t.Fatal(err)
		}
		before := time.Now()
		got, err := db.Webhooks.Update(ctx, w.ID, e.ID, store.WebhookEndpointChange{Description: ptr("second")})
		if err != nil || got.Description != "second" || got.URL != e.URL || *got.RateLimit != 5 || *got.SealedHeaders != "sealed" {
			t.Fatalf("description only: %+v, %v", got, err)
		}
		recent(t, "updated_at", got.UpdatedAt, before)
		got, err = db.Webhooks.Update(ctx, w.ID, e.ID, store.WebhookEndpointChange{
			URL: ptr("https://b.example/hook"), Events: []string{"link.*", "webhook.ping"},
			SetHeaders: true, SetRateLimit: true,
		})
		if err != nil {
			t.Fatal(err)
		}
		stored, _ := db.Webhooks.Get(ctx, w.ID, e.ID)
		for _, x := range []store.WebhookEndpoint{got, stored} {
			if x.URL != "https://b.example/hook" || len(x.Events) != 2 || x.Events[1] != "webhook.ping" ||
				x.SealedHeaders != nil || x.RateLimit != nil || x.Description != "second" || x.Secret != "secret-"+e.ID {
				t.Errorf("after clearing headers and rate limit: %+v", x)
			}
		}
		if _, err := db.Webhooks.Update(ctx, newWorkspace(t, db, "other").ID, e.ID, store.WebhookEndpointChange{Description: ptr("x")}); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("update from another workspace: %v", err)
		}
	})
}

func TestWebhookEndpointStatusChanges(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		w := newWorkspace(t, db, "status")
		e := newEndpoint(t, db, w.ID, "*")

		steps := []struct {
			name string
			do   func(ctx context.Context, ws, id string) (store.WebhookEndpoint, error)
			want string
		}{
			{"pause", db.Webhooks.Pause, store.EndpointPaused},
			{"pause again", db.Webhooks.Pause, store.EndpointPaused},
			{"resume", db.Webhooks.Resume, store.EndpointActive},
			{"resume again", db.Webhooks.Resume, store.EndpointActive},
		}
		for _, s := range steps {
			got, err := s.do(ctx, w.ID, e.ID)
			if err != nil || got.Status != s.want {
				t.Fatalf("%s: %+v, %v", s.name, got, err)
			}
		}

		failing := time.Now().Add(-time.Hour)
		if _, err := db.Bun().NewUpdate().Table("webhook_endpoints").Set("status = ?", store.EndpointDisabled).
			Set("disabled_reason = 'gone'").Set("failing_since = ?", failing).Where("id = ?", e.ID).Exec(ctx); err != nil {
			t.Fatal(err)
		}
		for name, do := range map[string]func(ctx context.Context, ws, id string) (store.WebhookEndpoint, error){"pause": db.Webhooks.Pause, "resume": db.Webhooks.Resume} {
			_, err := do(ctx, w.ID, e.ID)
			var de *store.EndpointDisabledError
			if !errors.As(err, &de) || !errors.Is(err, store.ErrConflict) || de.Reason != "gone" || de.EndpointID != e.ID {
				t.Errorf("%s a disabled endpoint: %v", name, err)
			}
			if _, err := do(ctx, newWorkspace(t, db, "other").ID, e.ID); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("%s from another workspace: %v", name, err)
			}
		}
		got, queued, err := db.Webhooks.Enable(ctx, w.ID, e.ID, nil)
		if err != nil || queued != 0 || got.Status != store.EndpointActive || got.DisabledReason != nil || got.FailingSince != nil {
			t.Fatalf("enable: %+v, %d, %v", got, queued, err)
		}
		if _, _, err := db.Webhooks.Enable(ctx, newWorkspace(t, db, "other").ID, e.ID, nil); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("enable from another workspace: %v", err)
		}
	})
}

func TestRotateSecret(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		w := newWorkspace(t, db, "rotate")
		e := newEndpoint(t, db, w.ID, "*")
		before := time.Now()
		got, err := db.Webhooks.RotateSecret(ctx, w.ID, e.ID, "second", time.Hour)
		if err != nil || got.Secret != "second" || got.PreviousSecret == nil || *got.PreviousSecret != e.Secret {
			t.Fatalf("rotate with grace: %+v, %v", got, err)
		}
		recent(t, "previous_secret_until - 1h", got.PreviousSecretUntil.Add(-time.Hour), before)
		stored, _ := db.Webhooks.Get(ctx, w.ID, e.ID)
		wantTimePtr(t, "stored previous_secret_until", stored.PreviousSecretUntil, got.PreviousSecretUntil)

		got, err = db.Webhooks.RotateSecret(ctx, w.ID, e.ID, "third", time.Hour)
		if err != nil || got.Secret != "third" || *got.PreviousSecret != "second" {
			t.Fatalf("rotating again ends the oldest secret: %+v, %v", got, err)
		}
		got, err = db.Webhooks.RotateSecret(ctx, w.ID, e.ID, "fourth", 0)
		stored, _ = db.Webhooks.Get(ctx, w.ID, e.ID)
		for _, x := range []store.WebhookEndpoint{got, stored} {
			if err != nil || x.Secret != "fourth" || x.PreviousSecret != nil || x.PreviousSecretUntil != nil {
				t.Errorf("rotate without grace: %+v, %v", x, err)
			}
		}
		if _, err := db.Webhooks.RotateSecret(ctx, newWorkspace(t, db, "other").ID, e.ID, "x", 0); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("rotate from another workspace: %v", err)
		}
	})
}
