package console_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/switchboard/switchboard/console"
	"github.com/switchboard/switchboard/store"
	"github.com/switchboard/switchboard/store/storetest"
)

// A source created from its form shows its ingest URL once, is listed, and its page shows what it was given (and of
// its token only the last four characters) with its request log.
func TestSourcePages(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		e := newEnv(t, db, console.Config{})
		b := e.browser()
		b.newUser(t, "sources")
		ws := b.newWorkspace(t, "sources")
		nonce := b.get(t, "/user/sources").field(t, "nonce")
		r := b.postCSRF(t, "/user/sources", url.Values{"name": {"Shop"}, "event_type": {"custom.order"},
			"scheme": {"api_key"}, "header": {"X-Api-Key"}, "secret": {"k3y-value"}, "nonce": {nonce}})
		r.wantStatus(t, http.StatusOK)
		r.wantText(t, "/in/in_")
		r.wantNoText(t, "k3y-value")
		srcs, _, err := db.Sources.List(ctx, ws.ID, store.Page{Limit: 10})
		if err != nil || len(srcs) != 1 {
			t.Fatalf("sources %+v, %v", srcs, err)
		}
		src := srcs[0]
		list := b.get(t, "/user/sources")
		list.wantStatus(t, http.StatusOK)
		list.wantText(t, "Shop")
		page := b.get(t, "/user/sources/"+src.ID)
		page.wantStatus(t, http.StatusOK)
		for _, want := range []string{"custom.order", "api_key", "X-Api-Key", "…" + src.TokenLast4} {
			page.wantText(t, want)
		}
		if strings.Contains(page.body, src.TokenHash) {
			t.Error("the page shows the token's hash")
		}
	})
}
