// Package workspaces is the capability of tenants and their access: workspaces, their members, the models they may
// use, and their API keys (creation with the secret shown once, scopes and presets, expiry, revocation). The console
// and the operator's CLI are adapters over its Service, so each rule — a name's length, what a preset grants, when a
// key expires — is written here once and holds the same everywhere. Package apikey stays the engine underneath: the
// key format, the scope catalogue and the Verifier.
package workspaces

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/switchboard/switchboard/internal/modelcatalog"
	"github.com/switchboard/switchboard/internal/problem"
	"github.com/switchboard/switchboard/store"
)

// Config configures the Service; zero values take the defaults.
type Config struct {
	// Models is the catalogue a workspace's enabled models are chosen from (default modelcatalog.Default()).
	Models *modelcatalog.Catalog
	// ForgetKey drops a revoked key, by its secret's hash, from the verification cache of this process
	// (apikey.Verifier.Forget), so that the key is refused on the very next request without waiting for the store's
	// change watch. Nil where no key is verified (the CLI).
	ForgetKey func(secretHash string)
}

// Service holds the rules of workspaces, members and API keys.
type Service struct {
	db  *store.DB
	cfg Config
}

// New returns the Service over an open, migrated database.
func New(db *store.DB, cfg Config) *Service {
	if cfg.Models == nil {
		cfg.Models = modelcatalog.Default()
	}
	if cfg.ForgetKey == nil {
		cfg.ForgetKey = func(string) {}
	}
	return &Service{db: db, cfg: cfg}
}

// The fields a ValidationFailed error of the Service points at (JSON Pointers into the input). Adapters map them to
// their own words: a form field, a command-line flag.
const (
	FieldName          = "/name"
	FieldPreset        = "/preset"
	FieldScopes        = "/scopes"
	FieldExpiresIn     = "/expires_in"
	FieldOrigins       = "/origins"
	FieldInstances     = "/instance_ids"
	FieldKind          = "/kind"
	FieldBrowserScope  = "/browser_scope"
	FieldTarget        = "/target"
	FieldDailyQuota    = "/daily_quota"
	FieldEnabledModels = "/enabled_models"
	FieldEmail         = "/email"
)

// MaxNameLength is the longest name of a workspace or a key, in characters.
const MaxNameLength = 100

// Name is the one rule for the names of workspaces and keys: the name without surrounding white space, which must be
// 1 to MaxNameLength characters long — characters, not bytes, so "€" counts once. It returns the name to store, or a
// ValidationFailed error at FieldName.
func Name(raw string) (string, error) {
	name, invalid := checkName(raw)
	return name, invalid.Err()
}

// checkName is Name for callers that collect the invalid fields of a whole input.
func checkName(raw string) (string, problem.Fields) {
	name := strings.TrimSpace(raw)
	if n := utf8.RuneCountInString(name); n == 0 || n > MaxNameLength {
		var invalid problem.Fields
		invalid.Add(FieldName, fmt.Sprintf(
			"must be 1 to %d characters long, not counting surrounding spaces (it has %d)", MaxNameLength, n))
		return "", invalid
	}
	return name, nil
}

// CreateWorkspace creates a workspace with every model enabled. With an owner (a console user's ID) the user becomes
// its owner in the same transaction; with ownerID "" it has no member until AddMember (the operator's CLI). Errors:
// ValidationFailed (the name, see Name), NotFound (no such user).
func (s *Service) CreateWorkspace(ctx context.Context, name, ownerID string) (Workspace, error) {
	name, err := Name(name)
	if err != nil {
		return Workspace{}, err
	}
	if ownerID == "" {
		return workspaceResult(s.db.Workspaces.Create(ctx, name))
	}
	w, err := s.db.Workspaces.CreateOwned(ctx, name, ownerID)
	if errors.Is(err, store.ErrNotFound) {
		return Workspace{}, problem.Errorf(problem.NotFound, "There is no user %s.", ownerID)
	}
	return workspaceResult(w, err)
}

// Workspaces lists every workspace, newest first: the operator's view.
func (s *Service) Workspaces(ctx context.Context) ([]Workspace, error) {
	ws, err := s.db.Workspaces.List(ctx)
	return listed(workspaceOf, ws, err)
}

// AnyWorkspace reports whether the database holds a workspace at all (a CLI run against an empty database says so).
func (s *Service) AnyWorkspace(ctx context.Context) (bool, error) { return s.db.Workspaces.Any(ctx) }

// SetEnabledModels chooses the models a workspace may use: models lists their IDs, each of the catalogue, and nil
// enables every model of the catalogue (today's and those added later). Keys see the change on their next request.
// Errors: ValidationFailed (a model outside the catalogue, at FieldEnabledModels/i), NotFound (no such workspace).
func (s *Service) SetEnabledModels(ctx context.Context, workspaceID string, models []string) (Workspace, error) {
	var invalid problem.Fields
	for i, id := range models {
		if !s.cfg.Models.Has(id) {
			invalid.Add(fmt.Sprintf("%s/%d", FieldEnabledModels, i), fmt.Sprintf("%q is not in the model catalogue", id))
		}
	}
	if err := invalid.Err(); err != nil {
		return Workspace{}, err
	}
	w, err := s.db.Workspaces.SetEnabledModels(ctx, workspaceID, models)
	if errors.Is(err, store.ErrNotFound) {
		return Workspace{}, noWorkspace(workspaceID)
	}
	return workspaceResult(w, err)
}

// Member is a user's membership of a workspace.
type Member struct {
	WorkspaceID string
	UserID      string
	Email       string
	Role        string
}

// AddMember makes the console user with that email (who signed up already) an owner of the workspace, the one role
// there is. Errors: ValidationFailed (no email, at FieldEmail), NotFound (no such user or workspace), Conflict (a
// member already).
func (s *Service) AddMember(ctx context.Context, workspaceID, email string) (Member, error) {
	email = store.NormalizeEmail(email)
	if email == "" {
		return Member{}, problem.Invalid(FieldEmail, "is required")
	}
	u, err := s.db.Users.ByEmail(ctx, email)
	if errors.Is(err, store.ErrNotFound) {
		return Member{}, problem.Errorf(problem.NotFound, "There is no user %s: they must sign up in the console first.", email)
	}
	if err != nil {
		return Member{}, err
	}
	err = s.db.Workspaces.AddMember(ctx, workspaceID, u.ID, store.RoleOwner)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return Member{}, noWorkspace(workspaceID)
	case errors.Is(err, store.ErrConflict):
		return Member{}, problem.Errorf(problem.Conflict, "%s is already a member of %s.", u.Email, workspaceID)
	case err != nil:
		return Member{}, err
	}
	return Member{WorkspaceID: workspaceID, UserID: u.ID, Email: u.Email, Role: store.RoleOwner}, nil
}

func noWorkspace(id string) error {
	return problem.Errorf(problem.NotFound, "There is no workspace %s.", id)
}
