// Package accounts owns the rules of console accounts: who may sign up (a valid email, a password that is long,
// not common and not the email), how passwords are kept (argon2id) and checked (as slowly for an unknown email as
// for a known one), and console sessions (random tokens kept as SHA-256, sliding expiry). The console's forms and
// the CLI are its adapters: they show its errors' messages and never touch users or sessions in the store.
package accounts

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net/mail"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/switchboard/switchboard/store"
)

// Error is a refusal a person can act on; its message says what to do.
type Error struct{ Message string }

func (e *Error) Error() string { return e.Message }

var (
	// ErrEmailTaken: an account with this email exists.
	ErrEmailTaken = &Error{"An account with this email already exists. Sign in instead."}
	// ErrWrongCredentials: no account has this email and password (which of the two is not said).
	ErrWrongCredentials = &Error{"The email or password is not right."}
	// ErrWrongPassword: the current password given to change it is not the account's.
	ErrWrongPassword = &Error{"Your current password is not right."}
	// ErrNoSession: the token names no session, or an expired one (deleted now).
	ErrNoSession = errors.New("accounts: no such session")
)

// Service is the accounts of the console. Make one with New.
type Service struct {
	db *store.DB
	// TTL is how long a session lasts without use.
	ttl time.Duration
}

// New makes the service; sessions last ttl without use.
func New(db *store.DB, ttl time.Duration) *Service { return &Service{db: db, ttl: ttl} }

// CheckSignUp says why email and password cannot make an account (an *Error), or nil. SignUp checks the same;
// a form calls it first to count only well-formed sign-ups against its rate limit.
func CheckSignUp(email, password string) error {
	if msg := emailProblem(email); msg != "" {
		return &Error{msg}
	}
	if msg := passwordProblem(password, email); msg != "" {
		return &Error{msg}
	}
	return nil
}

func emailProblem(email string) string {
	addr, err := mail.ParseAddress(email)
	if err != nil || addr.Address != email || !strings.Contains(email, "@") || len(email) > 254 {
		return "Enter a valid email address, like name@example.com."
	}
	return ""
}

// SignUp makes an account: an *Error for an invalid email or password, ErrEmailTaken when one exists.
func (s *Service) SignUp(ctx context.Context, email, password string) (store.User, error) {
	if err := CheckSignUp(email, password); err != nil {
		return store.User{}, err
	}
	hash, err := hashPassword(password)
	if err != nil {
		return store.User{}, err
	}
	u, err := s.db.Users.Create(ctx, email, hash)
	if errors.Is(err, store.ErrConflict) {
		return store.User{}, ErrEmailTaken
	}
	return u, err
}

// Authenticate returns the account of email and password, or ErrWrongCredentials; it does the same work whether
// or not the email has an account, so that the time of the answer does not tell.
func (s *Service) Authenticate(ctx context.Context, email, password string) (store.User, error) {
	u, err := s.db.Users.ByEmail(ctx, store.NormalizeEmail(email))
	hash := u.PasswordHash
	if errors.Is(err, store.ErrNotFound) {
		hash = dummyHash
	} else if err != nil {
		return store.User{}, err
	}
	ok, err := checkPassword(hash, password)
	if err != nil && u.ID != "" {
		return store.User{}, fmt.Errorf("check password of %s: %w", u.ID, err)
	}
	if !ok || u.ID == "" {
		return store.User{}, ErrWrongCredentials
	}
	return u, nil
}

// ChangePassword replaces the password of userID after checking current (ErrWrongPassword), under the rules of
// SignUp; every session of the account ends.
func (s *Service) ChangePassword(ctx context.Context, userID, current, next string) error {
	u, err := s.db.Users.Get(ctx, userID)
	if err != nil {
		return err
	}
	if ok, err := checkPassword(u.PasswordHash, current); err != nil || !ok {
		return ErrWrongPassword
	}
	if msg := passwordProblem(next, u.Email); msg != "" {
		return &Error{msg}
	}
	hash, err := hashPassword(next)
	if err != nil {
		return err
	}
	return s.db.Users.SetPassword(ctx, u.ID, hash, "")
}

// Emails returns the email of each user ID that has an account.
func (s *Service) Emails(ctx context.Context, userIDs []string) (map[string]string, error) {
	return s.db.Users.Emails(ctx, userIDs)
}

// NewSession is where a session is started from.
type NewSession struct {
	UserID, UserAgent, IP string
	// Replaces is the token of a session the browser still holds: it ends first.
	Replaces string
}

// StartSession signs a user in: a session showing the user's first workspace, and its token (random, shown once:
// only its SHA-256 is kept).
func (s *Service) StartSession(ctx context.Context, n NewSession) (token string, err error) {
	if n.Replaces != "" {
		if old, err := s.db.Sessions.ByTokenHash(ctx, tokenHash(n.Replaces)); err == nil {
			_ = s.db.Sessions.Delete(ctx, old.ID)
		}
	}
	token = RandomToken()
	var wsID *string
	if ws, err := s.db.Workspaces.ForUser(ctx, n.UserID); err == nil && len(ws) > 0 {
		wsID = &ws[0].ID
	}
	ua := n.UserAgent
	if len(ua) > 256 { // cut at a character's start, so a multi-byte character is kept whole or left out
		cut := 256
		for cut > 0 && !utf8.RuneStart(ua[cut]) {
			cut--
		}
		ua = ua[:cut]
	}
	_, err = s.db.Sessions.Create(ctx, store.NewSession{TokenHash: tokenHash(token), UserID: n.UserID,
		CSRFToken: RandomToken(), WorkspaceID: wsID, UserAgent: ua, IP: n.IP, ExpiresAt: time.Now().Add(s.ttl)})
	if err != nil {
		return "", err
	}
	return token, nil
}

// Session returns the live session of token, extended when it was last seen more than five minutes ago
// (extended reports it: the caller renews its cookie). An unknown or expired token is ErrNoSession (an expired
// session is deleted).
func (s *Service) Session(ctx context.Context, token string) (ses store.Session, extended bool, err error) {
	ses, err = s.db.Sessions.ByTokenHash(ctx, tokenHash(token))
	if errors.Is(err, store.ErrNotFound) {
		return ses, false, ErrNoSession
	}
	if err != nil {
		return ses, false, err
	}
	now := time.Now()
	if !now.Before(ses.ExpiresAt) {
		_ = s.db.Sessions.Delete(ctx, ses.ID)
		return ses, false, fmt.Errorf("%w: it expired", ErrNoSession)
	}
	if now.Sub(ses.LastSeenAt) > 5*time.Minute {
		if err := s.db.Sessions.Extend(ctx, ses.ID, now.Add(s.ttl)); err != nil && !errors.Is(err, store.ErrNotFound) {
			return ses, false, err
		}
		extended = true
	}
	return ses, extended, nil
}

// SessionIn checks that a session is still signed in (not ended, not expired at now) and that its user belongs to a
// workspace: what a console stream token is held to each time it opens a stream. Returns ErrNoSession otherwise.
func (s *Service) SessionIn(ctx context.Context, sessionID, workspaceID string, now time.Time) error {
	ses, err := s.db.Sessions.ByID(ctx, sessionID)
	if errors.Is(err, store.ErrNotFound) || (err == nil && !now.Before(ses.ExpiresAt)) {
		return ErrNoSession
	}
	if err != nil {
		return err
	}
	ws, err := s.db.Workspaces.ForUser(ctx, ses.UserID)
	if err != nil {
		return err
	}
	if !slices.ContainsFunc(ws, func(w store.MemberWorkspace) bool { return w.ID == workspaceID }) {
		return fmt.Errorf("%w: the user left the workspace", ErrNoSession)
	}
	return nil
}

// EndSession signs a session out.
func (s *Service) EndSession(ctx context.Context, sessionID string) error {
	return s.db.Sessions.Delete(ctx, sessionID)
}

// ShowWorkspace makes a session show a workspace.
func (s *Service) ShowWorkspace(ctx context.Context, sessionID, workspaceID string) error {
	return s.db.Sessions.SetWorkspace(ctx, sessionID, workspaceID)
}

// PruneSessions deletes the sessions expired at now and returns how many.
func (s *Service) PruneSessions(ctx context.Context, now time.Time) (int64, error) {
	return s.db.Sessions.DeleteExpired(ctx, now)
}

// RandomToken is 32 random bytes, URL-safe: session tokens, CSRF tokens.
func RandomToken() string {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		panic(err) // crypto/rand never fails on supported systems
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

func tokenHash(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}
