package handlers_test

import (
	"net/http"
	"slices"
	"testing"

	"github.com/switchboard/switchboard/handlers"
	"github.com/switchboard/switchboard/internal/app"
	"github.com/switchboard/switchboard/internal/app/apptest"
	"github.com/switchboard/switchboard/internal/llm"
	"github.com/switchboard/switchboard/internal/llm/llmtest"
	"github.com/switchboard/switchboard/store"
	"github.com/switchboard/switchboard/store/storetest"
)

// upstreamEnv is a server whose operator configured one fake OpenAI-compatible upstream, "fake", serving models.
func upstreamEnv(t *testing.T, db *store.DB, limits llm.Limits, models ...string) (*env, *llmtest.Server) {
	t.Helper()
	f := llmtest.New(t, "sk-upstream", models...)
	a := apptest.New(t, db, app.Config{Egress: apptest.Loopback, ModelLimits: limits,
		ModelUpstreams: []llm.Upstream{{Name: "fake", BaseURL: f.URL, APIKey: "sk-upstream"}}})
	return newAppEnv(t, a, handlers.Config{}), f
}

func TestModelsOfTheOperatorsUpstreams(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		e, _ := upstreamEnv(t, db, llm.Limits{}, "llama3.1", "qwen2.5")
		key, _ := e.key(e.workspace("Acme").ID, "models:read")

		res := e.do(request{path: "/api/v1/models", key: key})
		var l struct {
			Object string `json:"object"`
			Data   []struct {
				ID, Object, OwnedBy, Upstream string
				Created                       int64
			} `json:"data"`
		}
		res.json(t, &l)
		if res.StatusCode != http.StatusOK || l.Object != "list" || len(l.Data) != 2 {
			t.Fatalf("%d %s", res.StatusCode, res.body)
		}
		var ids []string
		for _, m := range l.Data {
			ids = append(ids, m.ID)
			if m.Object != "model" || m.Upstream != "fake" || m.Created == 0 {
				t.Errorf("model %+v", m)
			}
		}
		if !slices.Equal(ids, []string{"llama3.1", "qwen2.5"}) {
			t.Errorf("ids = %v", ids)
		}
		var m struct{ ID, Upstream string }
		e.do(request{path: "/api/v1/models/qwen2.5", key: key}).json(t, &m)
		if m.ID != "qwen2.5" || m.Upstream != "fake" {
			t.Errorf("GetModel = %+v", m)
		}
		// The catalogue is not offered beside the upstreams.
		p := e.do(request{path: "/api/v1/models/gpt-4o-mini", key: key}).problem(t, http.StatusNotFound, "model_not_found")
		if p.Detail == "" {
			t.Errorf("problem = %+v", p)
		}
	})
}
