package idempotency

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"testing"

	"github.com/uptrace/bun"

	"github.com/switchboard/switchboard/internal/apikey"
	"github.com/switchboard/switchboard/internal/await"
	"github.com/switchboard/switchboard/internal/sealbox"
	"github.com/switchboard/switchboard/store"
	"github.com/switchboard/switchboard/store/storetest"
)

func TestMain(m *testing.M) { storetest.Main(m) }

var ctx = context.Background()

func newService(t *testing.T, db *store.DB) *Service {
	t.Helper()
	box, err := sealbox.New(bytes.Repeat([]byte{7}, 32))
	if err != nil {
		t.Fatal(err)
	}
	return New(db, box, slog.New(slog.NewTextHandler(io.Discard, nil)))
}

// apiKey makes a workspace and an API key: records belong to a key.
func apiKey(t *testing.T, db *store.DB) string {
	t.Helper()
	ws, err := db.Workspaces.Create(ctx, "Idempotency")
	if err != nil {
		t.Fatal(err)
	}
	secret, err := apikey.Generate()
	if err != nil {
		t.Fatal(err)
	}
	k, err := db.APIKeys.Create(ctx, store.NewAPIKey{WorkspaceID: ws.ID, Name: "idempotency", SecretHash: secret.Hash,
		DisplayPrefix: secret.DisplayPrefix, Last4: secret.Last4, Scopes: []string{"webhooks:write"}, CreatedBy: "test"})
	if err != nil {
		t.Fatal(err)
	}
	return k.ID
}

// The first request runs; while it does, a retry is told it is in progress; its answer is then replayed to the
// same request, refused to another with the same key, and stored sealed (a secret shown once never rests in
// clear). An answer that is no outcome (5xx, 409, 429) gives the key back: the retry runs.
func TestVerdicts(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		s := newService(t, db)
		key := apiKey(t, db)
		req := Request{APIKeyID: key, Key: "order-1", Method: http.MethodPost, Path: "/api/v1/webhooks", Body: []byte(`{"url":"x"}`)}
		first, err := s.Begin(ctx, req)
		if err != nil || first.Verdict != Run {
			t.Fatalf("first: %+v %v", first, err)
		}
		if c, _ := s.Begin(ctx, req); c.Verdict != InProgress {
			t.Fatalf("while it runs: %v", c.Verdict)
		}
		answer := Answer{Status: 201, Header: map[string][]string{"Location": {"/api/v1/webhooks/whk_1"}},
			Body: []byte(`{"secret":"whsec_shown_once"}`), RequestID: "req_1"}
		if err := s.Finish(ctx, first, answer); err != nil {
			t.Fatal(err)
		}
		c, err := s.Begin(ctx, req)
		if err != nil || c.Verdict != Replay || c.Answer.Status != 201 || string(c.Answer.Body) != string(answer.Body) ||
			c.Answer.RequestID != "req_1" || c.Answer.Header["Location"][0] != "/api/v1/webhooks/whk_1" {
			t.Fatalf("retry: %+v %v", c, err)
		}
		other := req
		other.Body = []byte(`{"url":"y"}`)
		if c, _ := s.Begin(ctx, other); c.Verdict != Reused {
			t.Fatalf("another request with the key: %v", c.Verdict)
		}
		var stored []byte
		if err := db.Bun().NewSelect().Table("idempotency_keys").Column("response_body").Where("api_key_id = ?", key).
			Scan(ctx, &stored); err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(stored, []byte("whsec_shown_once")) {
			t.Error("the stored answer holds the secret in clear")
		}

		for _, status := range []int{500, 409, 429} {
			r := req
			r.Key = "busy-" + http.StatusText(status)
			c, _ := s.Begin(ctx, r)
			if err := s.Finish(ctx, c, Answer{Status: status}); err != nil {
				t.Fatal(err)
			}
			if again, _ := s.Begin(ctx, r); again.Verdict != Run {
				t.Errorf("after a %d the retry gets %v, want Run", status, again.Verdict)
			}
		}
	})
}

// Every PruneEvery claims, the service asks the pruning job to delete expired records (of any API key); the job
// finishes a delete it started when it is stopped.
func TestPrunesExpiredRecords(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		s := newService(t, db)
		k, other := apiKey(t, db), apiKey(t, db)
		for _, key := range []string{k, other} {
			if _, _, err := db.Idempotency.Claim(ctx, store.NewIdempotencyClaim{APIKeyID: key, Key: "old", Fingerprint: "fp"}); err != nil {
				t.Fatal(err)
			}
		}
		count := func() int {
			n, err := db.Bun().NewSelect().Table("idempotency_keys").Where("idempotency_key = ?", "old").
				Where("api_key_id IN (?)", bun.In([]string{k, other})).Count(ctx)
			if err != nil {
				t.Fatal(err)
			}
			return int(n)
		}
		s.claims.Store(PruneEvery - 2)
		begin := func(key string) {
			if c, err := s.Begin(ctx, Request{APIKeyID: k, Key: key, Method: http.MethodPost, Path: "/x"}); err != nil || c.Verdict != Run {
				t.Fatalf("%s: %+v %v", key, c, err)
			}
		}
		begin("new-1")
		if len(s.pruneDue) != 0 {
			t.Fatal("a delete was asked for before the pruning claim")
		}
		begin("new-2")
		if len(s.pruneDue) != 1 {
			t.Fatal("the pruning claim asked for no delete")
		}
		jobCtx, stop := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- s.RunPruning(jobCtx) }()
		await.Equal(t, "the pruning job to take the request for a delete", func() int { return len(s.pruneDue) }, 0)
		stop()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if n := count(); n != 0 {
			t.Errorf("%d expired records left after the pruning job's delete", n)
		}
	})
}

// A fingerprint changes with each of method, path, query and body, and parts cannot be shifted into each other.
func TestFingerprint(t *testing.T) {
	base := Fingerprint("POST", "/a", "q=1", []byte("b"))
	for name, fp := range map[string]string{
		"method": Fingerprint("PATCH", "/a", "q=1", []byte("b")), "path": Fingerprint("POST", "/b", "q=1", []byte("b")),
		"query": Fingerprint("POST", "/a", "q=2", []byte("b")), "body": Fingerprint("POST", "/a", "q=1", []byte("c")),
		"shifted": Fingerprint("POST", "/aq=1", "", []byte("b")),
	} {
		if fp == base {
			t.Errorf("%s: same fingerprint", name)
		}
	}
}
