package handlers_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/switchboard/switchboard/handlers"
	"github.com/switchboard/switchboard/store"
	"github.com/switchboard/switchboard/store/storetest"
)

// The hook URL has no API key: each instance's URL takes HookRateLimit pushes a minute, whoever sends them, so a
// flood of forged pushes costs the database a bounded number of reads. Over it: 429 with Retry-After.
func TestChannelHookRateLimit(t *testing.T) {
	e := newEnv(t, storetest.SQLite(t), handlers.Config{HookRateLimit: 2})
	path := "/hooks/channels/ins_01JDAD0A1B2C3D4E5F6G7H8J9K"
	for i := range 2 {
		res := e.do(request{method: http.MethodPost, path: path, body: "{}"})
		res.problem(t, 404, "not_found")
		if res.Header.Get("RateLimit-Policy") != `"hook";q=2;w=60` || !strings.HasPrefix(res.Header.Get("RateLimit"), fmt.Sprintf(`"hook";r=%d;`, 1-i)) {
			t.Errorf("push %d: RateLimit-Policy %q, RateLimit %q", i+1, res.Header.Get("RateLimit-Policy"), res.Header.Get("RateLimit"))
		}
	}
	res := e.do(request{method: http.MethodPost, path: path, body: "{}"})
	res.problem(t, 429, "rate_limited")
	if res.Header.Get("Retry-After") == "" {
		t.Error("no Retry-After")
	}
	e.do(request{path: path + "?hub.mode=subscribe&hub.verify_token=x&hub.challenge=1"}).problem(t, 429, "rate_limited")
	// Another instance's URL has its own quota.
	e.do(request{method: http.MethodPost, path: "/hooks/channels/ins_01JDAD0A1B2C3D4E5F6G7H8J9M", body: "{}"}).problem(t, 404, "not_found")
	// Not an instance ID at all, and a body over the server's limit.
	e.do(request{method: http.MethodPost, path: "/hooks/channels/nope", body: "{}"}).problem(t, 404, "not_found")
	small := newEnv(t, storetest.SQLite(t), handlers.Config{BodyLimit: 16})
	small.do(request{method: http.MethodPost, path: "/hooks/channels/ins_01JDAD0A1B2C3D4E5F6G7H8J9N",
		body: `{"update_id":1,"message":{"text":"longer than sixteen bytes"}}`}).problem(t, 413, "request_too_large")
}

// The hook URL of an instance whose provider takes no pushes says so; it does not deny that the instance exists.
func TestHookURLOfAProviderWithoutPushes(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		e := newSandboxEnv(t, db)
		inst := e.instance("sandbox", `{}`)
		path := "/hooks/channels/" + inst.Id
		for _, r := range []request{{method: http.MethodPost, path: path, body: "{}"},
			{path: path + "?hub.mode=subscribe&hub.verify_token=my-verify-token&hub.challenge=1158201444"}} {
			p := e.do(r).problem(t, http.StatusNotFound, "hooks_not_supported")
			if !strings.Contains(p.Detail, inst.Id) || !strings.Contains(p.Detail, "sandbox") {
				t.Errorf("%s %s: detail %q", r.method, r.path, p.Detail)
			}
		}
	})
}
