package accounts

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/switchboard/switchboard/store"
	"github.com/switchboard/switchboard/store/storetest"
)

func TestMain(m *testing.M) { storetest.Main(m) }

var ctx = context.Background()

func uniqueEmail(name string) string {
	return name + "-" + strings.ToLower(store.NewID("u")[18:]) + "@example.com"
}

// Sign-up rules: a valid email, at least 10 and at most 256 characters, not a common password, not the email's
// name; each refusal says what to do.
func TestCheckSignUp(t *testing.T) {
	for _, tc := range []struct{ email, password, want string }{
		{"ada@example.com", "correct horse battery", ""},
		{"not an email", "correct horse battery", "valid email"},
		{"Ada <ada@example.com>", "correct horse battery", "valid email"},
		{"ada@example.com", "short", "at least 10"},
		{"ada@example.com", strings.Repeat("x", 257), "at most 256"},
		{"ada@example.com", "Password123", "most common"},
		{"lovelace@example.com", "my-lovelace-2026", "email address"},
	} {
		err := CheckSignUp(tc.email, tc.password)
		var refusal *Error
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%q/%q refused: %v", tc.email, tc.password, err)
		case tc.want != "" && (!errors.As(err, &refusal) || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%q/%q: %v, want a refusal saying %q", tc.email, tc.password, err, tc.want)
		}
	}
}

// An account is made once per email; the right password signs in whatever the email's case, the wrong one and an
// unknown email get the same answer; a password change checks the current one and keeps the rules.
func TestAccounts(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		s := New(db, time.Hour)
		email := uniqueEmail("ada")
		u, err := s.SignUp(ctx, email, "correct horse battery")
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(u.PasswordHash, "correct horse") || !strings.HasPrefix(u.PasswordHash, "$argon2id$") {
			t.Fatalf("stored hash %q", u.PasswordHash)
		}
		if _, err := s.SignUp(ctx, email, "another good password"); !errors.Is(err, ErrEmailTaken) {
			t.Errorf("a second account: %v", err)
		}
		if got, err := s.Authenticate(ctx, strings.ToUpper(email), "correct horse battery"); err != nil || got.ID != u.ID {
			t.Errorf("sign-in: %+v %v", got, err)
		}
		for _, tc := range [][2]string{{email, "wrong horse battery"}, {uniqueEmail("nobody"), "correct horse battery"}} {
			if _, err := s.Authenticate(ctx, tc[0], tc[1]); !errors.Is(err, ErrWrongCredentials) {
				t.Errorf("%v: %v, want ErrWrongCredentials", tc, err)
			}
		}
		if err := s.ChangePassword(ctx, u.ID, "wrong horse battery", "a new good password"); !errors.Is(err, ErrWrongPassword) {
			t.Errorf("change with a wrong current password: %v", err)
		}
		var refusal *Error
		if err := s.ChangePassword(ctx, u.ID, "correct horse battery", "short"); !errors.As(err, &refusal) {
			t.Errorf("change to a short password: %v", err)
		}
		if err := s.ChangePassword(ctx, u.ID, "correct horse battery", "a new good password"); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Authenticate(ctx, email, "a new good password"); err != nil {
			t.Errorf("sign-in with the new password: %v", err)
		}
	})
}

// A session is found by its token (kept only as a hash), replaced when the browser still held one, extended when
// used after five minutes, gone when expired or ended, and pruned once expired; a changed password ends them all.
func TestSessions(t *testing.T) {
	storetest.Dialects(t, func(t *testing.T, db *store.DB) {
		s := New(db, time.Hour)
		u, err := s.SignUp(ctx, uniqueEmail("grace"), "correct horse battery")
		if err != nil {
			t.Fatal(err)
		}
		first, err := s.StartSession(ctx, NewSession{UserID: u.ID, UserAgent: strings.Repeat("u", 1000), IP: "192.0.2.1"})
		if err != nil {
			t.Fatal(err)
		}
		ses, extended, err := s.Session(ctx, first)
		if err != nil || ses.UserID != u.ID || extended || len(ses.UserAgent) != 256 {
			t.Fatalf("session: %+v %v %v", ses, extended, err)
		}
		var stored int
		if err := db.Bun().NewSelect().Table("sessions").ColumnExpr("count(*)").Where("token_hash = ?", first).Scan(ctx, &stored); err != nil || stored != 0 {
			t.Errorf("the token is stored as it is (%d, %v)", stored, err)
		}

		second, err := s.StartSession(ctx, NewSession{UserID: u.ID, Replaces: first})
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := s.Session(ctx, first); !errors.Is(err, ErrNoSession) {
			t.Errorf("the replaced session: %v", err)
		}
		ses, _, _ = s.Session(ctx, second)
		if _, err := db.Bun().NewUpdate().Table("sessions").Set("last_seen_at = ?", time.Now().Add(-10*time.Minute)).
			Where("id = ?", ses.ID).Exec(ctx); err != nil {
			t.Fatal(err)
		}
		if _, extended, err := s.Session(ctx, second); err != nil || !extended {
			t.Errorf("a session used after ten minutes: extended %v, %v", extended, err)
		}
		if _, err := db.Bun().NewUpdate().Table("sessions").Set("expires_at = ?", time.Now().Add(-time.Second)).
			Where("id = ?", ses.ID).Exec(ctx); err != nil {
			t.Fatal(err)
		}
		if got, _, err := s.Session(ctx, second); !errors.Is(err, ErrNoSession) || got.ID != ses.ID {
			t.Errorf("an expired session: %v (its ID %q tells the caller it expired)", err, got.ID)
		}
		if _, _, err := s.Session(ctx, second); !errors.Is(err, ErrNoSession) {
			t.Errorf("an expired session is deleted: %v", err)
		}

		third, _ := s.StartSession(ctx, NewSession{UserID: u.ID})
		if err := s.ChangePassword(ctx, u.ID, "correct horse battery", "a new good password"); err != nil {
			t.Fatal(err)
		}
		if _, _, err := s.Session(ctx, third); !errors.Is(err, ErrNoSession) {
			t.Errorf("a session after the password changed: %v", err)
		}
	})
}
