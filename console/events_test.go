package console_test

import (
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/switchboard/switchboard/console"
	"github.com/switchboard/switchboard/store"
	"github.com/switchboard/switchboard/store/storetest"
)

// The event log lists the workspace's events newest first, filtered by type or family, each with its JSON as
// receivers get it and the endpoints it went to (linking to the delivery), and nothing of another workspace.
func TestEventLog(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		e := newEnv(t, db, console.Config{})
		b, ws := linksUser(t, e, "events")
		b.createWebhook(t, url.Values{"url": {"http://127.0.0.1:9/links"}, "events": {"link.*"}}).wantStatus(t, http.StatusCreated)
		hook := endpoints(t, db, ws.ID)[0]
		b.createLink(t, url.Values{"destination_url": {"https://example.com/<x>"}, "title": {"<x>"}}).wantStatus(t, http.StatusCreated)
		ping := emitEvent(t, db, ws.ID, "webhook.ping")
		var ids []string
		if err := db.Bun().NewSelect().Table("events").Column("id").Where("workspace_id = ?", ws.ID).OrderExpr("id DESC").
			Scan(ctx, &ids); err != nil {
			t.Fatal(err)
		}
		if len(ids) != 2 || ids[0] != ping.ID {
			t.Fatalf("events %v", ids)
		}
		created := ids[1]
		stranger, theirs := linksUser(t, e, "eventstranger")
		emitEvent(t, db, theirs.ID, "webhook.ping")

		rows := func(r *resp) []string {
			var out []string
			for _, m := range regexp.MustCompile(`data-event-id="([^"]+)"`).FindAllStringSubmatch(r.body, -1) {
				out = append(out, m[1])
			}
			return out
		}
		all := b.get(t, "/user/events?tz=Asia/Tokyo")
		all.wantStatus(t, http.StatusOK)
		if got := rows(all); strings.Join(got, ",") != ping.ID+","+created {
			t.Fatalf("event log %v, want %v", got, ids)
		}
		// As receivers get it: JSON escapes < and > (and the destination was stored percent-encoded).
		all.wantText(t, `"title": "\u003cx\u003e"`)
		all.wantText(t, `"destination_url": "https://example.com/%3Cx%3E"`)
		if strings.Contains(all.body, "https://example.com/<x>") || strings.Contains(all.body, `"<x>"`) {
			t.Fatal("the event's JSON is not escaped")
		}
		d := deliveryOf(t, db, created, hook.ID)
		if !strings.Contains(all.body, `href="/user/webhooks/`+hook.ID+`/deliveries/`+d.ID+`?tz=Asia%2fTokyo">http://127.0.0.1:9/links</a>`) {
			t.Fatalf("the link.created event does not link to its delivery:\n%s", excerpt(all.body[strings.LastIndex(all.body, "Delivered to"):]))
		}
		all.wantText(t, "No endpoint of this workspace subscribed to it")
		for filter, want := range map[string]string{"link.*": created, "link.created": created, "webhook.ping": ping.ID} {
			if got := rows(b.get(t, "/user/events?type="+url.QueryEscape(filter))); strings.Join(got, ",") != want {
				t.Fatalf("type=%s: %v, want %s", filter, got, want)
			}
		}
		b.get(t, "/user/events?type=link.deleted").wantText(t, "No events of this type yet.")
		if got := rows(stranger.get(t, "/user/events")); len(got) != 1 || got[0] == ping.ID {
			t.Fatalf("another workspace's log %v", got)
		}
	})
}
