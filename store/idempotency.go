package store

import (
	"context"
	"crypto/rand"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/uptrace/bun"
)

// IdempotencyRecord is what the server knows of one Idempotency-Key of one API key: the request the key was first
// used with (its Fingerprint) and, once that request finished (CompletedAt set), the answer to replay.
type IdempotencyRecord struct {
	bun.BaseModel `bun:"table:idempotency_keys,alias:i"`

	APIKeyID    string `bun:"api_key_id,pk"`
	Key         string `bun:"idempotency_key,pk"`
	Fingerprint string `bun:"fingerprint"`
	// LockToken identifies the attempt that holds the claim; Complete and Release need it.
	LockToken   string     `bun:"lock_token"`
	LockedAt    time.Time  `bun:"locked_at"`
	CreatedAt   time.Time  `bun:"created_at"`
	ExpiresAt   time.Time  `bun:"expires_at"`
	CompletedAt *time.Time `bun:"completed_at"`
	// Response is the stored answer; zero until CompletedAt is set.
	Response IdempotentResponse `bun:"embed:response_"`
}

// IdempotentResponse is an answer stored for replay.
type IdempotentResponse struct {
	// RequestID is the ID of the request that produced the answer.
	RequestID string              `bun:"request_id"`
	Status    int                 `bun:"status"`
	Header    map[string][]string `bun:"headers,type:json"`
	// Body is the body as the caller encoded it for storage (the server seals it).
	Body string `bun:"body"`
}

// NewIdempotencyClaim is what IdempotencyKeys.Claim needs.
type NewIdempotencyClaim struct {
	APIKeyID    string
	Key         string
	Fingerprint string
	// TTL is how long the record (and so the replay) lasts from the claim.
	TTL time.Duration
	// StaleAfter is how long an unfinished claim is honoured: an attempt holding it longer is presumed dead (its
	// process stopped) and the claim may be taken over by a request with the same fingerprint.
	StaleAfter time.Duration
}

// IdempotencyKeys is the repository of Idempotency-Key records, keyed by (API key, Idempotency-Key).
type IdempotencyKeys struct{ db *DB }

// claimAttempts bounds Claim's loop: each round loses only to a concurrent release or expiry of the same key.
const claimAttempts = 5

// Claim takes the key for the request described by n, atomically. It returns claimed=true with the new claim when
// the key was unused, expired (the old record is replaced), or held by an unfinished attempt with the same
// fingerprint for longer than StaleAfter (taken over). The holder must then Complete or Release the claim.
// Otherwise it returns claimed=false and the live record, completed or not, whatever its fingerprint: the caller
// decides between replay, "in progress" and "reused with another request". It never returns an expired record.
// Returns no sentinel error; an API key that does not exist fails on the foreign key.
func (s *IdempotencyKeys) Claim(ctx context.Context, n NewIdempotencyClaim) (IdempotencyRecord, bool, error) {
	for range claimAttempts {
		t := now()
		claim := IdempotencyRecord{
			APIKeyID: n.APIKeyID, Key: n.Key, Fingerprint: n.Fingerprint, LockToken: rand.Text(),
			LockedAt: t, CreatedAt: t, ExpiresAt: t.Add(n.TTL).Truncate(time.Microsecond),
			Response: IdempotentResponse{Header: map[string][]string{}},
		}
		res, err := s.db.w.NewInsert().Model(&claim).On("CONFLICT (api_key_id, idempotency_key) DO NOTHING").Exec(ctx)
		if err := expectOneRow(res, err); !errors.Is(err, ErrNotFound) {
			return claim, err == nil, err
		}
		// Replace an expired record, or take over one whose attempt looks dead. The condition is evaluated on the
		// row as it is when the update runs, so of two concurrent takeovers one wins.
		res, err = s.db.w.NewUpdate().Model(&claim).WherePK().
			Column("fingerprint", "lock_token", "locked_at", "created_at", "expires_at", "completed_at",
				"response_request_id", "response_status", "response_headers", "response_body").
			Where("expires_at <= ? OR (completed_at IS NULL AND fingerprint = ? AND locked_at <= ?)",
				t, n.Fingerprint, t.Add(-n.StaleAfter)).
			Exec(ctx)
		if err := expectOneRow(res, err); !errors.Is(err, ErrNotFound) {
			return claim, err == nil, err
		}
		var live IdempotencyRecord
		err = s.db.r.NewSelect().Model(&live).
			Where("i.api_key_id = ? AND i.idempotency_key = ? AND i.expires_at > ?", n.APIKeyID, n.Key, t).Scan(ctx)
		if errors.Is(err, sql.ErrNoRows) {
			continue // released or expired since the update: claim again
		}
		return live, false, err
	}
	return IdempotencyRecord{}, false, fmt.Errorf("store: idempotency key still contended after %d attempts", claimAttempts)
}

// Complete stores the answer of a claimed request for replay. Returns ErrNotFound if the claim is no longer held
// by this attempt (it was taken over or released), in which case nothing is stored.
func (s *IdempotencyKeys) Complete(ctx context.Context, claim IdempotencyRecord, r IdempotentResponse) error {
	t := now()
	claim.CompletedAt, claim.Response = &t, r
	if claim.Response.Header == nil {
		claim.Response.Header = map[string][]string{}
	}
	res, err := s.db.w.NewUpdate().Model(&claim).WherePK().
		Column("completed_at", "response_request_id", "response_status", "response_headers", "response_body").
		Where("lock_token = ? AND completed_at IS NULL", claim.LockToken).Exec(ctx)
	return expectOneRow(res, err)
}

// Release gives a claimed key up without storing an answer, so that a retry runs the request again. Returns
// ErrNotFound if the claim is no longer held by this attempt; the holder's claim is then left alone.
func (s *IdempotencyKeys) Release(ctx context.Context, claim IdempotencyRecord) error {
	res, err := s.db.w.NewDelete().Table("idempotency_keys").
		Where("api_key_id = ? AND idempotency_key = ? AND lock_token = ? AND completed_at IS NULL",
			claim.APIKeyID, claim.Key, claim.LockToken).Exec(ctx)
	return expectOneRow(res, err)
}

// DeleteExpired deletes at most limit records that expired at or before t, oldest first, and returns how many.
// A record replaced meanwhile by a new claim is not deleted.
func (s *IdempotencyKeys) DeleteExpired(ctx context.Context, t time.Time, limit int64) (int64, error) {
	t = t.UTC()
	oldest := s.db.w.NewSelect().Table("idempotency_keys").Column("api_key_id", "idempotency_key").
		Where("expires_at <= ?", t).OrderExpr("expires_at").Limit(limit)
	// The outer condition is checked again on the row the delete finds, so a record that a concurrent Claim
	// replaced after the subquery read it survives.
	res, err := s.db.w.NewDelete().Table("idempotency_keys").
		Where("(api_key_id, idempotency_key) IN (?) AND expires_at <= ?", oldest, t).Exec(ctx)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}
