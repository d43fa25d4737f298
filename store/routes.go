package store

import (
	"context"
	"time"

	"github.com/uptrace/bun"
)

// Route is a message to a person tried channel after channel: its content, its steps with their attempts, and
// when the route worker must act on it next.
type Route struct {
	bun.BaseModel `bun:"table:routes,alias:rte"`

	ID          string       `bun:"id,pk"`
	WorkspaceID string       `bun:"workspace_id"`
	PersonID    string       `bun:"person_id"`
	Status      string       `bun:"status"` // pending, completed, failed
	Message     RouteMessage `bun:"message,type:json"`
	Steps       []RouteStep  `bun:"steps,type:json"`
	// Step is the index of the step under way (or the last one tried), -1 before the first.
	Step int `bun:"step"`
	// MessageID is the current step's message.
	MessageID *string `bun:"message_id"`
	// DueAt is when the worker acts next: the current step's deadline, or a past time when the next step is to
	// start; nil once the route ended.
	DueAt     *time.Time `bun:"due_at"`
	CreatedAt time.Time  `bun:"created_at"`
	UpdatedAt time.Time  `bun:"updated_at"`
	EndedAt   *time.Time `bun:"ended_at"`
}

// RouteMessage is the content every attempt of a route sends.
type RouteMessage struct {
	Type  string      `json:"type"`
	Text  *string     `json:"text,omitempty"`
	Media *RouteMedia `json:"media,omitempty"`
}

// RouteMedia is the file a route's message sends: a stored media file or a URL, with its caption and file name.
type RouteMedia struct {
	MediaID  *string `json:"media_id,omitempty"`
	URL      *string `json:"url,omitempty"`
	Caption  *string `json:"caption,omitempty"`
	Filename *string `json:"filename,omitempty"`
}

// RouteStep is a step of a route and what became of it.
type RouteStep struct {
	InstanceID string `json:"instance_id,omitempty"`
	Provider   string `json:"provider,omitempty"`
	ByProvider bool   `json:"by_provider,omitempty"` // the client named the provider; InstanceID is the choice
	// Scope limits a provider step to these instances (those of the key that created the route; nil: any).
	Scope         []string   `json:"scope,omitempty"`
	Until         string     `json:"until"`
	WithinSeconds int        `json:"within_seconds"`
	Status        string     `json:"status"` // waiting, active, succeeded, failed, timed_out, skipped
	MessageID     string     `json:"message_id,omitempty"`
	Reason        string     `json:"reason,omitempty"`
	StartedAt     *time.Time `json:"started_at,omitempty"`
	EndedAt       *time.Time `json:"ended_at,omitempty"`
}

// RouteFilter narrows a list of routes.
type RouteFilter struct {
	PersonID, Status string
	// PersonIDs limits the list to these people (a key limited to instances); nil for no limit.
	PersonIDs []string
}

// Routes is the repository of routes.
type Routes struct {
	workspaceScoped[Route]
}

// Create inserts a route inside tx, stamping its times. Returns ErrNotFound if its workspace does not exist.
func (s *Routes) Create(ctx context.Context, tx bun.IDB, r *Route) error {
	t := now()
	r.CreatedAt, r.UpdatedAt = t, t
	return s.create(ctx, tx, r)
}

// Get returns a route of a workspace. Returns ErrNotFound if it is not there.
func (s *Routes) Get(ctx context.Context, workspaceID, id string) (Route, error) {
	return s.get(ctx, workspaceID, id)
}

// ByID returns a route whatever its workspace (the route worker's read). Returns ErrNotFound if there is none.
func (s *Routes) ByID(ctx context.Context, id string) (Route, error) {
	var r Route
	err := s.db.r.NewSelect().Model(&r).Where("rte.id = ?", id).Scan(ctx)
	return r, mapErr(err)
}

// Read reads a route inside tx without locking it, whatever its workspace. Returns ErrNotFound if there is none.
func (s *Routes) Read(ctx context.Context, tx bun.IDB, id string) (Route, error) {
	var r Route
	err := tx.NewSelect().Model(&r).Where("rte.id = ?", id).Scan(ctx)
	return r, mapErr(err)
}

// Lock reads a route inside tx for a change, whatever its workspace. Returns ErrNotFound if there is none.
func (s *Routes) Lock(ctx context.Context, tx bun.IDB, id string) (Route, error) {
	var r Route
	err := s.db.forUpdate(tx.NewSelect().Model(&r).Where("rte.id = ?", id)).Scan(ctx)
	return r, mapErr(err)
}

// Save writes a route's state inside tx, stamping updated_at.
func (s *Routes) Save(ctx context.Context, tx bun.IDB, r *Route) error {
	r.UpdatedAt = now()
	res, err := tx.NewUpdate().Model(r).WherePK().
		Column("status", "steps", "step", "message_id", "due_at", "updated_at", "ended_at").Exec(ctx)
	return expectOneRow(res, err)
}

// Due returns the IDs of up to limit pending routes whose next action is due at t, the most overdue first. It
// returns no sentinel errors.
func (s *Routes) Due(ctx context.Context, t time.Time, limit int) ([]string, error) {
	var ids []string
	err := s.db.r.NewSelect().Model((*Route)(nil)).Column("id").
		Where("status = 'pending' AND due_at <= ?", t).OrderExpr("due_at").Limit(int64(limit)).Scan(ctx, &ids)
	return ids, err
}

// List returns a page of a workspace's routes, newest first, and whether more follow. It returns no sentinel errors.
func (s *Routes) List(ctx context.Context, workspaceID string, f RouteFilter, p Page) ([]Route, bool, error) {
	return s.list(ctx, workspaceID, p, func(q *bun.SelectQuery) *bun.SelectQuery {
		if f.PersonID != "" {
			q = q.Where("rte.person_id = ?", f.PersonID)
		}
		if f.Status != "" {
			q = q.Where("rte.status = ?", f.Status)
		}
		if f.PersonIDs != nil {
			q = q.Where("rte.person_id IN (?)", bun.In(append(f.PersonIDs, "")))
		}
		return q
	})
}
