package handlers_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/switchboard/switchboard/gen"
	"github.com/switchboard/switchboard/internal/await"
	"github.com/switchboard/switchboard/internal/channels/telegram"
	"github.com/switchboard/switchboard/internal/channels/telegram/telegramtest"
	"github.com/switchboard/switchboard/internal/egress/proxytest"
	"github.com/switchboard/switchboard/store"
	"github.com/switchboard/switchboard/store/storetest"
)

// An instance's forward proxy, through real ones (Debian's microsocks and tinyproxy): a Telegram bot connects, polls
// and sends through it; the password is never shown; wrong credentials fail the session with the proxy's reason;
// a proxy on an address the egress policy refuses, a malformed one and one for a provider without connections are
// refused up front; null removes it.
func TestInstanceProxy(t *testing.T) {
	storetest.OwnDialects(t, func(t *testing.T, db *store.DB) {
		fake := telegramtest.Start(t)
		e := newProviderEnv(t, db, "Proxy", telegram.New(telegram.Options{PollTimeout: time.Second,
			BotInterval: time.Millisecond}))
		socks := proxytest.SOCKS5(t, "sb", "socks-pass")
		httpProxy := proxytest.HTTP(t, "sb", "http-pass")
		patch := func(id, body string) *response {
			return e.do(request{method: http.MethodPatch, path: "/api/v1/instances/" + id, key: e.apiKey, body: body})
		}
		connect := func(id string) {
			t.Helper()
			if res := e.post("/api/v1/instances/"+id+"/connect", ""); res.StatusCode != 200 {
				t.Fatalf("connect: %d %s", res.StatusCode, res.body)
			}
		}

		for _, px := range []*proxytest.Proxy{socks, httpProxy} {
			token := fake.AddBot(7100+int64(len(px.URL)), "ProxiedBot")
			body := fmt.Sprintf(`{"name":"proxied","provider":"telegram","config":{"bot_token":%q,"api_url":%q,"inbound":"polling"},`+
				`"proxy":{"url":%q,"username":%q,"password":%q}}`, token, fake.URL, px.URL, px.Username, px.Password)
			res := e.post("/api/v1/instances", body)
			if res.StatusCode != 201 {
				t.Fatalf("create with a proxy: %d %s", res.StatusCode, res.body)
			}
			var inst gen.Instance
			res.json(t, &inst)
			if inst.Proxy == nil || inst.Proxy.Url != px.URL || deref(inst.Proxy.Username) != "sb" || !inst.Proxy.PasswordSet {
				t.Fatalf("proxy shown as %+v", inst.Proxy)
			}
			if strings.Contains(string(res.body), px.Password) {
				t.Fatal("the proxy password is shown back")
			}
			connect(inst.Id)
			e.status(inst.Id, "connected")
			if strings.HasPrefix(px.URL, "http:") && !strings.Contains(px.Log(), "CONNECT") {
				t.Errorf("tinyproxy logged no CONNECT:\n%s", px.Log())
			}
			// In by long polling through the proxy, then a reply out.
			upd, _ := fake.Message(token, telegramtest.User{ID: 501, FirstName: "Ada"}, "hello proxied bot")
			fake.Push(token, upd)
			await.Until(t, "the message polled through the proxy", func() int {
				var msgs gen.MessageList
				e.get("/api/v1/instances/"+inst.Id+"/messages", &msgs)
				return len(msgs.Data)
			}, func(n int) bool { return n == 1 })
			res = e.post("/api/v1/instances/"+inst.Id+"/messages", `{"to":"501","type":"text","text":"through the proxy"}`)
			if res.StatusCode != 202 {
				t.Fatalf("send: %d %s", res.StatusCode, res.body)
			}
			var m gen.Message
			res.json(t, &m)
			awaitMessage(e, inst.Id, m.Id, "sent")

			// The wrong password: the next connect fails with the proxy's refusal, never the password.
			e.post("/api/v1/instances/"+inst.Id+"/disconnect", "")
			e.status(inst.Id, "disconnected")
			res = patch(inst.Id, fmt.Sprintf(`{"proxy":{"url":%q,"username":"sb","password":"not-the-password"}}`, px.URL))
			if res.StatusCode != 200 {
				t.Fatalf("patch the proxy: %d %s", res.StatusCode, res.body)
			}
			connect(inst.Id)
			got := e.status(inst.Id, "reconnecting")
			if !strings.Contains(got.StatusReason, "proxy") || strings.Contains(got.StatusReason, "not-the-password") {
				t.Errorf("reason with a refused proxy: %q", got.StatusReason)
			}
			e.post("/api/v1/instances/"+inst.Id+"/disconnect", "")
			e.status(inst.Id, "disconnected")

			// null removes it; the instance connects directly again.
			res = patch(inst.Id, `{"proxy":null}`)
			var plain gen.Instance
			res.json(t, &plain)
			if res.StatusCode != 200 || plain.Proxy != nil {
				t.Fatalf("remove the proxy: %d %s", res.StatusCode, res.body)
			}
			connect(inst.Id)
			e.status(inst.Id, "connected")
		}

		// A same-URL update without the password keeps it; its events never carry it.
		token := fake.AddBot(7200, "KeptBot")
		inst := e.instance("telegram", fmt.Sprintf(`{"bot_token":%q,"api_url":%q,"inbound":"polling"}`, token, fake.URL))
		res := patch(inst.Id, fmt.Sprintf(`{"proxy":{"url":%q,"username":"sb","password":"socks-pass"}}`, socks.URL))
		if res.StatusCode != 200 {
			t.Fatalf("add a proxy: %d %s", res.StatusCode, res.body)
		}
		res = patch(inst.Id, fmt.Sprintf(`{"proxy":{"url":%q,"username":"sb"}}`, socks.URL))
		var kept gen.Instance
		res.json(t, &kept)
		if kept.Proxy == nil || !kept.Proxy.PasswordSet {
			t.Fatalf("the password was dropped: %s", res.body)
		}
		connect(inst.Id)
		e.status(inst.Id, "connected")
		// Another user name without a password drops the stored one.
		res = patch(inst.Id, fmt.Sprintf(`{"proxy":{"url":%q,"username":"someone-else"}}`, socks.URL))
		res.json(t, &kept)
		if kept.Proxy == nil || kept.Proxy.PasswordSet {
			t.Fatalf("a password stayed with another user name: %s", res.body)
		}
		var evs gen.EventList
		e.get("/api/v1/events?limit=100", &evs)
		for _, ev := range evs.Data {
			if b, _ := json.Marshal(ev); strings.Contains(string(b), "socks-pass") || strings.Contains(string(b), "http-pass") {
				t.Fatalf("an event carries a proxy password: %s", b)
			}
		}

		// Refused up front: a host the egress policy blocks, a malformed URL, credentials in the URL.
		for body, want := range map[string][2]string{
			`{"proxy":{"url":"socks5://10.1.2.3:1080"}}`:              {"400", "validation_failed"},
			`{"proxy":{"url":"ftp://proxy.example.com:21"}}`:          {"400", "validation_failed"},
			`{"proxy":{"url":"socks5://u:p@127.0.0.1:1080"}}`:         {"400", "validation_failed"},
			`{"proxy":{"url":"http://127.0.0.1:3128","password":""}}`: {"400", "validation_failed"},
		} {
			res := patch(inst.Id, body)
			var status int
			fmt.Sscan(want[0], &status)
			p := res.problem(t, status, want[1])
			if body == `{"proxy":{"url":"socks5://10.1.2.3:1080"}}` && (len(p.Errors) == 0 || p.Errors[0]["pointer"] != "/proxy/url") {
				t.Errorf("blocked proxy: %+v", p.Errors)
			}
		}
	})
}

// A provider whose instances open no network connection of their own (the sandbox) refuses a proxy.
func TestInstanceProxyNeedsTheCapability(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		e := newSandboxEnv(t, db)
		res := e.post("/api/v1/instances", `{"name":"s","provider":"sandbox","proxy":{"url":"socks5://proxy.example.com:1080"}}`)
		res.problem(t, 422, "capability_not_supported")
		inst := e.instance("sandbox", `{}`)
		e.do(request{method: http.MethodPatch, path: "/api/v1/instances/" + inst.Id, key: e.apiKey,
			body: `{"proxy":{"url":"socks5://proxy.example.com:1080"}}`}).problem(t, 422, "capability_not_supported")
	})
}
