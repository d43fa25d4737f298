package handlers_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/switchboard/switchboard/gen"
	"github.com/switchboard/switchboard/handlers"
	"github.com/switchboard/switchboard/store"
	"github.com/switchboard/switchboard/store/storetest"
)

// The generated client creates, changes, reads the statistics of and deletes a link.
func TestLinksThroughGeneratedClient(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		e := newLinkEnv(t, db, handlers.Config{})
		c, err := gen.NewClientWithResponses(e.url, gen.WithRequestEditorFn(func(_ context.Context, r *http.Request) error {
			r.Header.Set("Authorization", "Bearer "+e.key)
			return nil
		}))
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		slug := "sdk-link"
		created, err := c.CreateLinkWithResponse(ctx, nil, gen.CreateLinkJSONRequestBody{DestinationUrl: "https://example.com/sdk", Slug: &slug})
		if err != nil || created.JSON201 == nil || created.JSON201.Slug != slug {
			t.Fatalf("create: %v %s", err, created.Body)
		}
		again, err := c.CreateLinkWithResponse(ctx, nil, gen.CreateLinkJSONRequestBody{DestinationUrl: "https://example.com/sdk", Slug: &slug})
		if err != nil || again.ApplicationproblemJSON409 == nil || again.ApplicationproblemJSON409.Code != "slug_taken" {
			t.Fatalf("second create: %v %s", err, again.Body)
		}
		id := created.JSON201.Id
		upd, err := c.UpdateLinkWithBodyWithResponse(ctx, id, nil, "application/json", strings.NewReader(`{"title":"SDK","max_clicks":null}`))
		if err != nil || upd.JSON200 == nil || *upd.JSON200.Title != "SDK" {
			t.Fatalf("update: %v %s", err, upd.Body)
		}
		stats, err := c.GetLinkStatsWithResponse(ctx, id, &gen.GetLinkStatsParams{})
		if err != nil || stats.JSON200 == nil || stats.JSON200.LinkId != id || stats.JSON200.Totals.Humans != 0 {
			t.Fatalf("stats: %v %s", err, stats.Body)
		}
		del, err := c.DeleteLinkWithResponse(ctx, id)
		if err != nil || del.StatusCode() != http.StatusNoContent {
			t.Fatalf("delete: %v %s", err, del.Body)
		}
		gone, err := c.GetLinkWithResponse(ctx, id)
		if err != nil || gone.ApplicationproblemJSON404 == nil {
			t.Fatalf("get after delete: %v %s", err, gone.Body)
		}
	})
}
