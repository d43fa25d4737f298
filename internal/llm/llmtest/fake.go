// Package llmtest is an in-process fake of an OpenAI-compatible server, as OpenAI documents its API: GET /models
// and POST /chat/completions (a JSON completion, or server-sent events ending with "data: [DONE]" when stream is
// true, with a usage chunk when stream_options.include_usage asks), OpenAI's error object, 401 for a wrong key and
// 429 with Retry-After when told to. Its answer to a conversation is "echo: " and the last user message, so that a
// test can tell whose words came back.
package llmtest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
)

// Server is a running fake upstream.
type Server struct {
	URL    string // the base URL, ending in /v1
	Key    string
	Models []string

	mu       sync.Mutex
	requests []map[string]any
	limited  int
	failing  int
	calls    chan map[string]any
}

// New starts a fake upstream that serves models and accepts key; it stops with the test.
func New(t testing.TB, key string, models ...string) *Server {
	s := &Server{Key: key, Models: models, calls: make(chan map[string]any, 100)}
	hs := httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(hs.Close)
	s.URL = hs.URL + "/v1"
	return s
}

// LimitNext makes the next n completions answer 429 with Retry-After: 7.
func (s *Server) LimitNext(n int) { s.mu.Lock(); s.limited = n; s.mu.Unlock() }

// FailNext makes the next n completions answer 500.
func (s *Server) FailNext(n int) { s.mu.Lock(); s.failing = n; s.mu.Unlock() }

// Requests returns the completion request bodies received so far.
func (s *Server) Requests() []map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]map[string]any(nil), s.requests...)
}

// Calls receives each completion request body as it arrives (the channel holds 100).
func (s *Server) Calls() <-chan map[string]any { return s.calls }

// PromptTokens and CompletionTokens are what every completion's usage reports.
const (
	PromptTokens     = 11
	CompletionTokens = 7
)

func openAIError(w http.ResponseWriter, status int, typ, code, message string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{
		"message": message, "type": typ, "param": nil, "code": code}})
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Authorization") != "Bearer "+s.Key {
		openAIError(w, http.StatusUnauthorized, "invalid_request_error", "invalid_api_key", "Incorrect API key provided.")
		return
	}
	switch {
	case r.Method == http.MethodGet && r.URL.Path == "/v1/models":
		data := []map[string]any{}
		for i, m := range s.Models {
			data = append(data, map[string]any{"id": m, "object": "model", "created": 1700000000 + i, "owned_by": "fake-org"})
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"object": "list", "data": data})
	case r.Method == http.MethodPost && r.URL.Path == "/v1/chat/completions":
		s.complete(w, r)
	default:
		openAIError(w, http.StatusNotFound, "invalid_request_error", "unknown_url", "Unknown request URL: "+r.Method+" "+r.URL.Path)
	}
}

func (s *Server) complete(w http.ResponseWriter, r *http.Request) {
	var body map[string]any
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		openAIError(w, http.StatusBadRequest, "invalid_request_error", "", "We could not parse the JSON body of your request.")
		return
	}
	s.mu.Lock()
	s.requests = append(s.requests, body)
	limited, failing := s.limited > 0, s.limited == 0 && s.failing > 0
	if limited {
		s.limited--
	} else if failing {
		s.failing--
	}
	s.mu.Unlock()
	select {
	case s.calls <- body:
	default:
	}
	model, _ := body["model"].(string)
	switch {
	case limited:
		w.Header().Set("Retry-After", "7")
		openAIError(w, http.StatusTooManyRequests, "requests", "rate_limit_exceeded", "Rate limit reached for requests.")
		return
	case failing:
		openAIError(w, http.StatusInternalServerError, "server_error", "", "The server had an error while processing your request.")
		return
	case !slices.Contains(s.Models, model):
		openAIError(w, http.StatusNotFound, "invalid_request_error", "model_not_found",
			fmt.Sprintf("The model `%s` does not exist or you do not have access to it.", model))
		return
	}
	msgs, _ := body["messages"].([]any)
	if len(msgs) == 0 {
		openAIError(w, http.StatusBadRequest, "invalid_request_error", "", "[] is too short - 'messages'")
		return
	}
	if temp, ok := body["temperature"].(float64); ok && (temp < 0 || temp > 2) {
		openAIError(w, http.StatusBadRequest, "invalid_request_error", "",
			fmt.Sprintf("%g is greater than the maximum of 2 - 'temperature'", temp))
		return
	}
	reply := "echo: " + lastUser(msgs)
	usage := map[string]any{"prompt_tokens": PromptTokens, "completion_tokens": CompletionTokens,
		"total_tokens": PromptTokens + CompletionTokens}
	if stream, _ := body["stream"].(bool); stream {
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Set("Cache-Control", "no-cache")
		chunk := func(delta map[string]any, finish any) {
			b, _ := json.Marshal(map[string]any{"id": "chatcmpl-fake", "object": "chat.completion.chunk",
				"created": 1700000000, "model": model,
				"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}}})
			fmt.Fprintf(w, "data: %s\n\n", b)
			w.(http.Flusher).Flush()
		}
		chunk(map[string]any{"role": "assistant", "content": ""}, nil)
		for _, word := range strings.SplitAfter(reply, " ") {
			chunk(map[string]any{"content": word}, nil)
		}
		chunk(map[string]any{}, "stop")
		if opts, _ := body["stream_options"].(map[string]any); opts["include_usage"] == true {
			b, _ := json.Marshal(map[string]any{"id": "chatcmpl-fake", "object": "chat.completion.chunk",
				"created": 1700000000, "model": model, "choices": []any{}, "usage": usage})
			fmt.Fprintf(w, "data: %s\n\n", b)
		}
		fmt.Fprint(w, "data: [DONE]\n\n")
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"id": "chatcmpl-fake", "object": "chat.completion",
		"created": 1700000000, "model": model,
		"choices": []any{map[string]any{"index": 0, "finish_reason": "stop",
			"message": map[string]any{"role": "assistant", "content": reply}}},
		"usage": usage})
}

func lastUser(msgs []any) string {
	for i := len(msgs) - 1; i >= 0; i-- {
		if m, _ := msgs[i].(map[string]any); m["role"] == "user" {
			c, _ := m["content"].(string)
			return c
		}
	}
	return ""
}
