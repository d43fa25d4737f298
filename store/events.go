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
}

var _ bun.AfterScanRowHook = (*Event)(nil)

// AfterScanRow normalises timestamps to UTC.
func (e *Event) AfterScanRow(context.Context) error {
	e.CreatedAt = utc(e.CreatedAt)
	return nil
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

var _ bun.AfterScanRowHook = (*Delivery)(nil)

// AfterScanRow normalises timestamps to UTC.
func (d *Delivery) AfterScanRow(context.Context) error {
	d.CreatedAt, d.UpdatedAt = utc(d.CreatedAt), utc(d.UpdatedAt)
	d.NextAttemptAt, d.LeaseUntil, d.CompletedAt = utcPtr(d.NextAttemptAt), utcPtr(d.LeaseUntil), utcPtr(d.CompletedAt)
	return nil
}

// NewEvent is what Emit records.
type NewEvent struct {
	WorkspaceID string
	Type        string
	// Data is the envelope's "data" member, marshalled with encoding/json.
	Data any
}

// optInTypes are the high-volume event types: only endpoints that name the type, or its family ("link.*"), receive
// them; "*" does not. The store is the one place that decides it at run time; the spec's x-event-opt-in marks the
// same types for the catalogue (a handlers test keeps the two equal).
var optInTypes = map[string]bool{ClickedEventType: true, ListedEventType: true}

// OptInEventTypes returns the opt-in event types, by name.
func OptInEventTypes() []string {
	return sortedKeys(optInTypes, strings.Compare)
}

// Events is the event log and the transactional outbox of the webhook engine.
type Events struct{ db *DB }

// emitChunk bounds the rows of one multi-row insert, so that a batch of clicks fanned out to several endpoints does
// not become one statement of megabytes.
const emitChunk = 500

// Emit records an event and one delivery per endpoint of the workspace that subscribes to it, inside tx — the
// transaction of the business change, so the change, its event and its deliveries commit or vanish together.
// Deliveries to active and paused endpoints are pending (a paused endpoint's wait until it resumes); to disabled
// endpoints they are recorded as skipped, so that enabling or recovering can still send them. Areas call it with
// their own transaction: `db.RunInTx(ctx, func(tx) { change; Events.Emit(ctx, tx, …) })`. It returns no sentinel
// errors.
func (s *Events) Emit(ctx context.Context, tx bun.IDB, n NewEvent) (Event, error) {
	evs, err := s.EmitMany(ctx, tx, []NewEvent{n})
	if err != nil {
		return Event{}, err
	}
	return evs[0], nil
}

// EmitMany is Emit for many events in a few statements: one read of the endpoints of their workspaces, multi-row
// inserts of the events and of their deliveries, and one wake-up of the dispatchers when deliveries were queued.
// The events are returned in the order of ns. It returns no sentinel errors.
func (s *Events) EmitMany(ctx context.Context, tx bun.IDB, ns []NewEvent) ([]Event, error) {
	if len(ns) == 0 {
		return nil, nil
	}
	workspaces := make([]string, len(ns))
	for i, n := range ns {
		workspaces[i] = n.WorkspaceID
	}
	endpoints, err := endpointsOf(ctx, tx, workspaces)
	if err != nil {
		return nil, err
	}
	t := now()
	evs := make([]Event, len(ns))
	var deliveries []Delivery
	queued := false
	for i, n := range ns {
		data, err := json.Marshal(n.Data)
		if err != nil {
			return nil, err
		}
		evs[i] = Event{ID: NewID("evt"), WorkspaceID: n.WorkspaceID, Type: n.Type, Data: data, CreatedAt: t}
		for _, e := range endpoints[n.WorkspaceID] {
			if !Subscribed(e.Events, n.Type) {
				continue
			}
			d := Delivery{ID: NewID("dlv"), WorkspaceID: n.WorkspaceID, EndpointID: e.ID, EventID: evs[i].ID,
				EventType: n.Type, Status: DeliveryPending, NextAttemptAt: &t, CreatedAt: t, UpdatedAt: t}
			if e.Status == EndpointDisabled {
				d.Status, d.NextAttemptAt, d.CompletedAt = DeliverySkipped, nil, &t
			} else {
				queued = true
			}
			deliveries = append(deliveries, d)
		}
	}
	if err := insertChunks(ctx, tx, evs); err != nil {
		return nil, err
	}
	if err := insertChunks(ctx, tx, deliveries); err != nil {
		return nil, err
	}
	if queued {
		if err := s.db.notifyQueued(ctx, tx); err != nil {
			return nil, err
		}
	}
	return evs, nil
}

// insertChunks inserts rows with multi-row statements of at most emitChunk rows.
func insertChunks[T any](ctx context.Context, tx bun.IDB, rows []T) error {
	for chunk := range slices.Chunk(rows, emitChunk) {
		if _, err := tx.NewInsert().Model(&chunk).Exec(ctx); err != nil {
			return err
		}
	}
	return nil
}

// endpointsOf reads what Emit needs of the endpoints of the workspaces (duplicates allowed), by workspace, in one
// statement.
func endpointsOf(ctx context.Context, db bun.IDB, workspaceIDs []string) (map[string][]WebhookEndpoint, error) {
	ids := slices.Clone(workspaceIDs)
	slices.Sort(ids)
	ids = slices.Compact(ids)
	var endpoints []WebhookEndpoint
	if err := db.NewSelect().Model(&endpoints).Column("id", "workspace_id", "events", "status").
		Where("e.workspace_id IN (?)", bun.In(ids)).Scan(ctx); err != nil {
		return nil, err
	}
	out := make(map[string][]WebhookEndpoint, len(ids))
	for _, e := range endpoints {
		out[e.WorkspaceID] = append(out[e.WorkspaceID], e)
	}
	return out, nil
}

// subscribers returns the workspaces among workspaceIDs where an endpoint subscribes to eventType: the check that
// keeps opt-in events (clicks, list audits) from being written at all while nobody would receive them.
func subscribers(ctx context.Context, db bun.IDB, eventType string, workspaceIDs ...string) (map[string]bool, error) {
	endpoints, err := endpointsOf(ctx, db, workspaceIDs)
	if err != nil {
		return nil, err
	}
	out := map[string]bool{}
	for ws, es := range endpoints {
		if slices.ContainsFunc(es, func(e WebhookEndpoint) bool { return Subscribed(e.Events, eventType) }) {
			out[ws] = true
		}
	}
	return out, nil
}

// DeliveriesChannel is the PostgreSQL notification channel that wakes dispatchers when deliveries are queued.
const DeliveriesChannel = "switchboard_deliveries"

// notifyQueued wakes the dispatchers of every replica when tx commits, on PostgreSQL; on SQLite the one dispatcher
// polls (and the process that queued wakes its own).
func (db *DB) notifyQueued(ctx context.Context, tx bun.IDB) error {
	if db.dialect != Postgres {
		return nil
	}
	_, err := tx.ExecContext(ctx, "SELECT pg_notify(?, '')", DeliveriesChannel)
	return err
}

// Subscribed reports whether an endpoint subscribed to patterns receives an event type: an exact name, a family
// wildcard ("link.*" matches "link.created" and "link.max_clicks_reached", not "linked.x"), or "*" — which does not
// include the opt-in (high-volume) types.
func Subscribed(patterns []string, eventType string) bool {
	for _, p := range patterns {
		switch {
		case p == eventType:
			return true
		case p == "*":
			if !optInTypes[eventType] {
				return true
			}
		case strings.HasSuffix(p, ".*") && strings.HasPrefix(eventType, strings.TrimSuffix(p, "*")):
			return true
		}
	}
	return false
}

// Get returns an event of a workspace. Returns ErrNotFound if it is not in that workspace.
func (s *Events) Get(ctx context.Context, workspaceID, id string) (Event, error) {
	var ev Event
	err := s.db.r.NewSelect().Model(&ev).Where("ev.id = ? AND ev.workspace_id = ?", id, workspaceID).Scan(ctx)
	return ev, mapErr(err)
}

// EventFilter narrows a list of events; the zero value lists them all.
type EventFilter struct {
	// Type is an exact type name or a family wildcard ("link.*"); "" and "*" mean every type.
	Type string
}

// List returns a page of a workspace's events and whether more follow. It returns no sentinel errors.
func (s *Events) List(ctx context.Context, workspaceID string, f EventFilter, p Page) ([]Event, bool, error) {
	evs := []Event{}
	q := s.db.r.NewSelect().Model(&evs).Where("ev.workspace_id = ?", workspaceID)
	switch prefix, family := strings.CutSuffix(f.Type, "*"); {
	case f.Type == "" || f.Type == "*":
	case family:
		// A prefix comparison rather than LIKE, where the "_" of type names would be a wildcard.
		q = q.Where("substr(ev.type, 1, ?) = ?", len(prefix), prefix)
	default:
		q = q.Where("ev.type = ?", f.Type)
	}
	if err := p.apply(q, "ev.id").Scan(ctx); err != nil {
		return nil, false, err
	}
	evs, more := pageOf(evs, p)
	return evs, more, nil
}
