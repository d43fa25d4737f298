package store

import (
	"context"
	"time"

	"github.com/uptrace/bun"
)

// Session is a signed-in console browser. The cookie carries a random token; only its hash is stored.
type Session struct {
	bun.BaseModel `bun:"table:sessions,alias:s"`

	ID          string    `bun:"id,pk"`
	TokenHash   string    `bun:"token_hash"`
	UserID      string    `bun:"user_id"`
	CSRFToken   string    `bun:"csrf_token"`
	WorkspaceID *string   `bun:"workspace_id"`
	UserAgent   string    `bun:"user_agent"`
	IP          string    `bun:"ip"`
	CreatedAt   time.Time `bun:"created_at"`
	LastSeenAt  time.Time `bun:"last_seen_at"`
	ExpiresAt   time.Time `bun:"expires_at"`

	// User is loaded by ByTokenHash.
	User *User `bun:"rel:belongs-to,join:user_id=id"`
}

// NewSession is what Sessions.Create needs.
type NewSession struct {
	TokenHash, UserID, CSRFToken, UserAgent, IP string
	WorkspaceID                                 *string
	ExpiresAt                                   time.Time
}

// Sessions is the repository of console sessions.
type Sessions struct{ db *DB }

// Create stores a session. Returns ErrNotFound if the user (or the workspace it shows) does not exist.
func (s *Sessions) Create(ctx context.Context, n NewSession) (Session, error) {
	t := now()
	ses := Session{
		ID: NewID("ses"), TokenHash: n.TokenHash, UserID: n.UserID, CSRFToken: n.CSRFToken, WorkspaceID: n.WorkspaceID,
		UserAgent: n.UserAgent, IP: n.IP, CreatedAt: t, LastSeenAt: t, ExpiresAt: n.ExpiresAt.UTC().Truncate(time.Microsecond),
	}
	return ses, insert(ctx, s.db.w, &ses)
}

// ByTokenHash returns the session with that token hash and its User, expired or not (the caller decides).
// Returns ErrNotFound if there is none (signed out, or ended by a password change).
func (s *Sessions) ByTokenHash(ctx context.Context, hash string) (Session, error) {
	var ses Session
	err := s.db.r.NewSelect().Model(&ses).Relation("User").Where("s.token_hash = ?", hash).Scan(ctx)
	return ses, mapErr(err)
}

// ByID returns the session with that ID, expired or not (the caller decides). Returns ErrNotFound if there is none.
func (s *Sessions) ByID(ctx context.Context, id string) (Session, error) {
	var ses Session
	err := s.db.r.NewSelect().Model(&ses).Where("s.id = ?", id).Scan(ctx)
	return ses, mapErr(err)
}

// Extend records activity and moves the expiry (sliding sessions). Returns ErrNotFound if the session is gone.
func (s *Sessions) Extend(ctx context.Context, id string, expiresAt time.Time) error {
	res, err := s.db.w.NewUpdate().Table("sessions").Set("last_seen_at = ?", now()).
		Set("expires_at = ?", expiresAt.UTC().Truncate(time.Microsecond)).Where("id = ?", id).Exec(ctx)
	return expectOneRow(res, err)
}

// SetWorkspace switches the workspace the session shows. Returns ErrNotFound if the session is gone.
func (s *Sessions) SetWorkspace(ctx context.Context, id, workspaceID string) error {
	res, err := s.db.w.NewUpdate().Table("sessions").Set("workspace_id = ?", workspaceID).Where("id = ?", id).Exec(ctx)
	return expectOneRow(res, err)
}

// Delete ends a session; deleting a missing session is not an error (sign-out twice).
func (s *Sessions) Delete(ctx context.Context, id string) error {
	_, err := s.db.w.NewDelete().Table("sessions").Where("id = ?", id).Exec(ctx)
	return err
}

// DeleteExpired removes sessions that expired before t and returns how many.
func (s *Sessions) DeleteExpired(ctx context.Context, t time.Time) (int64, error) {
	res, err := s.db.w.NewDelete().Table("sessions").Where("expires_at < ?", t.UTC()).Exec(ctx)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}
