package store_test

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/uptrace/bun"

	"github.com/switchboard/switchboard/store"
	"github.com/switchboard/switchboard/store/storetest"
)

func newSource(t *testing.T, db *store.DB, workspaceID, tokenHash string) store.Source {
	t.Helper()
	src := store.Source{WorkspaceID: workspaceID, Name: "s", EventType: "custom.a.b", TokenHash: tokenHash,
		TokenLast4: "abcd", Verification: store.SourceVerification{Scheme: "none"}, DedupWindowSeconds: 60,
		MaxBodyBytes: 1024, RatePerMinute: 60}
	if err := db.Sources.Create(ctx, db.Bun(), &src); err != nil {
		t.Fatal(err)
	}
	return src
}

// Tokens are found by hash, the previous one only within its grace period; a source of another workspace is not.
func TestSourcesByTokenAndRotation(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		ws, _ := db.Workspaces.Create(ctx, "A")
		other, _ := db.Workspaces.Create(ctx, "B")
		src := newSource(t, db, ws.ID, "hash-1")
		if got, err := db.Sources.ByToken(ctx, "hash-1"); err != nil || got.ID != src.ID || got.CreatedAt.Location() != time.UTC {
			t.Fatalf("by token: %+v %v", got, err)
		}
		if _, err := db.Sources.Get(ctx, other.ID, src.ID); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("another workspace's source: %v", err)
		}
		if _, err := db.Sources.RotateToken(ctx, ws.ID, src.ID, "hash-2", "wxyz", time.Now().Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
		for _, h := range []string{"hash-1", "hash-2"} {
			if _, err := db.Sources.ByToken(ctx, h); err != nil {
				t.Errorf("%s during grace: %v", h, err)
			}
		}
		if _, err := db.Sources.RotateToken(ctx, ws.ID, src.ID, "hash-3", "wxyz", time.Now().Add(-time.Second)); err != nil {
			t.Fatal(err)
		}
		if _, err := db.Sources.ByToken(ctx, "hash-2"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("expired previous token: %v", err)
		}
		if _, err := db.Sources.RotateToken(ctx, other.ID, src.ID, "hash-4", "wxyz", time.Now()); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("rotate another workspace's source: %v", err)
		}
	})
}

// A de-duplication key is claimed once within its window; an expired one is claimed anew.
func TestSourceDedupKeys(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		ws, _ := db.Workspaces.Create(ctx, "A")
		src := newSource(t, db, ws.ID, "h")
		claim := func(key, ev string, window time.Duration) (string, bool) {
			t.Helper()
			var first string
			var dup bool
			err := db.RunInTx(ctx, func(ctx2 context.Context, tx bun.Tx) error {
				var err error
				first, dup, err = db.SourceRequests.ClaimDedupKey(ctx2, tx, src.ID, key, ev, window)
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
			return first, dup
		}
		if first, dup := claim("k", "evt_1", time.Hour); dup || first != "evt_1" {
			t.Errorf("first claim: %s %v", first, dup)
		}
		if first, dup := claim("k", "evt_2", time.Hour); !dup || first != "evt_1" {
			t.Errorf("second claim: %s %v", first, dup)
		}
		if first, dup := claim("short", "evt_3", -time.Second); dup || first != "evt_3" {
			t.Errorf("claim of an already expired key: %s %v", first, dup)
		}
		if first, dup := claim("short", "evt_4", time.Hour); dup || first != "evt_4" {
			t.Errorf("reclaim after expiry: %s %v", first, dup)
		}
		if n, err := db.SourceRequests.PruneDedupKeys(ctx, 10); err != nil || n != 0 {
			t.Errorf("prune: %d %v", n, err)
		}
	})
}

// Prune keeps the newest requests of each source.
func TestSourceRequestsPrune(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		ws, _ := db.Workspaces.Create(ctx, "A")
		a, b := newSource(t, db, ws.ID, "ha"), newSource(t, db, ws.ID, "hb")
		for i := range 5 {
			for _, src := range []store.Source{a, b} {
				r := store.SourceRequest{SourceID: src.ID, WorkspaceID: ws.ID, ReceivedAt: time.Now(), Method: "POST",
					Outcome: store.SourceRequestAccepted, Status: 200, Headers: map[string]string{"N": string(rune('0' + i))}}
				if err := db.SourceRequests.Insert(ctx, nil, &r); err != nil {
					t.Fatal(err)
				}
			}
		}
		if n, err := db.SourceRequests.Prune(ctx, 2, 100); err != nil || n != 6 {
			t.Fatalf("pruned %d, %v", n, err)
		}
		for _, src := range []store.Source{a, b} {
			rs, _, err := db.SourceRequests.List(ctx, ws.ID, src.ID, "", store.Page{Limit: 10})
			if err != nil || len(rs) != 2 || rs[0].Headers["N"] != "4" || rs[1].Headers["N"] != "3" {
				t.Errorf("kept %+v %v", rs, err)
			}
		}
	})
}

// A request's body excerpt is kept as the bytes that came in, whatever they are: U+0000, bytes that are not UTF-8,
// quotes and backslashes go into the log and come back unchanged, and a header value with them cannot fail the write.
func TestSourceRequestsKeepAnyBytes(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		ws, _ := db.Workspaces.Create(ctx, "A")
		src := newSource(t, db, ws.ID, "hx")
		body := []byte("a\x00b\xff\xfe'\"\\x00\\\\'';--\x00")
		r := store.SourceRequest{SourceID: src.ID, WorkspaceID: ws.ID, ReceivedAt: time.Now(), Method: "POST",
			Outcome: store.SourceRequestRefused, Status: 400, Headers: map[string]string{"X-Odd": "\xff\x00"},
			BodyExcerpt: body}
		if err := db.SourceRequests.Insert(ctx, nil, &r); err != nil {
			t.Fatal(err)
		}
		rs, _, err := db.SourceRequests.List(ctx, ws.ID, src.ID, "", store.Page{Limit: 10})
		if err != nil || len(rs) != 1 || !bytes.Equal(rs[0].BodyExcerpt, body) {
			t.Fatalf("read back %+v, %v; want the excerpt %q", rs, err, body)
		}
	})
}
