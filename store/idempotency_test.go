package store_test

import (
	"errors"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/switchboard/switchboard/store"
	"github.com/switchboard/switchboard/store/storetest"
)

// idempotencyClaim describes a request for an Idempotency-Key of key: a 24 h record, stale after 2 minutes.
func idempotencyClaim(key store.APIKey, idemKey, fingerprint string) store.NewIdempotencyClaim {
	return store.NewIdempotencyClaim{APIKeyID: key.ID, Key: idemKey, Fingerprint: fingerprint, TTL: 24 * time.Hour,
		StaleAfter: 2 * time.Minute}
}

func claim(t *testing.T, db *store.DB, n store.NewIdempotencyClaim) (store.IdempotencyRecord, bool) {
	t.Helper()
	rec, claimed, err := db.Idempotency.Claim(ctx, n)
	if err != nil {
		t.Fatalf("Claim: %v", err)
	}
	return rec, claimed
}

func TestIdempotencyClaimCompleteReplay(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		_, key := newKey(t, db, newWorkspace(t, db, "Acme").ID, nil)
		n := idempotencyClaim(key, "order-1", "fp-a")
		before := time.Now()
		first, claimed := claim(t, db, n)
		if !claimed || first.LockToken == "" || first.CompletedAt != nil || first.Fingerprint != "fp-a" {
			t.Fatalf("first Claim = %+v, claimed %v; want a fresh claim", first, claimed)
		}
		recent(t, "created_at", first.CreatedAt, before)
		wantTime(t, "expires_at", first.ExpiresAt, first.CreatedAt.Add(24*time.Hour))

		live, claimed := claim(t, db, n)
		if claimed || live.CompletedAt != nil || live.Fingerprint != "fp-a" {
			t.Fatalf("Claim while in progress = %+v, claimed %v; want the unfinished record", live, claimed)
		}
		wantTime(t, "locked_at read back", live.LockedAt, first.LockedAt)

		resp := store.IdempotentResponse{RequestID: "req_1", Status: 201, Body: `{"id":"whk_1"}`,
			Header: map[string][]string{"Content-Type": {"application/json"}, "Location": {"/api/v1/webhooks/whk_1"}}}
		if err := db.Idempotency.Complete(ctx, first, resp); err != nil {
			t.Fatalf("Complete: %v", err)
		}
		done, claimed := claim(t, db, n)
		if claimed || done.CompletedAt == nil || !reflect.DeepEqual(done.Response, resp) {
			t.Fatalf("Claim after Complete = %+v, claimed %v; want the stored response %+v", done, claimed, resp)
		}
		recent(t, "completed_at", *done.CompletedAt, before)
		if err := db.Idempotency.Complete(ctx, first, resp); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("second Complete = %v, want ErrNotFound", err)
		}
		if err := db.Idempotency.Release(ctx, first); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("Release after Complete = %v, want ErrNotFound (a stored answer stays)", err)
		}

		other, claimed := claim(t, db, idempotencyClaim(key, "order-1", "fp-b"))
		if claimed || other.Fingerprint != "fp-a" {
			t.Errorf("Claim with another fingerprint = %+v, claimed %v; want the original record", other, claimed)
		}
	})
}

func TestIdempotencyKeysArePerAPIKey(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		ws := newWorkspace(t, db, "Acme").ID
		_, a := newKey(t, db, ws, nil)
		_, b := newKey(t, db, ws, nil)
		if _, claimed := claim(t, db, idempotencyClaim(a, "same", "fp")); !claimed {
			t.Fatal("first key did not claim")
		}
		if _, claimed := claim(t, db, idempotencyClaim(b, "same", "fp")); !claimed {
			t.Error("another API key's Idempotency-Key collided with the first key's")
		}
	})
}

func TestIdempotencyRelease(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		_, key := newKey(t, db, newWorkspace(t, db, "Acme").ID, nil)
		n := idempotencyClaim(key, "retry-me", "fp")
		first, _ := claim(t, db, n)
		if err := db.Idempotency.Release(ctx, first); err != nil {
			t.Fatalf("Release: %v", err)
		}
		second, claimed := claim(t, db, n)
		if !claimed || second.LockToken == first.LockToken {
			t.Fatalf("Claim after Release = %+v, claimed %v; want a new claim", second, claimed)
		}
		if err := db.Idempotency.Release(ctx, first); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("Release of a released claim = %v, want ErrNotFound", err)
		}
		if _, claimed := claim(t, db, n); claimed {
			t.Error("the old attempt's Release deleted the new claim")
		}
	})
}

// An attempt that holds a claim longer than StaleAfter is presumed dead: a request with the same fingerprint takes
// the claim over, and the old attempt can neither store its answer nor delete the new claim.
func TestIdempotencyStaleTakeover(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		_, key := newKey(t, db, newWorkspace(t, db, "Acme").ID, nil)
		old, _ := claim(t, db, idempotencyClaim(key, "slow", "fp"))

		stale := idempotencyClaim(key, "slow", "other-fp")
		stale.StaleAfter = 0
		if rec, claimed := claim(t, db, stale); claimed || rec.LockToken != old.LockToken {
			t.Fatalf("a stale claim was taken over by a different request: %+v", rec)
		}
		stale.Fingerprint = "fp"
		taken, claimed := claim(t, db, stale)
		if !claimed || taken.LockToken == old.LockToken {
			t.Fatalf("stale claim not taken over: %+v, claimed %v", taken, claimed)
		}
		if err := db.Idempotency.Complete(ctx, old, store.IdempotentResponse{Status: 201}); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("old attempt's Complete = %v, want ErrNotFound", err)
		}
		if err := db.Idempotency.Release(ctx, old); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("old attempt's Release = %v, want ErrNotFound", err)
		}
		resp := store.IdempotentResponse{RequestID: "req_2", Status: 200, Header: map[string][]string{}, Body: "{}"}
		if err := db.Idempotency.Complete(ctx, taken, resp); err != nil {
			t.Fatalf("new attempt's Complete: %v", err)
		}
		if rec, claimed := claim(t, db, stale); claimed || rec.CompletedAt == nil || rec.Response.RequestID != "req_2" {
			t.Errorf("a completed record was taken over as stale: %+v, claimed %v", rec, claimed)
		}
	})
}

// An expired record is as good as absent: Claim replaces it, whatever its fingerprint or state.
func TestIdempotencyExpiredRecordIsReplaced(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		_, key := newKey(t, db, newWorkspace(t, db, "Acme").ID, nil)
		short := idempotencyClaim(key, "old", "fp-a")
		short.TTL = 0
		first, _ := claim(t, db, short)
		resp := store.IdempotentResponse{RequestID: "req_1", Status: 201, Header: map[string][]string{"Location": {"/x"}}, Body: "{}"}
		if err := db.Idempotency.Complete(ctx, first, resp); err != nil {
			t.Fatal(err)
		}
		again, claimed := claim(t, db, idempotencyClaim(key, "old", "fp-b"))
		if !claimed || again.Fingerprint != "fp-b" || again.CompletedAt != nil {
			t.Fatalf("Claim over an expired record = %+v, claimed %v; want a fresh claim", again, claimed)
		}
		live, _ := claim(t, db, idempotencyClaim(key, "old", "fp-b"))
		if live.CompletedAt != nil || live.Response.Status != 0 || len(live.Response.Header) != 0 || live.Response.Body != "" {
			t.Errorf("the replaced record kept the old answer: %+v", live.Response)
		}
		if err := db.Idempotency.Complete(ctx, first, resp); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("Complete of the replaced claim = %v, want ErrNotFound", err)
		}
	})
}

func TestIdempotencyDeleteExpired(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		_, key := newKey(t, db, newWorkspace(t, db, "Acme").ID, nil)
		for _, k := range []string{"a", "b", "c"} {
			n := idempotencyClaim(key, k, "fp")
			n.TTL = 0
			claim(t, db, n)
		}
		claim(t, db, idempotencyClaim(key, "live", "fp"))
		cutoff := time.Now()
		for _, want := range []int64{2, 1, 0} {
			n, err := db.Idempotency.DeleteExpired(ctx, cutoff, 2)
			if err != nil || n != want {
				t.Fatalf("DeleteExpired = %d, %v; want %d", n, err, want)
			}
		}
		if rec, claimed := claim(t, db, idempotencyClaim(key, "live", "fp")); claimed || rec.Key != "live" {
			t.Errorf("DeleteExpired deleted a live record: claimed %v", claimed)
		}
		if _, claimed := claim(t, db, idempotencyClaim(key, "a", "fp")); !claimed {
			t.Error("an expired record survived DeleteExpired")
		}
	})
}

// Of many concurrent requests with the same key exactly one gets the claim; the others see its record.
func TestIdempotencyConcurrentClaims(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		_, key := newKey(t, db, newWorkspace(t, db, "Acme").ID, nil)
		var (
			wg      sync.WaitGroup
			mu      sync.Mutex
			claimed int
			tokens  = map[string]bool{}
		)
		for range 20 {
			wg.Go(func() {
				rec, ok, err := db.Idempotency.Claim(ctx, idempotencyClaim(key, "race", "fp"))
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					t.Errorf("Claim: %v", err)
					return
				}
				if ok {
					claimed++
				}
				tokens[rec.LockToken] = true
			})
		}
		wg.Wait()
		if claimed != 1 || len(tokens) != 1 {
			t.Errorf("%d claims and %d lock tokens, want 1 and 1", claimed, len(tokens))
		}
	})
}
