package handlers_test

import (
	"io"
	"net/http"
	"slices"
	"strings"
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
