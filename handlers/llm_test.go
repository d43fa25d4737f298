package handlers_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/switchboard/switchboard/gen"
	"github.com/switchboard/switchboard/handlers"
	"github.com/switchboard/switchboard/internal/app"
	"github.com/switchboard/switchboard/internal/app/apptest"
	"github.com/switchboard/switchboard/internal/llm"
	"github.com/switchboard/switchboard/internal/llm/llmtest"
	"github.com/switchboard/switchboard/internal/modelcatalog"
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

// openAIProblem is a problem document's OpenAI error object, which the OpenAI SDKs read.
type openAIProblem struct {
	Code             string   `json:"code"`
	Detail           string   `json:"detail"`
	ViolatedPolicies []string `json:"violated-policies"`
	Error            struct {
		Message, Type, Code string
	} `json:"error"`
}

func TestChatCompletionsPassThroughToTheUpstream(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		e, f := upstreamEnv(t, db, llm.Limits{RequestsPerMinute: 3}, "llama3.1")
		key, _ := e.key(e.workspace("Acme").ID, "models:read")
		post := func(body string) *response {
			return e.do(request{method: http.MethodPost, path: "/api/v1/chat/completions", key: key, body: body,
				header: map[string]string{"Content-Type": "application/json"}})
		}

		res := post(`{"model": "llama3.1", "temperature": 0.2, "messages": [{"role": "user", "content": "hello"}]}`)
		var c struct {
			Object  string
			Choices []struct{ Message struct{ Content string } }
			Usage   struct {
				TotalTokens int `json:"total_tokens"`
			}
		}
		res.json(t, &c)
		if res.StatusCode != http.StatusOK || c.Object != "chat.completion" || c.Choices[0].Message.Content != "echo: hello" ||
			c.Usage.TotalTokens != llmtest.PromptTokens+llmtest.CompletionTokens {
			t.Fatalf("%d %s", res.StatusCode, res.body)
		}
		// Fields the spec does not name reach the upstream; its key is the operator's, not the client's.
		if got := f.Requests()[0]["temperature"]; got != 0.2 {
			t.Errorf("temperature = %v", got)
		}

		// A stream, read as a client reads it (the harness's validator decodes no event streams).
		req, _ := http.NewRequest(http.MethodPost, e.url+"/api/v1/chat/completions",
			strings.NewReader(`{"model": "llama3.1", "stream": true, "messages": [{"role": "user", "content": "two words"}]}`))
		req.Header.Set("Authorization", "Bearer "+key)
		req.Header.Set("Content-Type", "application/json")
		sres, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		stream, _ := io.ReadAll(sres.Body)
		sres.Body.Close()
		if sres.StatusCode != http.StatusOK || sres.Header.Get("Content-Type") != "text/event-stream" ||
			!strings.Contains(string(stream), `"content":"words"`) || !strings.HasSuffix(string(stream), "data: [DONE]\n\n") {
			t.Fatalf("stream: %d %s", sres.StatusCode, stream)
		}

		// An invalid request keeps the upstream's words, in OpenAI's shape with our code inside.
		var p openAIProblem
		post(`{"model": "llama3.1", "messages": [{"role": "user", "content": "3rd"}]}`)
		post(`{"model": "llama3.1", "messages": [{"role": "user", "content": "4th"}]}`).json(t, &p)
		if p.Code != "rate_limited" || p.Error.Code != "rate_limited" || p.Error.Type != "rate_limit_error" ||
			!slices.Contains(p.ViolatedPolicies, llm.PolicyRequestsMinute) || p.Error.Message == "" {
			t.Errorf("quota: %+v", p)
		}
	})
}

func TestChatCompletionErrorsKeepOpenAIsShape(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		e, f := upstreamEnv(t, db, llm.Limits{}, "llama3.1")
		key, _ := e.key(e.workspace("Acme").ID, "models:read")
		post := func(body string) *response {
			return e.do(request{method: http.MethodPost, path: "/api/v1/chat/completions", key: key, body: body,
				header: map[string]string{"Content-Type": "application/json"}})
		}
		var p openAIProblem
		post(`{"model": "gpt-9", "messages": [{"role": "user", "content": "x"}]}`).json(t, &p)
		if p.Code != "model_not_found" || p.Error.Type != "not_found_error" || p.Error.Message == "" {
			t.Errorf("unknown model: %+v", p)
		}
		f.LimitNext(1)
		res := post(`{"model": "llama3.1", "messages": [{"role": "user", "content": "x"}]}`)
		res.json(t, &p)
		if res.StatusCode != http.StatusTooManyRequests || res.Header.Get("Retry-After") != "7" || p.ViolatedPolicies[0] != "upstream" {
			t.Errorf("upstream limit: %d %s", res.StatusCode, res.body)
		}
		f.FailNext(1)
		post(`{"model": "llama3.1", "messages": [{"role": "user", "content": "x"}]}`).problem(t, http.StatusBadGateway, "upstream_error")
		// A request the upstream refuses as invalid keeps its words.
		post(`{"model": "llama3.1", "temperature": 2.5, "messages": [{"role": "user", "content": "x"}]}`).json(t, &p)
		if p.Code != "upstream_rejected" || p.Error.Type != "invalid_request_error" ||
			p.Error.Message != "2.5 is greater than the maximum of 2 - 'temperature'" {
			t.Errorf("rejected: %+v", p)
		}
	})
}

// A workspace's own upstream serves that workspace only; its key is stored sealed.
func TestWorkspaceModelUpstreams(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		f := llmtest.New(t, "sk-acme-secret-1234", "m-own", "m-other")
		e := newAppEnv(t, apptest.New(t, db, app.Config{Egress: apptest.Loopback}), handlers.Config{})
		acme, other := e.workspace("Acme"), e.workspace("Other")
		key, _ := e.key(acme.ID, "models:write")
		otherKey, _ := e.key(other.ID, "models:write")
		post := func(key, path, body string) *response {
			return e.do(request{method: http.MethodPost, path: path, key: key, body: body,
				header: map[string]string{"Content-Type": "application/json"}})
		}
		res := post(key, "/api/v1/model-upstreams",
			fmt.Sprintf(`{"name":"acme","base_url":%q,"api_key":"sk-acme-secret-1234","models":["m-own"]}`, f.URL))
		var up gen.ModelUpstream
		if res.json(t, &up); res.StatusCode != http.StatusCreated || up.ApiKeyLast4 != "1234" || up.Name != "acme" {
			t.Fatalf("create: %d %s", res.StatusCode, res.body)
		}
		var sealed string
		if err := db.Bun().NewSelect().Table("model_upstreams").Column("sealed_key").Where("id = ?", up.Id).Scan(context.Background(), &sealed); err != nil || strings.Contains(sealed, "sk-acme") {
			t.Errorf("stored key %q, %v", sealed, err)
		}
		post(key, "/api/v1/model-upstreams", fmt.Sprintf(`{"name":"acme","base_url":%q}`, f.URL)).problem(t, http.StatusConflict, "conflict")
		post(key, "/api/v1/model-upstreams", `{"name":"lan","base_url":"http://10.1.2.3/v1"}`).problem(t, http.StatusBadRequest, "validation_failed")

		var l modelList
		e.do(request{path: "/api/v1/models", key: key}).json(t, &l)
		if ids := l.ids(); !slices.Equal(ids, []string{"m-own"}) {
			t.Errorf("acme's models = %v", ids)
		}
		e.do(request{path: "/api/v1/models", key: otherKey}).json(t, &l)
		if len(l.Data) != len(modelcatalog.Default().All()) {
			t.Errorf("the other workspace sees %v", l.ids())
		}
		body := `{"model": "m-own", "messages": [{"role": "user", "content": "mine"}]}`
		if res := post(key, "/api/v1/chat/completions", body); res.StatusCode != http.StatusOK || !strings.Contains(string(res.body), "echo: mine") {
			t.Errorf("acme's completion: %d %s", res.StatusCode, res.body)
		}
		post(otherKey, "/api/v1/chat/completions", body).problem(t, http.StatusNotFound, "model_not_found")
		e.do(request{method: http.MethodDelete, path: "/api/v1/model-upstreams/" + up.Id, key: otherKey}).problem(t, http.StatusNotFound, "not_found")

		var ul gen.ModelUpstreamList
		e.do(request{path: "/api/v1/model-upstreams", key: key}).json(t, &ul)
		if len(ul.Data) != 1 || ul.Data[0].Id != up.Id {
			t.Errorf("list = %+v", ul)
		}
		if res := e.do(request{method: http.MethodDelete, path: "/api/v1/model-upstreams/" + up.Id, key: key}); res.StatusCode != http.StatusNoContent {
			t.Fatalf("delete: %d %s", res.StatusCode, res.body)
		}
		e.do(request{path: "/api/v1/models", key: key}).json(t, &l)
		if len(l.Data) != len(modelcatalog.Default().All()) {
			t.Errorf("after the delete acme sees %v", l.ids())
		}
	})
}
