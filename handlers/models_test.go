package handlers_test

import (
	"context"
	"net/http"
	"regexp"
	"testing"

	"github.com/switchboard/switchboard/handlers"
	"github.com/switchboard/switchboard/internal/await"
	"github.com/switchboard/switchboard/internal/modelcatalog"
	"github.com/switchboard/switchboard/store"
	"github.com/switchboard/switchboard/store/storetest"
)

type modelList struct {
	Object string `json:"object"`
	Data   []struct {
		ID      string `json:"id"`
		Object  string `json:"object"`
		Created int64  `json:"created"`
		OwnedBy string `json:"owned_by"`
	} `json:"data"`
}

func (l modelList) ids() []string {
	var out []string
	for _, m := range l.Data {
		out = append(out, m.ID)
	}
	return out
}

func TestListModelsIsOpenAICompatible(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		e := newEnv(t, db, handlers.Config{})
		ws := e.workspace("Acme")
		key, _ := e.key(ws.ID, "models:read")

		res := e.do(request{path: "/api/v1/models", key: key})
		if res.StatusCode != http.StatusOK {
			t.Fatalf("status %d: %s", res.StatusCode, res.body)
		}
		var l modelList
		res.json(t, &l)
		if l.Object != "list" || len(l.Data) != len(modelcatalog.Default().All()) {
			t.Fatalf("list = %+v", l)
		}
		for _, m := range l.Data {
			if m.Object != "model" || m.ID == "" || m.Created == 0 || m.OwnedBy == "" {
				t.Errorf("model %+v lacks an OpenAI field", m)
			}
		}
		policy := regexp.MustCompile(`^"key";q=600;w=60, "workspace";q=3000;w=60$`)
		if got := res.Header.Get("RateLimit-Policy"); !policy.MatchString(got) {
			t.Errorf("RateLimit-Policy = %q", got)
		}
		remaining := regexp.MustCompile(`^"key";r=599;t=\d+, "workspace";r=2999;t=\d+$`)
		if got := res.Header.Get("RateLimit"); !remaining.MatchString(got) {
			t.Errorf("RateLimit = %q", got)
		}
	})
}

func TestGetModel(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		e := newEnv(t, db, handlers.Config{})
		ws := e.workspace("Acme")
		key, _ := e.key(ws.ID, "models:read")

		res := e.do(request{path: "/api/v1/models/gpt-4o-mini", key: key})
		var m struct{ ID, Object string }
		res.json(t, &m)
		if res.StatusCode != http.StatusOK || m.ID != "gpt-4o-mini" || m.Object != "model" {
			t.Fatalf("%d %s", res.StatusCode, res.body)
		}

		p := e.do(request{path: "/api/v1/models/gpt-9", key: key}).problem(t, http.StatusNotFound, "model_not_found")
		if p.Instance != "/api/v1/models/gpt-9" {
			t.Errorf("instance = %q", p.Instance)
		}
		// "bad%20id" leaves URL.RawPath empty, "a%2Fb" does not: both reach the validator unescaped.
		for _, path := range []string{"/api/v1/models/bad%20id", "/api/v1/models/a%2Fb"} {
			p = e.do(request{path: path, key: key}).problem(t, http.StatusBadRequest, "validation_failed")
			if len(p.Errors) != 1 || p.Errors[0]["parameter"] != "model" {
				t.Errorf("%s: errors = %v, want one error on parameter model", path, p.Errors)
			}
		}
	})
}

// A workspace sees only the models enabled for it, and a change applies to the next request of cached keys.
func TestModelsFollowWorkspaceSettings(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		e := newEnv(t, db, handlers.Config{})
		ws, other := e.workspace("Acme"), e.workspace("Other")
		key, _ := e.key(ws.ID, "models:read")
		otherKey, _ := e.key(other.ID, "models:read")
		e.do(request{path: "/api/v1/models", key: key}) // cache the key

		// Another process (the CLI) changes the settings.
		cli := reopen(t, db)
		if _, err := cli.Workspaces.SetEnabledModels(context.Background(), ws.ID, []string{"gpt-4o", "text-embedding-3-small"}); err != nil {
			t.Fatal(err)
		}
		visible := func() int {
			var l modelList
			e.do(request{path: "/api/v1/models", key: key}).json(t, &l)
			return len(l.Data)
		}
		await.Equal(t, "the models the CLI enabled", visible, 2)
		var l modelList
		e.do(request{path: "/api/v1/models", key: key}).json(t, &l)
		if ids := l.ids(); ids[0] != "gpt-4o" || ids[1] != "text-embedding-3-small" {
			t.Errorf("ids = %v, want catalogue order", ids)
		}
		e.do(request{path: "/api/v1/models/gpt-4o-mini", key: key}).problem(t, http.StatusNotFound, "model_not_found")

		// The other workspace is untouched.
		e.do(request{path: "/api/v1/models", key: otherKey}).json(t, &l)
		if len(l.Data) != len(modelcatalog.Default().All()) {
			t.Errorf("other workspace sees %d models", len(l.Data))
		}

		if _, err := cli.Workspaces.SetEnabledModels(context.Background(), ws.ID, []string{}); err != nil {
			t.Fatal(err)
		}
		await.Equal(t, "no model once the CLI enabled none", visible, 0)
	})
}

func TestModelsFromOperatorCatalogue(t *testing.T) {
	db := storetest.SQLite(t)
	catalog, err := modelcatalog.New([]modelcatalog.Model{{ID: "house-model", OwnedBy: "acme", Created: 1700000000}})
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, db, handlers.Config{Models: catalog})
	key, _ := e.key(e.workspace("Acme").ID, "models:read")
	var l modelList
	e.do(request{path: "/api/v1/models", key: key}).json(t, &l)
	if ids := l.ids(); len(ids) != 1 || ids[0] != "house-model" {
		t.Fatalf("ids = %v", ids)
	}
}
