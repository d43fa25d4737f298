package store

import (
	"context"
	"strings"
	"time"

	"github.com/uptrace/bun"
)

// User is a console account.
type User struct {
	bun.BaseModel `bun:"table:users,alias:u"`

	ID           string    `bun:"id,pk"`
	Email        string    `bun:"email"`
	PasswordHash string    `bun:"password_hash"`
	CreatedAt    time.Time `bun:"created_at"`
	UpdatedAt    time.Time `bun:"updated_at"`
}

// NormalizeEmail is the form in which emails are stored and compared.
func NormalizeEmail(email string) string { return strings.ToLower(strings.TrimSpace(email)) }

// Users is the repository of console accounts.
type Users struct{ db *DB }

// Create stores a new user. Returns ErrConflict if the email is taken.
func (s *Users) Create(ctx context.Context, email, passwordHash string) (User, error) {
	t := now()
	u := User{ID: NewID("usr"), Email: NormalizeEmail(email), PasswordHash: passwordHash, CreatedAt: t, UpdatedAt: t}
	if _, err := s.db.w.NewInsert().Model(&u).Exec(ctx); err != nil {
		return User{}, mapErr(err)
	}
	return u, nil
}

// Get returns a user. Returns ErrNotFound if there is none.
func (s *Users) Get(ctx context.Context, id string) (User, error) {
	var u User
	err := s.db.r.NewSelect().Model(&u).Where("u.id = ?", id).Scan(ctx)
	return u, mapErr(err)
}

// ByEmail returns the user with that email (compared normalised). Returns ErrNotFound if there is none.
func (s *Users) ByEmail(ctx context.Context, email string) (User, error) {
	var u User
	err := s.db.r.NewSelect().Model(&u).Where("u.email = ?", NormalizeEmail(email)).Scan(ctx)
	return u, mapErr(err)
}

// Emails maps user IDs to emails, for showing who created what; unknown IDs are left out.
func (s *Users) Emails(ctx context.Context, ids []string) (map[string]string, error) {
	out := map[string]string{}
	if len(ids) == 0 {
		return out, nil
	}
	var us []User
	if err := s.db.r.NewSelect().Model(&us).Column("id", "email").Where("u.id IN (?)", bun.In(ids)).Scan(ctx); err != nil {
		return nil, err
	}
	for _, u := range us {
		out[u.ID] = u.Email
	}
	return out, nil
}

// SetPassword replaces a user's password hash and ends every session of the user except keepSessionID ("" ends
// all), in one transaction. Returns ErrNotFound if the user does not exist.
func (s *Users) SetPassword(ctx context.Context, id, passwordHash, keepSessionID string) error {
	return mapErr(s.db.RunInTx(ctx, func(ctx context.Context, tx bun.Tx) error {
		res, err := tx.NewUpdate().Table("users").Set("password_hash = ?", passwordHash).Set("updated_at = ?", now()).
			Where("id = ?", id).Exec(ctx)
		if err := expectOneRow(res, err); err != nil {
			return err
		}
		_, err = tx.NewDelete().Table("sessions").Where("user_id = ? AND id <> ?", id, keepSessionID).Exec(ctx)
		return err
	}))
}

// Membership is a user's role in a workspace.
type Membership struct {
	bun.BaseModel `bun:"table:memberships,alias:m"`

	WorkspaceID string    `bun:"workspace_id,pk"`
	UserID      string    `bun:"user_id,pk"`
	Role        string    `bun:"role"`
	CreatedAt   time.Time `bun:"created_at"`
}

// RoleOwner is the role of a workspace's creator: everything, keys included.
const RoleOwner = "owner"

// AddMember gives a user a role in a workspace. Returns ErrNotFound if either does not exist and ErrConflict if
// the user is already a member.
func (s *Workspaces) AddMember(ctx context.Context, workspaceID, userID, role string) error {
	return addMember(ctx, s.db.w, workspaceID, userID, role)
}

// addMember inserts the membership on db. Returns ErrNotFound if the workspace or the user does not exist and
// ErrConflict if the user is already a member.
func addMember(ctx context.Context, db bun.IDB, workspaceID, userID, role string) error {
	return insert(ctx, db, &Membership{WorkspaceID: workspaceID, UserID: userID, Role: role, CreatedAt: now()})
}

// CreateOwned creates a workspace with userID as its owner, in one transaction. Returns ErrNotFound if the user
// does not exist.
func (s *Workspaces) CreateOwned(ctx context.Context, name, userID string) (Workspace, error) {
	t := now()
	w := Workspace{ID: NewID("ws"), Name: name, CreatedAt: t, UpdatedAt: t}
	err := s.db.RunInTx(ctx, func(ctx context.Context, tx bun.Tx) error {
		if _, err := tx.NewInsert().Model(&w).Exec(ctx); err != nil {
			return err
		}
		return addMember(ctx, tx, w.ID, userID, RoleOwner)
	})
	if err != nil {
		return Workspace{}, mapErr(err)
	}
	return w, nil
}

// ForUser returns the workspaces a user belongs to, newest first, with the user's role.
func (s *Workspaces) ForUser(ctx context.Context, userID string) ([]MemberWorkspace, error) {
	out := []MemberWorkspace{}
	err := s.db.r.NewSelect().Model((*Workspace)(nil)).ColumnExpr("workspace.*").ColumnExpr("m.role AS role").
		Join("JOIN memberships AS m ON m.workspace_id = workspace.id").
		Where("m.user_id = ?", userID).Order("workspace.id DESC").Scan(ctx, &out)
	return out, mapErr(err)
}

// MemberWorkspace is a workspace seen by one of its members.
type MemberWorkspace struct {
	Workspace `bun:",extend"`
	Role      string `bun:"role"`
}

// Role returns a user's role in a workspace. Returns ErrNotFound if the user is not a member.
func (s *Workspaces) Role(ctx context.Context, workspaceID, userID string) (string, error) {
	var role string
	err := s.db.r.NewSelect().Table("memberships").Column("role").
		Where("workspace_id = ? AND user_id = ?", workspaceID, userID).Scan(ctx, &role)
	return role, mapErr(err)
}
