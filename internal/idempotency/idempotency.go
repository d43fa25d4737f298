// Package idempotency keeps the answers of requests sent with an Idempotency-Key: the first answer is stored per
// (API key, Idempotency-Key) for 24 hours and given to a retry of the same request; a retry of another request, or
// one that comes while the first still runs, is told so. It knows requests as bytes and answers as a status,
// headers and a body; the HTTP middleware that reads and writes them lives in handlers.
package idempotency

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/switchboard/switchboard/internal/sealbox"
	"github.com/switchboard/switchboard/store"
)

const (
	// TTL is how long an answer is kept and replayed.
	TTL = 24 * time.Hour
	// StaleAfter is how long a claim is honoured while its request runs. Requests end long before (the HTTP server's
	// write timeout is 60 s); a claim older than this belongs to a process that died, and a retry takes it over
	// rather than being told "in progress" until the record expires.
	StaleAfter = 2 * time.Minute
	// Expired records are deleted as keys are used: after every PruneEvery claims of this process, up to
	// pruneBatch of them, by the pruning job (RunPruning, one delete at a time), so no request waits for it.
	// Deleting ten times as many as were claimed keeps up with any traffic, and each delete is short (the SQLite
	// writer is never held for long). When traffic stops, at most PruneEvery expired rows wait for the next
	// requests; they are never replayed (a claim ignores expired records).
	PruneEvery = 100
	pruneBatch = 1000
)

// ErrClaimLost is returned by Finish when the request outlived its claim: another attempt took the key over after
// StaleAfter, and this answer is not stored.
var ErrClaimLost = errors.New("the request outlived its Idempotency-Key claim: another attempt took it over")

// Service stores and replays answers. Make one with New.
type Service struct {
	keys *store.IdempotencyKeys
	// box seals stored bodies with the server key: an answer may carry a secret shown once (a webhook's signing
	// secret), which must not rest in clear in the database for a day.
	box    *sealbox.Box
	log    *slog.Logger
	claims atomic.Uint64
	// pruneDue tells the pruning job that PruneEvery more claims were made. It holds one signal: claims made while
	// a delete runs ask for one more delete, not for one each.
	pruneDue chan struct{}
}

// New makes the service over the store's idempotency keys, sealing stored bodies with box.
func New(db *store.DB, box *sealbox.Box, log *slog.Logger) *Service {
	return &Service{keys: db.Idempotency, box: box, log: log, pruneDue: make(chan struct{}, 1)}
}

// Request is a request sent with an Idempotency-Key, authenticated by the API key APIKeyID.
type Request struct {
	APIKeyID, Key string
	// Method, Path (escaped, as sent), Query and Body make its fingerprint: a retry must repeat all four.
	Method, Path, Query string
	Body                []byte
}

// Answer is what a request answered: its status, the headers that describe the body, the body and the ID of the
// request that produced it.
type Answer struct {
	Status    int
	Header    map[string][]string
	Body      []byte
	RequestID string
}

// Verdict is what Begin says of a request.
type Verdict int

const (
	// Run: the request holds the key; run it, then Finish.
	Run Verdict = iota
	// Replay: the key's answer is Claim.Answer.
	Replay
	// Reused: the key was used with another request in the last 24 hours.
	Reused
	// InProgress: a request with this key still runs.
	InProgress
)

// Claim is Begin's verdict, with the stored answer of a Replay.
type Claim struct {
	Verdict Verdict
	Answer  Answer
	record  store.IdempotencyRecord
}

// Begin claims the request's key or finds what it answered before.
func (s *Service) Begin(ctx context.Context, r Request) (Claim, error) {
	fp := Fingerprint(r.Method, r.Path, r.Query, r.Body)
	rec, claimed, err := s.keys.Claim(ctx, store.NewIdempotencyClaim{
		APIKeyID: r.APIKeyID, Key: r.Key, Fingerprint: fp, TTL: TTL, StaleAfter: StaleAfter,
	})
	switch {
	case err != nil:
		return Claim{}, fmt.Errorf("claim idempotency key: %w", err)
	case claimed:
		s.countClaim()
		return Claim{Verdict: Run, record: rec}, nil
	case rec.Fingerprint != fp:
		return Claim{Verdict: Reused}, nil
	case rec.CompletedAt == nil:
		return Claim{Verdict: InProgress}, nil
	}
	body, err := s.box.Open(rec.Response.Body, sealedFor(rec))
	if err != nil {
		return Claim{}, fmt.Errorf("open the stored answer of an idempotent request (was the server key changed?): %w", err)
	}
	return Claim{Verdict: Replay, Answer: Answer{Status: rec.Response.Status, Header: rec.Response.Header, Body: body,
		RequestID: rec.Response.RequestID}}, nil
}

// Storable reports whether an answer is the outcome of the request, replayed to its retries: 2xx and 4xx, except
// 409 and 429, which say "not now" (a concurrent change, a rate limit); and not 5xx, where the server failed and a
// retry should run the request again.
func Storable(status int) bool {
	return status < 500 && status != http.StatusConflict && status != http.StatusTooManyRequests
}

// Finish ends a request that Begin let Run: its answer is stored when Storable, else the claim is given up so a
// retry runs the request again. Call it even when the client has gone away: the work is done, and its retry must
// find it.
func (s *Service) Finish(ctx context.Context, c Claim, a Answer) error {
	if !Storable(a.Status) {
		return s.Release(ctx, c)
	}
	err := s.keys.Complete(ctx, c.record, store.IdempotentResponse{
		RequestID: a.RequestID, Status: a.Status, Header: a.Header, Body: s.box.Seal(a.Body, sealedFor(c.record)),
	})
	if errors.Is(err, store.ErrNotFound) {
		return ErrClaimLost
	}
	return err
}

// Release gives a claim up (the request panicked, or its answer is not an outcome).
func (s *Service) Release(ctx context.Context, c Claim) error {
	if err := s.keys.Release(ctx, c.record); err != nil && !errors.Is(err, store.ErrNotFound) {
		return err
	}
	return nil
}

// countClaim counts a claim and, every PruneEvery claims, asks the pruning job for a delete of expired records.
func (s *Service) countClaim() {
	if s.claims.Add(1)%PruneEvery != 0 {
		return
	}
	select {
	case s.pruneDue <- struct{}{}:
	default: // a delete is asked for already
	}
}

// RunPruning deletes expired records each time claims ask for it, until ctx ends; a delete that started is
// finished.
func (s *Service) RunPruning(ctx context.Context) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-s.pruneDue:
		}
		n, err := s.keys.DeleteExpired(context.WithoutCancel(ctx), time.Now(), pruneBatch)
		if err != nil {
			s.log.Warn("could not delete expired idempotency keys", "error", err)
		} else if n > 0 {
			s.log.Debug("deleted expired idempotency keys", "count", n)
		}
	}
}

// sealedFor is the associated data of a stored body: the record it belongs to, so a body copied into another
// record does not open.
func sealedFor(rec store.IdempotencyRecord) []byte {
	return []byte("idempotency\x00" + rec.APIKeyID + "\x00" + rec.Key + "\x00" + rec.Fingerprint)
}

// Fingerprint identifies a request for its Idempotency-Key: SHA-256 over the method, the path as sent (with its
// parameter values), the query and the body, each prefixed with its length so that no two requests share an input.
func Fingerprint(method, path, query string, body []byte) string {
	h := sha256.New()
	var n [8]byte
	for _, part := range [][]byte{[]byte(method), []byte(path), []byte(query), body} {
		binary.BigEndian.PutUint64(n[:], uint64(len(part)))
		h.Write(n[:])
		h.Write(part)
	}
	return hex.EncodeToString(h.Sum(nil))
}
