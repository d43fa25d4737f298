package llm_test

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/switchboard/switchboard/internal/app/apptest"
	"github.com/switchboard/switchboard/internal/egress"
	"github.com/switchboard/switchboard/internal/llm"
	"github.com/switchboard/switchboard/internal/llm/llmtest"
)

func TestParseUpstreams(t *testing.T) {
	ups, err := llm.ParseUpstreams(`[{"name": "local", "base_url": "http://127.0.0.1:11434/v1/", "api_key": "k", "models": ["a"]}]`)
	if err != nil || len(ups) != 1 || ups[0].BaseURL != "http://127.0.0.1:11434/v1" || !slices.Equal(ups[0].Models, []string{"a"}) {
		t.Fatalf("ParseUpstreams = %+v, %v", ups, err)
	}
	path := filepath.Join(t.TempDir(), "upstreams.yaml")
	if err := os.WriteFile(path, []byte("upstreams:\n  - name: openai\n    base_url: https://api.openai.com/v1\n    api_key: sk-x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if ups, err := llm.ParseUpstreams(path); err != nil || len(ups) != 1 || ups[0].Name != "openai" {
		t.Fatalf("from a file: %+v, %v", ups, err)
	}
	for _, bad := range []string{
		`[{"name": "Bad Name", "base_url": "https://x"}]`,
		`[{"name": "a", "base_url": "ftp://x"}]`,
		`[{"name": "a", "base_url": "https://u:p@x"}]`,
		`[{"name": "a", "base_url": "https://x"}, {"name": "a", "base_url": "https://y"}]`,
		`[{"name": "a", "base_url": "https://x", "apikey": "misspelt"}]`,
		filepath.Join(t.TempDir(), "missing.json"),
	} {
		if _, err := llm.ParseUpstreams(bad); err == nil {
			t.Errorf("ParseUpstreams(%s) accepted it", bad)
		}
	}
	// The key never shows in what is logged of an upstream.
	if b, _ := ups[0].MarshalJSON(); strings.Contains(string(b), "k\"") || strings.Contains(ups[0].String(), "api_key") {
		t.Errorf("key shown: %s", b)
	}
}

func service(t *testing.T, limits llm.Limits, ups ...llm.Upstream) *llm.Service {
	return llm.New(llm.Config{Upstreams: ups, Client: egress.NewGuard(apptest.Loopback).Client(time.Minute), Limits: limits})
}

func TestModelsOfEveryUpstreamNarrowedToTheAllowList(t *testing.T) {
	a := llmtest.New(t, "ka", "alpha", "beta", "bad/name")
	b := llmtest.New(t, "kb", "beta", "gamma", "delta")
	s := service(t, llm.Limits{},
		llm.Upstream{Name: "a", BaseURL: a.URL, APIKey: "ka"},
		llm.Upstream{Name: "b", BaseURL: b.URL, APIKey: "kb", Models: []string{"beta", "gamma"}},
		llm.Upstream{Name: "wrongkey", BaseURL: b.URL, APIKey: "nope"})
	var got []string
	for _, m := range s.Models(context.Background(), "") {
		got = append(got, m.ID+"@"+m.Upstream+"/"+m.OwnedBy)
	}
	want := []string{"alpha@a/fake-org", "beta@a/fake-org", "gamma@b/fake-org"}
	if !slices.Equal(got, want) {
		t.Fatalf("models = %v, want %v", got, want)
	}
	if _, u, ok := s.Lookup(context.Background(), "", "gamma"); !ok || u.Name != "b" {
		t.Errorf("Lookup(gamma) = %v, %v", u, ok)
	}
}

func TestCompleteCountsUsageAndKeepsLimits(t *testing.T) {
	f := llmtest.New(t, "k", "m1")
	s := service(t, llm.Limits{RequestsPerMinute: 3, TokensPerDay: 3 * (llmtest.PromptTokens + llmtest.CompletionTokens)},
		llm.Upstream{Name: "f", BaseURL: f.URL, APIKey: "k"})
	ctx := context.Background()
	read := func(body string) (string, error) {
		c, err := s.Complete(ctx, "ws1", []byte(body))
		if err != nil {
			return "", err
		}
		b, _ := io.ReadAll(c.Body)
		c.Body.Close()
		return string(b), nil
	}
	out, err := read(`{"model": "m1", "messages": [{"role": "user", "content": "hi"}]}`)
	if err != nil || !strings.Contains(out, `"echo: hi"`) {
		t.Fatalf("completion = %s, %v", out, err)
	}
	out, err = read(`{"model": "m1", "stream": true, "messages": [{"role": "user", "content": "hi there"}]}`)
	if err != nil || !strings.Contains(out, `"there"`) || !strings.HasSuffix(out, "data: [DONE]\n\n") {
		t.Fatalf("stream = %s, %v", out, err)
	}
	if opts := f.Requests()[1]["stream_options"]; opts == nil {
		t.Errorf("a stream did not ask for usage: %v", f.Requests()[1])
	}
	if req, tokens := s.Used("ws1"); req != 2 || tokens != 2*(llmtest.PromptTokens+llmtest.CompletionTokens) {
		t.Errorf("used %d requests, %d tokens", req, tokens)
	}
	if _, err := read(`{"model": "m1", "messages": [{"role": "user", "content": "3"}]}`); err != nil {
		t.Fatal(err)
	}
	var le *llm.LimitError
	if _, err := read(`{"model": "m1", "messages": [{"role": "user", "content": "4"}]}`); !errors.As(err, &le) ||
		!slices.Contains(le.Policies, llm.PolicyRequestsMinute) || !slices.Contains(le.Policies, llm.PolicyTokensDay) || le.RetryAfter <= 0 {
		t.Fatalf("fourth request: %v", err)
	}
	// Another workspace has its own quota.
	if _, err := read(`{"model": "m1", "messages": [{"role": "user", "content": "hi"}]}`); err == nil {
		t.Fatal("ws1 still admitted")
	}
	if c, err := s.Complete(ctx, "ws2", []byte(`{"model": "m1", "messages": [{"role": "user", "content": "x"}]}`)); err != nil {
		t.Fatalf("ws2: %v", err)
	} else {
		c.Body.Close()
	}
	if _, err := s.Complete(ctx, "ws2", []byte(`{"model": "gpt-9", "messages": []}`)); !errors.Is(err, llm.ErrModelNotFound) {
		t.Errorf("unknown model: %v", err)
	}
}

func TestUpstreamErrors(t *testing.T) {
	f := llmtest.New(t, "k", "m1")
	s := service(t, llm.Limits{}, llm.Upstream{Name: "f", BaseURL: f.URL, APIKey: "k"},
		llm.Upstream{Name: "dead", BaseURL: "http://127.0.0.1:1/v1"})
	ctx := context.Background()
	var ue *llm.UpstreamError
	_, err := s.Complete(ctx, "ws", []byte(`{"model": "m1", "messages": []}`))
	if !errors.As(err, &ue) || !ue.Rejected || ue.Message != "[] is too short - 'messages'" {
		t.Errorf("invalid request: %#v", err)
	}
	f.LimitNext(1)
	_, err = s.Complete(ctx, "ws", []byte(`{"model": "m1", "messages": [{"role": "user", "content": "x"}]}`))
	if !errors.As(err, &ue) || ue.Status != 429 || ue.RetryAfter != 7*time.Second {
		t.Errorf("limited: %#v", err)
	}
	f.FailNext(1)
	_, err = s.Complete(ctx, "ws", []byte(`{"model": "m1", "messages": [{"role": "user", "content": "x"}]}`))
	if !errors.As(err, &ue) || ue.Rejected || ue.Status != 500 {
		t.Errorf("failing: %#v", err)
	}
}
