package store

import (
	"context"
	"encoding/json"
	"time"

	"github.com/uptrace/bun"
)

// Instance statuses the store itself needs to know: the states in which an instance should hold a session.
var instanceStatusesOffline = []string{"created", "disconnected", "logged_out", "failed"}

// Account is the identity an instance is connected as.
type Account struct {
	Address     string   `json:"address"`
	DisplayName string   `json:"display_name,omitempty"`
	IDs         []string `json:"ids,omitempty"`
}

// Instance is a connected channel account of a workspace. Its secrets (the config's writeOnly properties and the
// session's credentials) are stored sealed by the messaging service; the store never sees them in clear.
type Instance struct {
	bun.BaseModel `bun:"table:instances,alias:i"`

	ID               string         `bun:"id,pk"`
	WorkspaceID      string         `bun:"workspace_id"`
	Name             string         `bun:"name"`
	Provider         string         `bun:"provider"`
	Status           string         `bun:"status"`
	StatusReason     string         `bun:"status_reason"`
	StatusSince      time.Time      `bun:"status_since"`
	AuthMethod       *string        `bun:"auth_method"`
	QRCode           *string        `bun:"qr_code"`
	QRExpiresAt      *time.Time     `bun:"qr_expires_at"`
	Account          *Account       `bun:"account,type:json"`
	Credentials      *string        `bun:"credentials"`
	Config           map[string]any `bun:"config,type:json"`
	SealedSecrets    *string        `bun:"sealed_secrets"`
	Metadata         map[string]any `bun:"metadata,type:json"`
	ReconnectAttempt int            `bun:"reconnect_attempt"`
	ReconnectNextAt  *time.Time     `bun:"reconnect_next_at"`
	EventSequence    int64          `bun:"event_sequence"`
	// PacingRate and PacingBurst override the server's send pacing for this instance (nil: the default; a rate of
	// 0: no pacing).
	PacingRate  *int `bun:"pacing_rate"`
	PacingBurst *int `bun:"pacing_burst"`
	// CallsReject declines incoming calls at once (nil: never set), CallsMessage is sent to the caller afterwards.
	CallsReject  *bool   `bun:"calls_reject"`
	CallsMessage *string `bun:"calls_message"`
	// ProxyURL is the forward proxy its connections go through (nil: none), with its user name and its password
	// sealed for the instance.
	ProxyURL            *string `bun:"proxy_url"`
	ProxyUsername       *string `bun:"proxy_username"`
	ProxySealedPassword *string `bun:"proxy_sealed_password"`
	// ProfilePictureMediaID and ProfilePictureID are the account's own picture as last read (the media file and the
	// network's ID of it), so an unchanged picture is not stored again; only SetProfilePicture writes them.
	ProfilePictureMediaID *string   `bun:"profile_picture_media_id"`
	ProfilePictureID      *string   `bun:"profile_picture_id"`
	CreatedAt             time.Time `bun:"created_at"`
	UpdatedAt             time.Time `bun:"updated_at"`
}

// Instances is the repository of instances.
type Instances struct {
	workspaceScoped[Instance]
}

// Create inserts an instance on db (the caller's transaction, beside its event), stamping its times. The caller
// gives it its ID (NewID("ins")): its secrets are sealed for it before the insert. Returns ErrNotFound if the
// workspace does not exist.
func (s *Instances) Create(ctx context.Context, db bun.IDB, i *Instance) error {
	t := now()
	i.CreatedAt, i.UpdatedAt, i.StatusSince = t, t, t
	if i.Config == nil {
		i.Config = map[string]any{}
	}
	if i.Metadata == nil {
		i.Metadata = map[string]any{}
	}
	return s.create(ctx, db, i)
}

// Get returns an instance of a workspace. Returns ErrNotFound if it is not in that workspace.
func (s *Instances) Get(ctx context.Context, workspaceID, id string) (Instance, error) {
	// With parameters (see execParams): every accepted send and every messaging call reads its instance.
	return selectOneParams[Instance](ctx, s.db, s.db.r, s.byID()+" AND i.workspace_id = ?", id, workspaceID)
}

// ByID returns an instance whatever its workspace (for the runtime, which holds instances of every workspace).
// Returns ErrNotFound if there is none.
func (s *Instances) ByID(ctx context.Context, db bun.IDB, id string) (Instance, error) {
	// With a parameter (see execParams): every run of inbound messages reads its instance.
	return selectOneParams[Instance](ctx, s.db, db, s.byID(), id)
}

// Lock reads an instance inside tx for a change. Returns ErrNotFound if it does not exist.
func (s *Instances) Lock(ctx context.Context, tx bun.IDB, id string) (Instance, error) {
	// With a parameter (see execParams): every session report and state move locks its instance.
	return selectOneParams[Instance](ctx, s.db, tx, s.byID()+s.db.forUpdateSQL(), id)
}

// byID is the read of an instance by its ID with a parameter, to which Get, ByID and Lock add their conditions.
func (s *Instances) byID() string {
	return "SELECT " + columnsOf[Instance](s.db, "i") + " FROM instances AS i WHERE i.id = ?"
}

// InstanceFilter narrows a list of instances; empty fields do not.
type InstanceFilter struct {
	Status, Provider string
	// IDs limits the list to these instances (an API key limited to them); nil for no limit.
	IDs []string
}

// List returns a page of a workspace's instances and whether more follow. It returns no sentinel errors.
func (s *Instances) List(ctx context.Context, workspaceID string, f InstanceFilter, p Page) ([]Instance, bool, error) {
	return s.list(ctx, workspaceID, p, func(q *bun.SelectQuery) *bun.SelectQuery {
		if f.Status != "" {
			q = q.Where("i.status = ?", f.Status)
		}
		if f.IDs != nil {
			q = q.Where("i.id IN (?)", bun.In(append([]string{""}, f.IDs...))) // "" keeps IN () valid when empty
		}
		if f.Provider != "" {
			q = q.Where("i.provider = ?", f.Provider)
		}
		return q
	})
}

// Save writes every column of an instance read with Lock inside tx, stamping updated_at, except the profile
// picture's (SetProfilePicture's alone). Returns ErrNotFound if it no longer exists.
func (s *Instances) Save(ctx context.Context, tx bun.IDB, i *Instance) error {
	i.UpdatedAt = now()
	return updateByID(ctx, s.db, tx, i, "workspace_id", "created_at", "event_sequence", "profile_picture_media_id",
		"profile_picture_id")
}

// SetProfilePicture records, inside tx, the account's own picture as last read or set (mediaID nil: none).
func (s *Instances) SetProfilePicture(ctx context.Context, tx bun.IDB, id string, mediaID, pictureID *string) error {
	res, err := tx.NewUpdate().Model((*Instance)(nil)).Set("profile_picture_media_id = ?", mediaID).
		Set("profile_picture_id = ?", pictureID).Where("id = ?", id).Exec(ctx)
	return expectOneRow(res, err)
}

// NextSequence counts one more event of an instance inside tx and returns its number. Returns ErrNotFound if the
// instance does not exist.
func (s *Instances) NextSequence(ctx context.Context, tx bun.IDB, id string) (int64, error) {
	var seq int64
	err := tx.NewUpdate().Model((*Instance)(nil)).Set("event_sequence = event_sequence + 1").Where("id = ?", id).
		Returning("event_sequence").Scan(ctx, &seq)
	return seq, mapErr(err)
}

// NextSequencesOf counts more events of several instances inside tx in one statement: counts maps an instance's
// ID to how many, and the answer maps it to the number of its last; an instance's events are numbered last-n+1 …
// last. Returns ErrNotFound if one of the instances does not exist (the caller's transaction is then to fail,
// which undoes the counts). On PostgreSQL the caller has locked the rows already, in ID order (every transaction that
// counts takes them so), so the statement waits for no lock it could deadlock on.
func (s *Instances) NextSequencesOf(ctx context.Context, tx bun.IDB, counts map[string]int) (map[string]int64, error) {
	out := make(map[string]int64, len(counts))
	if len(counts) == 0 {
		return out, nil
	}
	by, err := json.Marshal(counts)
	if err != nil {
		return nil, err
	}
	// One text with '?' placeholders for any number of instances (see execParams): the counts travel as one JSON
	// object keyed by ID.
	query := "UPDATE instances SET event_sequence = event_sequence + (SELECT CAST(j.value AS INTEGER) FROM json_each(?) AS j " +
		"WHERE j.key = instances.id) WHERE id IN (SELECT key FROM json_each(?)) RETURNING id, event_sequence"
	if s.db.dialect == Postgres {
		query = "UPDATE instances SET event_sequence = event_sequence + (?::jsonb ->> id)::bigint " +
			"WHERE id IN (SELECT jsonb_object_keys(?::jsonb)) RETURNING id, event_sequence"
	}
	rows, err := s.db.queryParams(ctx, tx, query, string(by), string(by))
	if err != nil {
		return nil, mapErr(err)
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		var last int64
		if err := rows.Scan(&id, &last); err != nil {
			return nil, err
		}
		out[id] = last
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if len(out) != len(counts) {
		return nil, ErrNotFound
	}
	return out, nil
}

// Delete removes an instance of a workspace inside tx, with its messages, chats, contacts and groups, and returns
// its last state. Returns ErrNotFound if it is not in that workspace.
func (s *Instances) Delete(ctx context.Context, tx bun.IDB, workspaceID, id string) (Instance, error) {
	return s.delete(ctx, tx, workspaceID, id)
}

// Wanted lists the IDs of the instances that should hold a session: every one not created, disconnected, logged
// out or failed. It returns no sentinel errors.
func (s *Instances) Wanted(ctx context.Context) ([]string, error) {
	var ids []string
	err := s.db.r.NewSelect().Model((*Instance)(nil)).Column("id").
		Where("i.status NOT IN (?)", bun.In(instanceStatusesOffline)).OrderExpr("i.id").Scan(ctx, &ids)
	return ids, err
}

// OfWorkspace returns which of ids name instances of the workspace. It returns no sentinel errors.
func (s *Instances) OfWorkspace(ctx context.Context, workspaceID string, ids []string) (map[string]bool, error) {
	found := map[string]bool{}
	if len(ids) == 0 {
		return found, nil
	}
	var got []string
	err := s.db.r.NewSelect().Model((*Instance)(nil)).Column("id").Where("i.workspace_id = ?", workspaceID).
		Where("i.id IN (?)", bun.In(ids)).Scan(ctx, &got)
	for _, id := range got {
		found[id] = true
	}
	return found, err
}

// WantedAmong returns which of ids should still hold a session (they exist and are not offline). It returns no
// sentinel errors.
func (s *Instances) WantedAmong(ctx context.Context, ids []string) ([]string, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	var out []string
	err := s.db.r.NewSelect().Model((*Instance)(nil)).Column("id").Where("i.id IN (?)", bun.In(ids)).
		Where("i.status NOT IN (?)", bun.In(instanceStatusesOffline)).Scan(ctx, &out)
	return out, err
}

// LockMany reads the instances among ids inside tx, in ID order, and locks their rows on PostgreSQL (FOR NO KEY
// UPDATE, as LockAll); instances that do not exist are left out. It returns no sentinel errors.
func (s *Instances) LockMany(ctx context.Context, tx bun.IDB, ids []string) ([]Instance, error) {
	var out []Instance
	if len(ids) == 0 {
		return out, nil
	}
	q := tx.NewSelect().Model(&out).Where("i.id IN (?)", bun.In(ids)).OrderExpr("i.id")
	if s.db.dialect == Postgres {
		q = q.For("NO KEY UPDATE")
	}
	return out, q.Scan(ctx)
}

// SaveStates writes the connection state of instances read with LockMany inside tx — status, reason and since,
// the pairing fields, the reconnect attempt and its time — in one statement for all of them, stamping updated_at.
// Returns ErrNotFound if one of them no longer exists.
func (s *Instances) SaveStates(ctx context.Context, tx bun.IDB, is []Instance) error {
	if len(is) == 0 {
		return nil
	}
	t := now()
	for k := range is {
		is[k].UpdatedAt = t
	}
	res, err := tx.NewUpdate().Model(&is).Column("status", "status_reason", "status_since", "auth_method", "qr_code",
		"qr_expires_at", "reconnect_attempt", "reconnect_next_at", "updated_at").Bulk().Exec(ctx)
	if err != nil {
		return mapErr(err)
	}
	if n, err := res.RowsAffected(); err == nil && n != int64(len(is)) {
		return ErrNotFound
	}
	return nil
}

// LockAll locks the rows of the instances among ids inside tx, in ID order, on PostgreSQL (FOR NO KEY UPDATE: the
// lock an update of the event sequence takes, so inserts that reference the instances are not held up). On SQLite
// the single writer already serialises transactions. It returns no sentinel errors.
func (s *Instances) LockAll(ctx context.Context, tx bun.IDB, ids []string) error {
	if s.db.dialect != Postgres || len(ids) == 0 {
		return nil
	}
	var got []string
	return tx.NewSelect().Model((*Instance)(nil)).Column("id").Where("i.id IN (?)", bun.In(ids)).
		OrderExpr("i.id").For("NO KEY UPDATE").Scan(ctx, &got)
}

// InstancePacing is an instance's own pacing (nil: none of its own) and its provider, which may have a default.
type InstancePacing struct {
	Provider    string
	Rate, Burst *int
}

// PacingOf returns the own pacing and the provider of the instances among ids, by ID. It returns no sentinel
// errors.
func (s *Instances) PacingOf(ctx context.Context, ids []string) (map[string]InstancePacing, error) {
	out := map[string]InstancePacing{}
	if len(ids) == 0 {
		return out, nil
	}
	var rows []Instance
	err := s.db.r.NewSelect().Model(&rows).Column("id", "provider", "pacing_rate", "pacing_burst").
		Where("i.id IN (?)", bun.In(ids)).Scan(ctx)
	for _, r := range rows {
		out[r.ID] = InstancePacing{Provider: r.Provider, Rate: r.PacingRate, Burst: r.PacingBurst}
	}
	return out, err
}
