package store

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"time"

	"github.com/uptrace/bun"
)

// Event is one entry of a workspace's event log: what happened, once, whoever receives it.
type Event struct {
	bun.BaseModel `bun:"table:events,alias:ev"`

	ID          string          `bun:"id,pk"`
	WorkspaceID string          `bun:"workspace_id"`
	Type        string          `bun:"type"`
	Data        json.RawMessage `bun:"data,type:json"`
	CreatedAt   time.Time       `bun:"created_at"`
	// InstanceID is the messaging instance the event is about, "" for none.
	InstanceID string `bun:"instance_id,nullzero"`
	// Seq is the event's place in commit order on SQLite, drawn by Insert (see EventPosition); nil on PostgreSQL.
	Seq *int64 `bun:"seq"`
}

// Delivery statuses.
const (
	DeliveryPending   = "pending"
	DeliverySucceeded = "succeeded"
	DeliveryFailed    = "failed"
	DeliverySkipped   = "skipped"
)

// Delivery is one event on its way to one endpoint.
type Delivery struct {
	bun.BaseModel `bun:"table:webhook_deliveries,alias:d"`

	ID          string `bun:"id,pk"`
	WorkspaceID string `bun:"workspace_id"`
	EndpointID  string `bun:"endpoint_id"`
	EventID     string `bun:"event_id"`
	EventType   string `bun:"event_type"`
	Status      string `bun:"status"`
	Attempts    int    `bun:"attempts"`
	// ScheduleStart is Attempts when the retry schedule last restarted (redeliver, recover): the position in the
	// schedule is Attempts - ScheduleStart.
	ScheduleStart  int        `bun:"schedule_start"`
	NextAttemptAt  *time.Time `bun:"next_attempt_at"`
	LeaseUntil     *time.Time `bun:"lease_until"`
	LastStatusCode *int       `bun:"last_status_code"`
	LastError      *string    `bun:"last_error"`
	CreatedAt      time.Time  `bun:"created_at"`
	UpdatedAt      time.Time  `bun:"updated_at"`
	CompletedAt    *time.Time `bun:"completed_at"`
}

// Events is the event log and the table side of the transactional outbox (package events decides what is written).
type Events struct{ workspaceScoped[Event] }

// insertChunk bounds the rows of one multi-row insert, so that a batch of clicks fanned out to several endpoints
// does not become one statement of megabytes.
const insertChunk = 500

// Insert writes events and their deliveries inside tx — the transaction of the business change, so the change,
// its events and its deliveries commit or vanish together — and, on PostgreSQL, wakes the dispatchers of every
// replica at commit when a delivery is pending. It returns no sentinel errors.
//
// Events get their place in commit order (see EventPosition): on SQLite Insert draws their Seq, on PostgreSQL the
// column default records the transaction. Live streams of every replica are woken at commit too (on PostgreSQL a
// notification on EventsChannel; on SQLite they watch commits).
func (s *Events) Insert(ctx context.Context, tx bun.IDB, evs []Event, deliveries []Delivery) error {
	if s.db.dialect == SQLite && len(evs) > 0 {
		last, err := s.db.scanInt(ctx, tx, "UPDATE event_sequence SET last = last + ? WHERE id = 1 RETURNING last", len(evs))
		if err != nil {
			return err
		}
		for i := range evs {
			seq := last - int64(len(evs)-1-i)
			evs[i].Seq = &seq
		}
	}
	if err := insertRows(ctx, s.db, tx, evs); err != nil {
		return err
	}
	if err := insertRows(ctx, s.db, tx, deliveries); err != nil {
		return err
	}
	if len(evs) > 0 {
		if err := s.db.notifyAtCommit(ctx, tx, EventsChannel, ""); err != nil {
			return err
		}
	}
	if slices.ContainsFunc(deliveries, func(d Delivery) bool { return d.Status == DeliveryPending }) {
		return s.db.notifyQueued(ctx, tx)
	}
	return nil
}

// insertChunks inserts rows with multi-row statements of at most emitChunk rows.
func insertChunks[T any](ctx context.Context, tx bun.IDB, rows []T) error {
	for chunk := range slices.Chunk(rows, insertChunk) {
		if _, err := tx.NewInsert().Model(&chunk).Exec(ctx); err != nil {
			return err
		}
	}
	return nil
}

// DeliveriesChannel is the PostgreSQL notification channel that wakes dispatchers when deliveries are queued.
const DeliveriesChannel = "switchboard_deliveries"

// notifyQueued wakes the dispatchers of every replica when tx commits, on PostgreSQL; on SQLite the one dispatcher
// polls (and the process that queued wakes its own).
func (db *DB) notifyQueued(ctx context.Context, tx bun.IDB) error {
	return db.notifyAtCommit(ctx, tx, DeliveriesChannel, "")
}

// Get returns an event of a workspace. Returns ErrNotFound if it is not in that workspace.
func (s *Events) Get(ctx context.Context, workspaceID, id string) (Event, error) {
	return s.get(ctx, workspaceID, id)
}

// CountOf counts a workspace's events, on the reader.
func (s *Events) CountOf(ctx context.Context, workspaceID string) (int64, error) {
	n, err := s.db.r.NewSelect().Model((*Event)(nil)).Where("workspace_id = ?", workspaceID).Count(ctx)
	return int64(n), err
}

// EventFilter narrows a list of events; the zero value lists them all.
type EventFilter struct {
	// Type is an exact type name or a family wildcard ("link.*"); "" and "*" mean every type.
	Type string
	// Instances limits the events about an instance to those of these instances (an API key limited to them);
	// events about no instance are not affected. nil for no limit.
	Instances []string
}

// List returns a page of a workspace's events and whether more follow. It returns no sentinel errors.
func (s *Events) List(ctx context.Context, workspaceID string, f EventFilter, p Page) ([]Event, bool, error) {
	return s.list(ctx, workspaceID, p, func(q *bun.SelectQuery) *bun.SelectQuery {
		switch prefix, family := strings.CutSuffix(f.Type, "*"); {
		case f.Type == "" || f.Type == "*":
		case family:
			// A prefix comparison rather than LIKE, where the "_" of type names would be a wildcard.
			q = q.Where("substr(ev.type, 1, ?) = ?", len(prefix), prefix)
		default:
			q = q.Where("ev.type = ?", f.Type)
		}
		if f.Instances != nil {
			q = q.Where("(ev.instance_id IS NULL OR ev.instance_id IN (?))", bun.In(append([]string{""}, f.Instances...)))
		}
		return q
	})
}
