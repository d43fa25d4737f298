package handlers_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/switchboard/switchboard/gen"
	"github.com/switchboard/switchboard/handlers"
	"github.com/switchboard/switchboard/internal/apikey"
	"github.com/switchboard/switchboard/internal/channels/sandbox"
	"github.com/switchboard/switchboard/internal/egress"
	"github.com/switchboard/switchboard/store"
	"github.com/switchboard/switchboard/store/storetest"
)

// exampleOf is a path parameter's example in the spec (a well-formed ID of its kind).
func exampleOf(p *openapi3.Parameter) string {
	if p.Example != nil {
		return fmt.Sprint(p.Example)
	}
	if p.Schema != nil && p.Schema.Value != nil && p.Schema.Value.Example != nil {
		return fmt.Sprint(p.Schema.Value.Example)
	}
	return "x"
}

// A key limited to some instances: every operation of the spec under /api/v1/instances/{instance_id} answers for
// another instance of its workspace what it answers for another workspace's instance (404 not_found, the same
// detail); the list shows its instances only; it creates no instance; webhook endpoints it makes see its
// instances' events only; events of other instances are not listed or found; a change of its instances
// holds from its next request.
func TestKeyLimitedToInstances(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		// Webhook endpoints on loopback are allowed: the test makes some (nothing is delivered to them).
		e := newSandboxServer(t, db, sandbox.Options{}, handlers.Config{}, egress.NewGuard(egress.Policy{AllowHTTP: true,
			AllowedNetworks: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}))
		ctx := context.Background()
		mine, foreign := e.connected("mine"), e.connected("foreign")
		limited, stored := createKey(t, db, e.ws.ID, &store.NewAPIKey{InstanceIDs: []string{mine.Id}}, apikey.All()...)
		other := e.workspace("Other")
		otherKey, _ := createKey(t, db, other.ID, nil, apikey.All()...)

		var me gen.Me
		e.do(request{path: "/api/v1/me", key: limited}).json(t, &me)
		if !slices.Equal(me.Key.InstanceIds, []string{mine.Id}) {
			t.Fatalf("me: instance_ids %v", me.Key.InstanceIds)
		}

		// Every operation under an instance, from the spec.
		ops := 0
		for path, item := range specDoc.Paths.Map() {
			if !strings.HasPrefix(path, "/api/v1/instances/{instance_id}") {
				continue
			}
			for method, op := range item.Operations() {
				if method == http.MethodHead || method == http.MethodOptions {
					continue
				}
				concrete := path
				for _, ref := range append(item.Parameters, op.Parameters...) {
					if p := ref.Value; p.In == "path" {
						v := exampleOf(p)
						if p.Name == "instance_id" {
							v = foreign.Id
						}
						concrete = strings.ReplaceAll(concrete, "{"+p.Name+"}", v)
					}
				}
				body := ""
				if op.RequestBody != nil && op.RequestBody.Value != nil {
					body = "{}"
				}
				got := e.do(request{method: method, path: concrete, key: limited, body: body})
				p := got.problem(t, 404, "not_found")
				if want := "There is no instance " + foreign.Id + " in this workspace."; p.Detail != want {
					t.Errorf("%s %s: detail %q, want %q", method, path, p.Detail, want)
				}
				// Another workspace's key is told not_found too; where its look-up is of the instance (not of an
				// object under it, which that workspace lacks as well), in the same words.
				if theirs := e.do(request{method: method, path: concrete, key: otherKey, body: body}); theirs.StatusCode == 404 {
					var q problem
					theirs.json(t, &q)
					if q.Code != p.Code || (strings.Contains(q.Detail, "instance") && q.Detail != p.Detail) {
						t.Errorf("%s %s: limited key told %+v, another workspace %+v", method, path, p, q)
					}
				}
				ops++
			}
		}
		if ops < 30 {
			t.Fatalf("only %d operations under /api/v1/instances/{instance_id}", ops)
		}
		// Its own instance answers.
		if res := e.do(request{path: "/api/v1/instances/" + mine.Id, key: limited}); res.StatusCode != 200 {
			t.Fatalf("own instance: %d %s", res.StatusCode, res.body)
		}
		var list gen.InstanceList
		e.do(request{path: "/api/v1/instances", key: limited}).json(t, &list)
		if len(list.Data) != 1 || list.Data[0].Id != mine.Id {
			t.Errorf("list: %d instances", len(list.Data))
		}
		e.do(request{method: http.MethodPost, path: "/api/v1/instances", key: limited,
			body: `{"name":"more","provider":"sandbox"}`}).problem(t, 403, "key_limited_to_instances")

		// Events: the foreign instance's are neither listed nor found.
		full, _ := createKey(t, db, e.ws.ID, nil, apikey.All()...)
		var evs gen.EventList
		e.do(request{path: "/api/v1/events?limit=100", key: full}).json(t, &evs)
		var foreignEvent string
		for _, ev := range evs.Data {
			raw, err := json.Marshal(ev.Data)
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(string(raw), foreign.Id) && strings.HasPrefix(ev.Type, "instance.") {
				foreignEvent = ev.Id
			}
		}
		if foreignEvent == "" {
			t.Fatal("no event of the foreign instance to look for")
		}
		var seen gen.EventList
		e.do(request{path: "/api/v1/events?limit=100", key: limited}).json(t, &seen)
		for _, ev := range seen.Data {
			if ev.Id == foreignEvent {
				t.Errorf("the limited key lists %s of the foreign instance", ev.Id)
			}
		}
		if len(seen.Data) == 0 {
			t.Error("the limited key lists no event at all")
		}
		e.do(request{path: "/api/v1/events/" + foreignEvent, key: limited}).problem(t, 404, "not_found")

		// Webhook endpoints and streams: filtered to its instances.
		res := e.do(request{method: http.MethodPost, path: "/api/v1/webhooks", key: limited,
			body: `{"url":"http://127.0.0.1:9/hook","events":["message.received"]}`})
		if res.StatusCode != 201 {
			t.Fatalf("create webhook: %d %s", res.StatusCode, res.body)
		}
		var hook gen.WebhookWithSecret
		res.json(t, &hook)
		if !slices.Equal(hook.InstanceIds, []string{mine.Id}) {
			t.Errorf("webhook of the limited key: instance_ids %v", hook.InstanceIds)
		}
		e.do(request{method: http.MethodPatch, path: "/api/v1/webhooks/" + hook.Id, key: limited,
			body: fmt.Sprintf(`{"instance_ids":[%q,%q]}`, mine.Id, foreign.Id)}).problem(t, 422, "reference_not_found")
		e.do(request{method: http.MethodPost, path: "/api/v1/webhooks", key: limited,
			body: fmt.Sprintf(`{"url":"http://127.0.0.1:9/hook","events":["message.received"],"instance_ids":[%q]}`, foreign.Id)}).
			problem(t, 422, "reference_not_found")

		// Lifting the limit holds from the next request, in this process and every other (KeysVersion).
		if _, err := db.APIKeys.SetInstances(ctx, e.ws.ID, stored.ID, nil); err != nil {
			t.Fatal(err)
		}
		if res := e.do(request{path: "/api/v1/instances/" + foreign.Id, key: limited}); res.StatusCode != 200 {
			t.Fatalf("after lifting the limit: %d %s", res.StatusCode, res.body)
		}
		if _, err := db.APIKeys.SetInstances(ctx, e.ws.ID, stored.ID, []string{foreign.Id}); err != nil {
			t.Fatal(err)
		}
		e.do(request{path: "/api/v1/instances/" + mine.Id, key: limited}).problem(t, 404, "not_found")
	})
}
