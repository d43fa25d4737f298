package handlers_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/switchboard/switchboard/gen"
	"github.com/switchboard/switchboard/handlers"
	"github.com/switchboard/switchboard/store"
	"github.com/switchboard/switchboard/store/storetest"
)

// The client generated from the same spec talks to the server: what SDK generators produce works.
func TestGeneratedClientRoundTrip(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		e := newEnv(t, db, handlers.Config{})
		key, _ := e.key(e.workspace("Acme").ID, "models:read")
		c, err := gen.NewClientWithResponses(e.url, gen.WithRequestEditorFn(func(_ context.Context, r *http.Request) error {
			r.Header.Set("Authorization", "Bearer "+key)
			return nil
		}))
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		list, err := c.ListModelsWithResponse(ctx)
		if err != nil || list.JSON200 == nil || len(list.JSON200.Data) == 0 {
			t.Fatalf("list: %v %s", err, list.Body)
		}
		first := list.JSON200.Data[0]
		one, err := c.GetModelWithResponse(ctx, first.Id)
		if err != nil || one.JSON200 == nil || one.JSON200.Id != first.Id || one.JSON200.OwnedBy != first.OwnedBy {
			t.Fatalf("get: %v %s", err, one.Body)
		}
		missing, err := c.GetModelWithResponse(ctx, "gpt-9")
		if err != nil || missing.ApplicationproblemJSON404 == nil || missing.ApplicationproblemJSON404.Code != "model_not_found" {
			t.Fatalf("get missing: %v %s", err, missing.Body)
		}
	})
}
