package console_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/switchboard/switchboard/internal/channels/telegram"
	"github.com/switchboard/switchboard/store"
	"github.com/switchboard/switchboard/store/storetest"
)

// An instance's proxy from its page: set with a password (never shown back), kept when the password is left
// empty, refused with the reason for a host the egress policy blocks, and removed.
func TestProxyForm(t *testing.T) {
	storetest.OwnDialects(t, func(t *testing.T, db *store.DB) {
		svc, _, b, ws := instancePages(t, db, "proxy", telegram.New(telegram.Options{}))
		inst := telegramInstance(t, svc, ws.ID)
		path := "/user/channels/" + inst.ID
		b.get(t, path).wantText(t, "connects to its network directly")

		b.postCSRF(t, path+"/proxy", url.Values{"url": {"socks5://8.8.8.8:1080"}, "username": {"sb"}, "password": {"proxy-secret"}}).
			wantRedirect(t, path+"?done=proxy")
		page := b.get(t, path)
		page.wantText(t, "socks5://8.8.8.8:1080")
		page.wantText(t, "with a stored password")
		if strings.Contains(page.body, "proxy-secret") {
			t.Fatal("the proxy password is shown")
		}
		b.postCSRF(t, path+"/proxy", url.Values{"url": {"socks5://8.8.8.8:1080"}, "username": {"sb"}}).wantRedirect(t, path+"?done=proxy")
		if i, _ := svc.Get(context.Background(), ws.ID, inst.ID); i.ProxySealedPassword == nil {
			t.Fatal("an empty password field dropped the stored password")
		}

		refused := b.postCSRF(t, path+"/proxy", url.Values{"url": {"socks5://10.0.0.1:1080"}})
		refused.wantStatus(t, http.StatusUnprocessableEntity)
		if !strings.Contains(refused.alert(), "not allowed") {
			t.Fatalf("the refusal says %q", refused.alert())
		}
		b.postCSRF(t, path+"/proxy", url.Values{"remove": {"1"}}).wantRedirect(t, path+"?done=proxy")
		b.get(t, path).wantText(t, "connects to its network directly")
	})
}
