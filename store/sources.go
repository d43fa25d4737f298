package store

import (
	"context"
	"time"

	"github.com/uptrace/bun"
)

// SourceVerification is a source's verification scheme without its secret.
type SourceVerification struct {
	Scheme    string `json:"scheme"`
	Algorithm string `json:"algorithm,omitempty"`
	Header    string `json:"header,omitempty"`
	Encoding  string `json:"encoding,omitempty"`
	Prefix    string `json:"prefix,omitempty"`
	// ToleranceSeconds bounds the age of a signed timestamp (0 for schemes without one).
	ToleranceSeconds int    `json:"tolerance_seconds,omitempty"`
	Username         string `json:"username,omitempty"`
}

// Source is a public ingest endpoint of a workspace. Its token is stored only as a SHA-256 hash and its secret
// only sealed (see package automation).
type Source struct {
	bun.BaseModel `bun:"table:sources,alias:src"`

	ID                 string             `bun:"id,pk"`
	WorkspaceID        string             `bun:"workspace_id"`
	Name               string             `bun:"name"`
	EventType          string             `bun:"event_type"`
	TokenHash          string             `bun:"token_hash"`
	TokenLast4         string             `bun:"token_last4"`
	PreviousTokenHash  *string            `bun:"previous_token_hash"`
	PreviousTokenUntil *time.Time         `bun:"previous_token_until"`
	Verification       SourceVerification `bun:"verification,type:json"`
	SealedSecret       *string            `bun:"sealed_secret"`
	DedupHeader        *string            `bun:"dedup_header"`
	DedupPointer       *string            `bun:"dedup_pointer"`
	DedupWindowSeconds int                `bun:"dedup_window_seconds"`
	MaxBodyBytes       int                `bun:"max_body_bytes"`
	RatePerMinute      int                `bun:"rate_per_minute"`
	CreatedAt          time.Time          `bun:"created_at"`
	UpdatedAt          time.Time          `bun:"updated_at"`
}

// Sources is the repository of sources.
type Sources struct {
	workspaceScoped[Source]
}

// Create stores a new source on db (the writer or a transaction); its ID, if empty, and times are set here. Returns
// ErrNotFound if the workspace does not exist.
func (s *Sources) Create(ctx context.Context, db bun.IDB, src *Source) error {
	if src.ID == "" {
		src.ID = NewID("src")
	}
	src.CreatedAt = now()
	src.UpdatedAt = src.CreatedAt
	return s.create(ctx, db, src)
}

// Get returns a source of a workspace. Returns ErrNotFound if it is not in that workspace.
func (s *Sources) Get(ctx context.Context, workspaceID, id string) (Source, error) {
	return s.get(ctx, workspaceID, id)
}

// List returns a page of a workspace's sources, newest first. It returns no sentinel errors.
func (s *Sources) List(ctx context.Context, workspaceID string, p Page) ([]Source, bool, error) {
	return s.list(ctx, workspaceID, p, nil)
}

// ByToken returns the source whose current token, or previous token still in its grace period, has the hash.
// Returns ErrNotFound if there is none.
func (s *Sources) ByToken(ctx context.Context, tokenHash string) (Source, error) {
	var src Source
	err := s.db.r.NewSelect().Model(&src).
		WhereGroup(" AND ", func(q *bun.SelectQuery) *bun.SelectQuery {
			return q.Where("token_hash = ?", tokenHash).
				WhereOr("previous_token_hash = ? AND previous_token_until > ?", tokenHash, now())
		}).Limit(1).Scan(ctx)
	return src, mapErr(err)
}

// Lock reads a source of a workspace inside tx for a change (see Update). Returns ErrNotFound if it is not in that
// workspace.
func (s *Sources) Lock(ctx context.Context, tx bun.IDB, workspaceID, id string) (Source, error) {
	return s.lock(ctx, tx, workspaceID, id)
}

// Update writes every changeable field of src (not its tokens) on db (the writer or a transaction). Returns
// ErrNotFound if it is not in its workspace.
func (s *Sources) Update(ctx context.Context, db bun.IDB, src *Source) error {
	src.UpdatedAt = now()
	res, err := inWorkspace(db.NewUpdate().Model(src), src.WorkspaceID, src.ID).
		Column("name", "event_type", "verification", "sealed_secret", "dedup_header", "dedup_pointer",
			"dedup_window_seconds", "max_body_bytes", "rate_per_minute", "updated_at").Exec(ctx)
	return affectedOne(res, err)
}

// RotateToken makes tokenHash the source's token; the current one keeps working until graceUntil. Returns
// ErrNotFound if it is not in that workspace.
func (s *Sources) RotateToken(ctx context.Context, workspaceID, id, tokenHash, last4 string, graceUntil time.Time) (Source, error) {
	var src Source
	err := inWorkspace(s.db.w.NewUpdate().Model(&src), workspaceID, id).
		Set("previous_token_hash = token_hash").Set("previous_token_until = ?", graceUntil).
		Set("token_hash = ?", tokenHash).Set("token_last4 = ?", last4).Set("updated_at = ?", now()).
		Returning("*").Scan(ctx)
	return src, mapErr(err)
}

// Delete removes a source with its request log and de-duplication keys. Returns ErrNotFound if it is not in that
// workspace.
func (s *Sources) Delete(ctx context.Context, workspaceID, id string) error {
	_, err := s.delete(ctx, s.db.w, workspaceID, id)
	return err
}

// affectedOne maps an update of one row that changed nothing to ErrNotFound.
func affectedOne(res interface{ RowsAffected() (int64, error) }, err error) error {
	if err != nil {
		return mapErr(err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return ErrNotFound
	}
	return nil
}

// Source request outcomes.
const (
	SourceRequestAccepted  = "accepted"
	SourceRequestDuplicate = "duplicate"
	SourceRequestHandshake = "handshake"
	SourceRequestRefused   = "refused"
)

// SourceRequest is one request a source received, as its log keeps it.
type SourceRequest struct {
	bun.BaseModel `bun:"table:source_requests,alias:sr"`

	ID          string            `bun:"id,pk"`
	SourceID    string            `bun:"source_id"`
	WorkspaceID string            `bun:"workspace_id"`
	ReceivedAt  time.Time         `bun:"received_at"`
	Method      string            `bun:"method"`
	ContentType string            `bun:"content_type"`
	SizeBytes   int               `bun:"size_bytes"`
	Outcome     string            `bun:"outcome"`
	Status      int               `bun:"status"`
	Reason      *string           `bun:"reason"`
	Detail      *string           `bun:"detail"`
	EventID     *string           `bun:"event_id"`
	Headers     map[string]string `bun:"headers,type:json"`
	// BodyExcerpt is the start of the body as its bytes came in: any bytes at all, which a text column could not
	// keep (U+0000, bytes that are not UTF-8).
	BodyExcerpt   []byte `bun:"body_excerpt"`
	BodyTruncated bool   `bun:"body_truncated"`
}

// SourceRequests is the repository of sources' request logs.
type SourceRequests struct{ db *DB }

// Insert stores a request record on db (the writer or the transaction of the event it made); its ID is set here.
// Returns ErrNotFound if the source no longer exists.
func (s *SourceRequests) Insert(ctx context.Context, db bun.IDB, r *SourceRequest) error {
	if db == nil {
		db = s.db.w
	}
	r.ID = NewID("srq")
	if r.BodyExcerpt == nil {
		r.BodyExcerpt = []byte{} // no body: no bytes, which Bun would write as NULL
	}
	return insert(ctx, db, r)
}

// List returns a page of a source's requests (of one outcome when outcome is not ""), newest first. It returns no
// sentinel errors; a source of another workspace has no requests.
func (s *SourceRequests) List(ctx context.Context, workspaceID, sourceID, outcome string, p Page) ([]SourceRequest, bool, error) {
	rows := []SourceRequest{}
	q := s.db.r.NewSelect().Model(&rows).Where("source_id = ? AND workspace_id = ?", sourceID, workspaceID)
	if outcome != "" {
		q = q.Where("outcome = ?", outcome)
	}
	if err := p.apply(q, "id").Scan(ctx); err != nil {
		return nil, false, err
	}
	rows, more := pageOf(rows, p)
	return rows, more, nil
}

// Prune keeps the newest keep requests of each source and deletes at most batch older ones; it returns how many it
// deleted. It returns no sentinel errors.
func (s *SourceRequests) Prune(ctx context.Context, keep, batch int) (int, error) {
	res, err := s.db.w.NewRaw(`DELETE FROM source_requests WHERE id IN (
		SELECT id FROM (
			SELECT id, ROW_NUMBER() OVER (PARTITION BY source_id ORDER BY id DESC) AS n FROM source_requests
		) ranked WHERE n > ? LIMIT ?)`, keep, batch).Exec(ctx)
	if err != nil {
		return 0, err
	}
	n, _ := res.RowsAffected()
	return int(n), nil
}

// ClaimDedupKey records that key of the source made eventID, inside the transaction that stores the event, unless
// the key was seen within its window: then it returns the first event's ID and true. An expired key is claimed
// anew. It returns no sentinel errors.
func (s *SourceRequests) ClaimDedupKey(ctx context.Context, tx bun.IDB, sourceID, key, eventID string, window time.Duration) (string, bool, error) {
	t := now()
	var claimed []string
	err := tx.NewRaw(`INSERT INTO source_dedup_keys (source_id, dedup_key, event_id, expires_at) VALUES (?, ?, ?, ?)
		ON CONFLICT (source_id, dedup_key) DO UPDATE SET event_id = excluded.event_id, expires_at = excluded.expires_at
		WHERE source_dedup_keys.expires_at <= ? RETURNING event_id`, sourceID, key, eventID, t.Add(window), t).
		Scan(ctx, &claimed)
	if err != nil {
		return "", false, err
	}
	if len(claimed) == 1 {
		return eventID, false, nil
	}
	var first string
	err = tx.NewRaw(`SELECT event_id FROM source_dedup_keys WHERE source_id = ? AND dedup_key = ?`, sourceID, key).
		Scan(ctx, &first)
	return first, true, err
}

// SeenDedupKey reads, without writing, whether key of the source was claimed within its window (at now): the ID of
// the event it made and true. It returns no sentinel errors.
func (s *SourceRequests) SeenDedupKey(ctx context.Context, sourceID, key string, now time.Time) (string, bool, error) {
	var ids []string
	err := s.db.r.NewRaw(`SELECT event_id FROM source_dedup_keys WHERE source_id = ? AND dedup_key = ? AND expires_at > ?`,
		sourceID, key, now.UTC()).Scan(ctx, &ids)
	if err != nil || len(ids) == 0 {
		return "", false, err
	}
	return ids[0], true, nil
}

// PruneDedupKeys deletes at most batch expired de-duplication keys and returns how many. It returns no sentinel
// errors.
func (s *SourceRequests) PruneDedupKeys(ctx context.Context, batch int) (int, error) {
	res, err := s.db.w.NewRaw(`DELETE FROM source_dedup_keys WHERE (source_id, dedup_key) IN (
		SELECT source_id, dedup_key FROM source_dedup_keys WHERE expires_at <= ? LIMIT ?)`, now(), batch).Exec(ctx)
	if err != nil {
		return 0, err
	}
	n, _ := res.RowsAffected()
	return int(n), nil
}

// MadeEvent reports whether a source's request log names the event as one the source made. It returns no sentinel
// errors.
func (s *SourceRequests) MadeEvent(ctx context.Context, sourceID, eventID string) (bool, error) {
	return s.db.r.NewSelect().Table("source_requests").
		Where("source_id = ? AND event_id = ? AND outcome = ?", sourceID, eventID, SourceRequestAccepted).Exists(ctx)
}
