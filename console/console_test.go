package console_test

import (
	"net/http"
	"net/url"
	"testing"

	"github.com/switchboard/switchboard/console"
	"github.com/switchboard/switchboard/store"
	"github.com/switchboard/switchboard/store/storetest"
)

// A form field or query parameter with text the databases cannot keep (U+0000, bytes that are not UTF-8) is
// refused with the error page before anything is done, instead of failing its statement with a 500.
func TestUnstorableTextIsRefused(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		e := newEnv(t, db, console.Config{})
		b := e.browser()
		b.newUser(t, "nul")
		for _, name := range []string{"a\x00b", "caf\xe9"} {
			r := b.postCSRF(t, "/user/workspaces", url.Values{"name": {name}})
			r.wantStatus(t, http.StatusBadRequest)
		}
		b.postCSRF(t, "/user/workspaces", url.Values{"name\x00": {"x"}}).wantStatus(t, http.StatusBadRequest)
		b.get(t, "/user/sources?outcome=%00").wantStatus(t, http.StatusBadRequest)
		b.do(t, http.MethodPost, "/user/sign-in", url.Values{"email": {"a\x00@b.c"}, "password": {"x"}},
			http.Header{"Origin": {e.url}}).wantStatus(t, http.StatusBadRequest)
		ws := b.newWorkspace(t, "ok")
		if ws.Name != "ok" {
			t.Errorf("workspace %+v", ws)
		}
	})
}
