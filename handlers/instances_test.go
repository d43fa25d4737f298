package handlers_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/switchboard/switchboard/gen"
	"github.com/switchboard/switchboard/handlers"
	"github.com/switchboard/switchboard/internal/channels"
	"github.com/switchboard/switchboard/internal/events"
	"github.com/switchboard/switchboard/internal/sealbox"
	"github.com/switchboard/switchboard/store"
	"github.com/switchboard/switchboard/store/storetest"
)

// bareProvider is a network with no capability at all and a config with one secret: it proves that every call
// needing a capability is refused before anything happens, and that secrets never come back.
type bareProvider struct{}

func (bareProvider) Info() channels.Info {
	return channels.Info{Name: "bare", Title: "Bare", Description: "A network that can do nothing.",
		Capabilities: []channels.Capability{}, AuthMethods: []channels.AuthMethod{channels.AuthToken},
		ConfigSchema: map[string]any{"type": "object", "additionalProperties": false, "required": []any{"token"},
			"properties": map[string]any{
				"token":  map[string]any{"type": "string", "minLength": 4, "writeOnly": true},
				"server": map[string]any{"type": "string"},
			}},
		AddressFormat: "any text", AddressExample: "bob"}
}

func (bareProvider) NormalizeAddress(raw string) (string, error) {
	if strings.TrimSpace(raw) == "" {
		return "", errors.New("an address is not empty")
	}
	return strings.ToLower(strings.TrimSpace(raw)), nil
}

func (bareProvider) ValidateConfig(config map[string]any) error {
	if s, _ := config["server"].(string); strings.Contains(s, " ") {
		return errors.New("server has no spaces")
	}
	return nil
}

func (bareProvider) Open(channels.Instance, channels.Sink) (channels.Session, error) {
	return nil, errors.New("bare: no sessions")
}

// msgEnv is a server with a messaging service over providers and a workspace with a messaging:write key.
type msgEnv struct {
	*env
	channels *channels.Service
	ws       store.Workspace
	apiKey   string
	// stopRoutes stops the service's route worker and waits for it to end (nil when the env runs none).
	stopRoutes func()
}

func newMsgEnv(t *testing.T, db *store.DB, cfg channels.Config) *msgEnv {
	t.Helper()
	return newMsgEnvWith(t, db, cfg, handlers.Config{})
}

// newMsgEnvWith is newMsgEnv with the server configured by hc (its messaging, events, webhook engine and logger are
// set here).
func newMsgEnvWith(t *testing.T, db *store.DB, cfg channels.Config, hc handlers.Config) *msgEnv {
	t.Helper()
	box, err := sealbox.New(make([]byte, 32))
	if err != nil {
		t.Fatal(err)
	}
	outbox := events.NewOutbox(db, events.Builtin())
	cfg.Sealer = box
	rec, err := channels.NewRecorder(db, outbox, cfg)
	if err != nil {
		t.Fatal(err)
	}
	// A process that runs no channel runtime: the API alone.
	svc, err := channels.New(rec, channels.NoRuntime)
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(testLog{t}, &slog.HandlerOptions{Level: slog.LevelError}))
	hc.Events, hc.Channels, hc.Logger, hc.Box = outbox, svc, log, box
	e := &msgEnv{env: newEnv(t, db, hc), channels: svc}
	e.ws = e.workspace("Messaging")
	e.apiKey, _ = e.key(e.ws.ID, "messaging:write")
	return e
}

func TestProvidersAndInstances(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		e := newMsgEnv(t, db, channels.Config{Providers: []channels.Provider{bareProvider{}}})
		ctx := context.Background()

		var providers gen.ProviderList
		e.do(request{path: "/api/v1/providers", key: e.apiKey}).json(t, &providers)
		if len(providers.Data) != 1 || providers.Data[0].Name != "bare" || len(providers.Data[0].Capabilities) != 0 {
			t.Fatalf("providers = %+v", providers)
		}
		e.do(request{path: "/api/v1/providers/nope", key: e.apiKey}).problem(t, 404, "not_found")

		// Unknown provider, a config its schema refuses, and one its own rules refuse.
		for body, pointer := range map[string]string{
			`{"name":"x","provider":"nope"}`:                                          "/provider",
			`{"name":"x","provider":"bare","config":{"token":"ab"}}`:                  "/config/token",
			`{"name":"x","provider":"bare","config":{"server":"a"}}`:                  "/config",
			`{"name":"x","provider":"bare","config":{"token":"abcd","extra":1}}`:      "/config",
			`{"name":"x","provider":"bare","config":{"token":"abcd","server":"a b"}}`: "/config",
		} {
			p := e.do(request{method: http.MethodPost, path: "/api/v1/instances", key: e.apiKey, body: body}).
				problem(t, 400, "validation_failed")
			if len(p.Errors) == 0 || !strings.HasPrefix(p.Errors[0]["pointer"], pointer) {
				t.Errorf("%s: errors = %v, want pointer %s", body, p.Errors, pointer)
			}
		}

		res := e.do(request{method: http.MethodPost, path: "/api/v1/instances", key: e.apiKey,
			body: `{"name":"Support","provider":"bare","config":{"token":"s3cret-token","server":"chat.example.com"},"metadata":{"team":"a"}}`})
		if res.StatusCode != 201 {
			t.Fatalf("create: %d %s", res.StatusCode, res.body)
		}
		if strings.Contains(string(res.body), "s3cret") {
			t.Fatalf("the secret came back: %s", res.body)
		}
		var inst gen.Instance
		res.json(t, &inst)
		if inst.Status != "created" || inst.Config["server"] != "chat.example.com" || res.Header.Get("Location") != "/api/v1/instances/"+inst.Id {
			t.Fatalf("instance = %+v", inst)
		}
		stored, err := db.Instances.Get(ctx, e.ws.ID, inst.Id)
		if err != nil || stored.SealedSecrets == nil || strings.Contains(*stored.SealedSecrets, "s3cret") {
			t.Fatalf("stored secrets = %v, %v", stored.SealedSecrets, err)
		}

		// A config change without the secret keeps it; the event counts on.
		var updated gen.Instance
		e.do(request{method: http.MethodPatch, path: "/api/v1/instances/" + inst.Id, key: e.apiKey,
			body: `{"name":"Support 2","config":{"server":"other.example.com"}}`}).json(t, &updated)
		if updated.Name != "Support 2" || updated.Config["server"] != "other.example.com" {
			t.Fatalf("updated = %+v", updated)
		}
		secrets, err := e.channels.InstanceSecrets(ctx, inst.Id)
		if err != nil || secrets["token"] != "s3cret-token" {
			t.Fatalf("secrets after update = %v, %v", secrets, err)
		}

		var list gen.InstanceList
		e.do(request{path: "/api/v1/instances?provider=bare&status=created", key: e.apiKey}).json(t, &list)
		if len(list.Data) != 1 || list.Data[0].Id != inst.Id {
			t.Fatalf("list = %+v", list)
		}

		// Without a runtime, connecting is refused with a reason, not a crash.
		e.do(request{method: http.MethodPost, path: "/api/v1/instances/" + inst.Id + "/connect", key: e.apiKey}).
			problem(t, 409, "instance_not_connected")
		e.do(request{path: "/api/v1/instances/" + inst.Id + "/qr", key: e.apiKey}).problem(t, 422, "capability_not_supported")
		var disc gen.Instance
		e.do(request{method: http.MethodPost, path: "/api/v1/instances/" + inst.Id + "/disconnect", key: e.apiKey}).json(t, &disc)
		if disc.Status != "disconnected" || disc.StatusReason != "disconnected by request" {
			t.Fatalf("disconnected = %+v", disc)
		}

		// Another workspace sees nothing.
		other := e.workspace("Other")
		otherKey, _ := e.key(other.ID, "messaging:write")
		for _, r := range []request{
			{path: "/api/v1/instances/" + inst.Id},
			{method: http.MethodPatch, path: "/api/v1/instances/" + inst.Id, body: `{"name":"x"}`},
			{method: http.MethodDelete, path: "/api/v1/instances/" + inst.Id},
			{method: http.MethodPost, path: "/api/v1/instances/" + inst.Id + "/disconnect"},
			{method: http.MethodPost, path: "/api/v1/instances/" + inst.Id + "/logout"},
			{path: "/api/v1/instances/" + inst.Id + "/qr"},
		} {
			r.key = otherKey
			e.do(r).problem(t, 404, "not_found")
		}
		var otherList gen.InstanceList
		e.do(request{path: "/api/v1/instances", key: otherKey}).json(t, &otherList)
		if len(otherList.Data) != 0 {
			t.Fatalf("other workspace lists %+v", otherList.Data)
		}

		res = e.do(request{method: http.MethodDelete, path: "/api/v1/instances/" + inst.Id, key: e.apiKey})
		if res.StatusCode != 204 {
			t.Fatalf("delete: %d %s", res.StatusCode, res.body)
		}
		e.do(request{path: "/api/v1/instances/" + inst.Id, key: e.apiKey}).problem(t, 404, "not_found")

		// Every change was an event of the instance, numbered without gaps.
		evs, _, err := db.Events.List(ctx, e.ws.ID, store.EventFilter{}, store.Page{Limit: 100, After: "evt_"})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for i, ev := range evs {
			var data struct {
				InstanceID string `json:"instance_id"`
				Sequence   int64  `json:"sequence"`
			}
			if err := json.Unmarshal(ev.Data, &data); err != nil {
				t.Fatal(err)
			}
			if data.InstanceID != inst.Id || data.Sequence != int64(i+1) {
				t.Errorf("event %d %s: %s", i, ev.Type, ev.Data)
			}
			got = append(got, ev.Type)
		}
		want := "instance.created instance.updated instance.status_changed instance.deleted"
		if fmt.Sprint(strings.Join(got, " ")) != want {
			t.Errorf("events = %v, want %s", got, want)
		}
	})
}
