package handlers

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/switchboard/switchboard/gen"
	"github.com/switchboard/switchboard/internal/apikey"
	"github.com/switchboard/switchboard/store"
	"github.com/switchboard/switchboard/store/storetest"
)

// slugServer is a server whose generated slugs are drawn from draws, in order (the last one repeated), with a
// links:write key of a workspace.
type slugServer struct {
	t     *testing.T
	s     *Server
	key   string
	drawn int
}

func newSlugServer(t *testing.T) *slugServer {
	t.Helper()
	db := storetest.SQLite(t)
	s, err := New(Config{BaseURL: "http://sb.test", Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, db)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	ctx := context.Background()
	ws, err := db.Workspaces.Create(ctx, "Slugs")
	if err != nil {
		t.Fatal(err)
	}
	secret, err := apikey.Generate()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.APIKeys.Create(ctx, store.NewAPIKey{WorkspaceID: ws.ID, Name: "test key", SecretHash: secret.Hash,
		DisplayPrefix: secret.DisplayPrefix, Last4: secret.Last4, Scopes: []string{"links:write"}, CreatedBy: "test"}); err != nil {
		t.Fatal(err)
	}
	return &slugServer{t: t, s: s, key: secret.Plain}
}

// draw makes the server draw these slugs, in order, the last one for ever after.
func (ss *slugServer) draw(slugs ...string) {
	ss.drawn = 0
	ss.s.links.drawSlug = func() string {
		slug := slugs[min(ss.drawn, len(slugs)-1)]
		ss.drawn++
		return slug
	}
}

func (ss *slugServer) post(path, body string, out any) int {
	ss.t.Helper()
	req := httptest.NewRequest(http.MethodPost, path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+ss.key)
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	ss.s.ServeHTTP(rec, req)
	if err := json.Unmarshal(rec.Body.Bytes(), out); err != nil {
		ss.t.Fatalf("%s: %d %s", path, rec.Code, rec.Body)
	}
	return rec.Code
}

// A generated slug that collides is drawn again; when every draw collides the create fails with slug_taken.
func TestGeneratedSlugRedraw(t *testing.T) {
	ss := newSlugServer(t)
	var l gen.Link
	if code := ss.post("/api/v1/links", `{"destination_url":"https://example.com","slug":"taken7"}`, &l); code != http.StatusCreated {
		t.Fatalf("custom slug: %d", code)
	}

	ss.draw("taken7", "TAKEN7", "fresh7")
	if code := ss.post("/api/v1/links", `{"destination_url":"https://example.com/a"}`, &l); code != http.StatusCreated || l.Slug != "fresh7" {
		t.Errorf("after two collisions: %d %+v, want slug fresh7", code, l)
	}
	if ss.drawn != 3 {
		t.Errorf("%d draws, want 3", ss.drawn)
	}

	ss.draw("taken7")
	var p gen.Problem
	if code := ss.post("/api/v1/links", `{"destination_url":"https://example.com/b"}`, &p); code != http.StatusConflict || p.Code != "slug_taken" {
		t.Errorf("every draw taken: %d %+v, want 409 slug_taken", code, p)
	}
	if ss.drawn != maxSlugAttempts {
		t.Errorf("%d draws, want maxSlugAttempts (%d)", ss.drawn, maxSlugAttempts)
	}

	// In a bulk request the redraw concerns only the items that collided, and two items of one request that drew
	// the same slug are a collision too.
	ss.draw("bulk7", "bulk7", "fresh7", "bulk8")
	var res gen.LinkBulkResult
	if code := ss.post("/api/v1/links/bulk", `{"links":[{"destination_url":"https://example.com/c"},
		{"destination_url":"https://example.com/d"}]}`, &res); code != http.StatusOK || res.Created != 2 {
		t.Fatalf("bulk: %d %+v", code, res)
	}
	if a, b := res.Data[0].Link, res.Data[1].Link; a == nil || b == nil || a.Slug != "bulk7" || b.Slug != "bulk8" {
		t.Errorf("bulk slugs: %+v", res.Data)
	}
}
