package clicks

import (
	"encoding/json"
	"testing"

	"github.com/switchboard/switchboard/gen"
	"github.com/switchboard/switchboard/internal/await"
	"github.com/switchboard/switchboard/store"
	"github.com/switchboard/switchboard/store/storetest"
)

// link.clicked is recorded with the clicks, for the workspaces where an endpoint subscribes to it by name or family
// ("*" does not take opt-in types), and nothing is written for the others.
func TestRecorderEmitsClickedOnlyWhereSubscribed(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		r := newRecorder(t, db, Config{})
		var links []store.Link
		want := map[string]int{}
		for _, patterns := range [][]string{{"link.clicked"}, {"link.*"}, {"*"}, nil} {
			l := testLink(t, db)
			links = append(links, l)
			if patterns != nil {
				if _, err := db.Webhooks.Create(ctx, store.NewWebhookEndpoint{WorkspaceID: l.WorkspaceID,
					URL: "https://receiver.example/hook", Events: patterns, SealSecret: func(string) string { return "s" }}); err != nil {
					t.Fatal(err)
				}
			}
			want[l.WorkspaceID] = 0
			if patterns != nil && patterns[0] != "*" {
				want[l.WorkspaceID] = 2
			}
			for _, ua := range []string{firefox, "curl/8.5.0"} {
				if err := r.Record(hit(l.ID, ua, "203.0.113.9")); err != nil {
					t.Fatal(err)
				}
			}
		}
		for _, l := range links {
			await.Equal(t, "the clicks of "+l.ID, func() int { return clickCount(t, db, l.ID) }, 2)
		}
		for ws, n := range want {
			var evs []store.Event
			if err := db.Bun().NewSelect().Model(&evs).Where("workspace_id = ? AND type = 'link.clicked'", ws).Scan(ctx); err != nil {
				t.Fatal(err)
			}
			if len(evs) != n {
				t.Errorf("workspace %s: %d link.clicked events, want %d", ws, len(evs), n)
			}
			for _, ev := range evs {
				var data gen.LinkClickedEvent
				if err := json.Unmarshal(ev.Data, &data); err != nil || data.Link.Id != data.Click.LinkId ||
					data.Click.Object != "click" || data.Link.Domain != "sb.test" || data.Click.UserAgent == "" {
					t.Errorf("event data %s: %v", ev.Data, err)
				}
			}
		}
	})
}
