package handlers_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/switchboard/switchboard/handlers"
	"github.com/switchboard/switchboard/internal/channels"
	"github.com/switchboard/switchboard/store"
	"github.com/switchboard/switchboard/store/storetest"
)

// A hook URL takes no more than its body limit, and an ID that is no instance ID names no instance.
func TestChannelHookRefusals(t *testing.T) {
	e := newEnv(t, storetest.SQLite(t), handlers.Config{})
	e.do(request{method: http.MethodPost, path: "/hooks/channels/nope", body: "{}"}).problem(t, 404, "not_found")
	e.do(request{method: http.MethodPost, path: "/hooks/channels/ins_01JDAD0A1B2C3D4E5F6G7H8J9M", body: "{}"}).problem(t, 404, "not_found")
	small := newEnv(t, storetest.SQLite(t), handlers.Config{BodyLimit: 16})
	small.do(request{method: http.MethodPost, path: "/hooks/channels/ins_01JDAD0A1B2C3D4E5F6G7H8J9N",
		body: `{"update_id":1,"message":{"text":"longer than sixteen bytes"}}`}).problem(t, 413, "request_too_large")
}

// pushProvider is the bare network with a hook URL: a push verifies when it carries the instance's token.
type pushProvider struct{ bareProvider }

func (pushProvider) Info() channels.Info {
	i := bareProvider{}.Info()
	i.Name, i.Title = "push", "Push"
	return i
}

func (pushProvider) Receive(_ context.Context, inst channels.Instance, _ channels.Sink, p channels.Push) (channels.PushAnswer, error) {
	if token, _ := inst.Config["token"].(string); http.Header(p.Header).Get("X-Token") != token {
		return channels.PushAnswer{}, channels.ErrPushUnverified
	}
	return channels.PushAnswer{}, nil
}

// A push that is refused (its signature does not verify, or it names no instance that takes pushes) is charged to
// the sender's address and never to the instance it names: a sender that knows an instance's ID cannot spend the
// quota of its hook URL, and is stopped at its address quota. Verified pushes spend the instance's quota.
func TestChannelHookQuotas(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		e := newMsgEnvWith(t, db, channels.Config{Providers: []channels.Provider{pushProvider{}}},
			handlers.Config{HookRateLimit: 2, AddressRateLimit: 3, TrustedProxies: []*net.IPNet{{IP: net.IPv4(127, 0, 0, 0), Mask: net.CIDRMask(8, 32)}}})
		inst := e.instance("push", `{"token":"the-secret"}`)
		path := "/hooks/channels/" + inst.Id
		push := func(from, token string) *response {
			return e.do(request{method: http.MethodPost, path: path, body: "{}",
				header: map[string]string{"X-Forwarded-For": from, "X-Token": token}})
		}
		for i := range 3 {
			res := push("203.0.113.7", "forged")
			res.problem(t, http.StatusUnauthorized, "signature_invalid")
			if got, want := res.Header.Get("RateLimit"), fmt.Sprintf(`"address";r=%d;`, 2-i); !strings.HasPrefix(got, want) {
				t.Errorf("forged push %d: RateLimit %q, want %q…", i+1, got, want)
			}
		}
		p := push("203.0.113.7", "forged").problem(t, http.StatusTooManyRequests, "rate_limited")
		if len(p.ViolatedPolicies) != 1 || p.ViolatedPolicies[0] != "address" {
			t.Errorf("over the address quota: violated %v", p.ViolatedPolicies)
		}
		push("203.0.113.7", "the-secret").problem(t, http.StatusTooManyRequests, "rate_limited")
		e.do(request{method: http.MethodPost, path: "/hooks/channels/ins_01JDAD0A1B2C3D4E5F6G7H8J9K", body: "{}",
			header: map[string]string{"X-Forwarded-For": "198.51.100.20"}}).problem(t, http.StatusNotFound, "not_found")

		// The network's pushes find the instance's quota whole.
		for i := range 2 {
			res := push("198.51.100.9", "the-secret")
			if res.StatusCode != http.StatusOK || !strings.HasPrefix(res.Header.Get("RateLimit"), fmt.Sprintf(`"hook";r=%d;`, 1-i)) {
				t.Fatalf("verified push %d: %d, RateLimit %q: %s", i+1, res.StatusCode, res.Header.Get("RateLimit"), res.body)
			}
		}
		res := push("198.51.100.9", "the-secret")
		res.problem(t, http.StatusTooManyRequests, "rate_limited")
		if res.Header.Get("RateLimit-Policy") != `"hook";q=2;w=60` || res.Header.Get("Retry-After") == "" {
			t.Errorf("over the instance's quota: RateLimit-Policy %q, Retry-After %q", res.Header.Get("RateLimit-Policy"), res.Header.Get("Retry-After"))
		}
	})
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
