package store

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/uptrace/bun"
)

// Attempt is one HTTP attempt of a delivery, as the delivery log shows it.
type Attempt struct {
	bun.BaseModel `bun:"table:webhook_attempts,alias:a"`

	ID              string    `bun:"id,pk"`
	DeliveryID      string    `bun:"delivery_id"`
	StartedAt       time.Time `bun:"started_at"`
	DurationMS      int       `bun:"duration_ms"`
	StatusCode      *int      `bun:"status_code"`
	ErrorClass      *string   `bun:"error_class"`
	ResponseExcerpt *string   `bun:"response_excerpt"`
	// ResponseHeaders are the receiver's response headers (nil when it gave no response, and for attempts logged
	// before they were kept).
	ResponseHeaders map[string]string `bun:"response_headers,type:json"`
	// Signature is the webhook-signature header the attempt was sent with (nil for attempts logged before it was
	// kept).
	Signature *string `bun:"signature"`
}

// Deliveries is the queue and log of webhook deliveries.
type Deliveries struct{ workspaceScoped[Delivery] }

// ClaimedDelivery is a leased delivery with the event it carries.
type ClaimedDelivery struct {
	Delivery
	Event Event
	// EndpointVersion is the version of the endpoint's row at the claim (see VersionedEndpoint).
	EndpointVersion string
}

// claimRow is a row of PostgreSQL's claim: the delivery, then its event's data and time and its endpoint's version.
type claimRow struct {
	Delivery        `bun:",extend"`
	EventData       json.RawMessage `bun:"event_data"`
	EventCreatedAt  time.Time       `bun:"event_created_at"`
	EndpointVersion string          `bun:"endpoint_version"`
}

// VersionedEndpoint is an endpoint with the version of its row: on PostgreSQL its xmin, which every update of the
// row changes, so that a reader can keep an endpoint until a claim shows another version; "" on SQLite (always
// read again).
type VersionedEndpoint struct {
	WebhookEndpoint `bun:",extend"`
	Version         string `bun:"version"`
}

// Claim leases up to limit due deliveries of active endpoints until now+lease, leaving out the endpoints in exclude
// (those at their in-flight cap or rate limit), and returns them with their events. Deliveries come in the order
// they fell due, and those due at the same instant in the order they were queued (IDs are time-ordered), so a
// backlog — deliveries that waited for a receiver to come back or for an endpoint to resume — goes out in event
// order. A delivery deleted (with its event) since it was leased is left out.
//
// On PostgreSQL it is one statement, its own transaction (a function; see its migration), and FOR UPDATE SKIP
// LOCKED lets any number of dispatchers claim concurrently without taking the same delivery. On SQLite the single
// writer serialises claims, and a read connection first checks whether anything is claimable at all: the one
// dispatcher is woken by every commit (click batches included), and most of those wake-ups find nothing due, which
// must not take the writer. A delivery whose lease ran out (its dispatcher died) is due again and keeps its ID, so
// the receiver sees the same webhook-id. A claim lost in a crash of the database server is only claimed again: it
// does not wait for a disk flush.
func (s *Deliveries) Claim(ctx context.Context, now time.Time, lease time.Duration, limit int, exclude []string) ([]ClaimedDelivery, error) {
	now = now.UTC().Truncate(time.Microsecond)
	var out []ClaimedDelivery
	if s.db.dialect == Postgres {
		var rows []claimRow
		err := s.db.w.NewRaw("SELECT * FROM switchboard_claim_webhook_deliveries(?, ?, ?, ?::text[])",
			now, now.Add(lease), limit, pgTexts(exclude, same)).Scan(ctx, &rows)
		if err != nil {
			return nil, err
		}
		out = make([]ClaimedDelivery, len(rows))
		for i, r := range rows {
			out[i] = ClaimedDelivery{Delivery: r.Delivery, Event: Event{ID: r.EventID, WorkspaceID: r.WorkspaceID,
				Type: r.EventType, Data: r.EventData, CreatedAt: r.EventCreatedAt}, EndpointVersion: r.EndpointVersion}
		}
	} else {
		due, err := claimable(s.db.r.NewSelect(), now, exclude).Exists(ctx)
		if err != nil || !due {
			return nil, err
		}
		var ds []Delivery
		sub := claimable(s.db.w.NewSelect(), now, exclude).Column("d2.id").OrderExpr("d2.next_attempt_at, d2.id").Limit(int64(limit))
		_, err = s.db.w.NewUpdate().Model(&ds).ModelTableExpr("webhook_deliveries AS d").
			Set("lease_until = ?", now.Add(lease)).Set("updated_at = ?", now).
			Where("d.id IN (?)", sub).Returning("*").Exec(ctx, &ds)
		if err != nil || len(ds) == 0 {
			return nil, err
		}
		ids := make([]string, len(ds))
		for i, d := range ds {
			ids[i] = d.EventID
		}
		var evs []Event
		if err := s.db.whereOneOf(s.db.r.NewSelect().Model(&evs), "ev.id", ids).Scan(ctx); err != nil {
			return nil, err
		}
		byID := make(map[string]Event, len(evs))
		for _, ev := range evs {
			byID[ev.ID] = ev
		}
		for _, d := range ds {
			if ev, ok := byID[d.EventID]; ok {
				out = append(out, ClaimedDelivery{Delivery: d, Event: ev})
			}
		}
	}
	// UPDATE … RETURNING returns rows in no particular order.
	sortDeliveries(out)
	return out, nil
}

// claimable selects, as d2, the deliveries Claim may take at now on SQLite: pending, due, not leased, of an active
// endpoint not in exclude. The pending partial index serves it in due order. (PostgreSQL's claim function runs the
// same selection.)
func claimable(q *bun.SelectQuery, now time.Time, exclude []string) *bun.SelectQuery {
	// The endpoint's status is checked with NOT EXISTS rather than a join: an anti-join keeps the deliveries as the
	// driving side, so walking the pending index in order stops at the limit.
	q = q.TableExpr("webhook_deliveries AS d2").
		Where("d2.status = ?", DeliveryPending).Where("d2.next_attempt_at <= ?", now).
		Where("(d2.lease_until IS NULL OR d2.lease_until <= ?)", now).
		Where("NOT EXISTS (SELECT 1 FROM webhook_endpoints AS e WHERE e.id = d2.endpoint_id AND e.status <> ?)", EndpointActive)
	if len(exclude) > 0 {
		q = q.Where("d2.endpoint_id NOT IN (?)", bun.In(exclude))
	}
	return q
}

// sortDeliveries orders claimed deliveries as Claim promises: by due time, then ID.
func sortDeliveries(ds []ClaimedDelivery) {
	slices.SortFunc(ds, func(a, b ClaimedDelivery) int {
		if c := cmp.Compare(dueTime(a.Delivery).UnixMicro(), dueTime(b.Delivery).UnixMicro()); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
}

func dueTime(d Delivery) time.Time {
	if d.NextAttemptAt == nil {
		return time.Time{}
	}
	return *d.NextAttemptAt
}

// ForSending returns endpoints of claimed deliveries by ID, with their versions, in one query, so a dispatcher
// does not read them once per delivery. An endpoint missing from the map was deleted (with its deliveries) after
// the claim. It returns no sentinel errors.
func (s *Deliveries) ForSending(ctx context.Context, ids []string) (map[string]VersionedEndpoint, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	version := "''"
	if s.db.dialect == Postgres {
		version = "e.xmin::text"
	}
	var es []VersionedEndpoint
	q := s.db.r.NewSelect().Model(&es).ColumnExpr("e.*").ColumnExpr(version + " AS version")
	if err := s.db.whereOneOf(q, "e.id", ids).Scan(ctx); err != nil {
		return nil, err
	}
	endpoints := make(map[string]VersionedEndpoint, len(es))
	for _, e := range es {
		endpoints[e.ID] = e
	}
	return endpoints, nil
}

// ForRecording reads, inside tx, the deliveries among ids that still exist (those deleted with their endpoint or
// event are missing), so that recording attempts judges them as the transaction sees them. It returns no sentinel
// errors.
func (s *Deliveries) ForRecording(ctx context.Context, tx bun.IDB, ids []string) ([]Delivery, error) {
	var ds []Delivery
	err := s.db.whereOneOf(tx.NewSelect().Model(&ds), "d.id", ids).Scan(ctx)
	return ds, err
}

// UpdateStates writes, inside tx and in one statement, what attempts changed of deliveries: status, attempts,
// next_attempt_at, lease_until, last_status_code, last_error, updated_at and completed_at. A statement per delivery
// is what would limit a recorder on PostgreSQL. It returns no sentinel errors.
func (s *Deliveries) UpdateStates(ctx context.Context, tx bun.IDB, ds []Delivery) error {
	if len(ds) == 0 {
		return nil
	}
	if s.db.dialect == Postgres {
		// One array per column, to a function whose plan the connection keeps (see its migration).
		_, err := tx.NewRaw(`SELECT switchboard_record_webhook_deliveries(?::text[], ?::text[], ?::int[],
				?::timestamptz[], ?::timestamptz[], ?::int[], ?::text[], ?::timestamptz[], ?::timestamptz[])`,
			pgTexts(ds, func(d Delivery) string { return d.ID }),
			pgTexts(ds, func(d Delivery) string { return d.Status }),
			pgInts(ds, func(d Delivery) int { return d.Attempts }),
			pgOptTimes(ds, func(d Delivery) *time.Time { return d.NextAttemptAt }),
			pgOptTimes(ds, func(d Delivery) *time.Time { return d.LeaseUntil }),
			pgOptInts(ds, func(d Delivery) *int { return d.LastStatusCode }),
			pgOptTexts(ds, func(d Delivery) *string { return d.LastError }),
			pgTimes(ds, func(d Delivery) time.Time { return d.UpdatedAt }),
			pgOptTimes(ds, func(d Delivery) *time.Time { return d.CompletedAt })).Exec(ctx)
		return err
	}
	_, err := tx.NewUpdate().Model(&ds).Column("status", "attempts", "next_attempt_at", "lease_until",
		"last_status_code", "last_error", "updated_at", "completed_at").Bulk().Exec(ctx)
	return err
}

// LogAttempts adds attempts to the delivery log inside tx, in one statement. It returns no sentinel errors.
func (s *Deliveries) LogAttempts(ctx context.Context, tx bun.IDB, as []Attempt) error {
	if len(as) == 0 {
		return nil
	}
	if s.db.dialect == Postgres {
		_, err := tx.NewRaw(`SELECT switchboard_log_webhook_attempts(?::text[], ?::text[], ?::timestamptz[], ?::int[],
				?::int[], ?::text[], ?::text[], ?::jsonb[], ?::text[])`,
			pgTexts(as, func(a Attempt) string { return a.ID }),
			pgTexts(as, func(a Attempt) string { return a.DeliveryID }),
			pgTimes(as, func(a Attempt) time.Time { return a.StartedAt }),
			pgInts(as, func(a Attempt) int { return a.DurationMS }),
			pgOptInts(as, func(a Attempt) *int { return a.StatusCode }),
			pgOptTexts(as, func(a Attempt) *string { return a.ErrorClass }),
			pgOptTexts(as, func(a Attempt) *string { return a.ResponseExcerpt }),
			pgArray(as, responseHeaders),
			pgOptTexts(as, func(a Attempt) *string { return a.Signature })).Exec(ctx)
		return err
	}
	// Bun would read back the nil fields it writes as DEFAULT (RETURNING): a result set nobody uses, and a statement
	// a pipelined transaction could not hold back until its commit.
	_, err := tx.NewInsert().Model(&as).Returning("NULL").Exec(ctx)
	return err
}

// LeasedSuccess is a successful attempt of a delivery that a dispatcher claimed under Lease; Attempt.DeliveryID
// names the delivery.
type LeasedSuccess struct {
	Lease   time.Time
	Attempt Attempt
}

// RecordSuccesses records a batch of successful attempts at t in one statement, its own transaction, on PostgreSQL
// (see its migration): each delivery still held under its lease succeeds and its endpoint's run of failures ends;
// the attempts of the deliveries that exist are logged. It returns the deliveries it left alone, each with whether
// it is superseded (it exists, under another lease) rather than gone. A delivery appears at most once in ss. Like a
// repeatable transaction, its commit does not wait for a disk flush. SQLite has no such function: ErrUnsupported.
func (s *Deliveries) RecordSuccesses(ctx context.Context, t time.Time, ss []LeasedSuccess) (map[string]bool, error) {
	if s.db.dialect != Postgres {
		return nil, errors.ErrUnsupported
	}
	if len(ss) == 0 {
		return nil, nil
	}
	var left []struct {
		ID         string `bun:"left_id"`
		Superseded bool   `bun:"superseded"`
	}
	err := s.db.w.NewRaw(`SELECT * FROM switchboard_record_webhook_successes(?, ?::text[], ?::timestamptz[],
			?::text[], ?::timestamptz[], ?::int[], ?::int[], ?::text[], ?::text[], ?::jsonb[], ?::text[])`,
		t.UTC().Truncate(time.Microsecond),
		pgTexts(ss, func(x LeasedSuccess) string { return x.Attempt.DeliveryID }),
		pgTimes(ss, func(x LeasedSuccess) time.Time { return x.Lease }),
		pgTexts(ss, func(x LeasedSuccess) string { return x.Attempt.ID }),
		pgTimes(ss, func(x LeasedSuccess) time.Time { return x.Attempt.StartedAt }),
		pgInts(ss, func(x LeasedSuccess) int { return x.Attempt.DurationMS }),
		pgOptInts(ss, func(x LeasedSuccess) *int { return x.Attempt.StatusCode }),
		pgOptTexts(ss, func(x LeasedSuccess) *string { return x.Attempt.ErrorClass }),
		pgOptTexts(ss, func(x LeasedSuccess) *string { return x.Attempt.ResponseExcerpt }),
		pgArray(ss, func(x LeasedSuccess) (string, bool) { return responseHeaders(x.Attempt) }),
		pgOptTexts(ss, func(x LeasedSuccess) *string { return x.Attempt.Signature })).Scan(ctx, &left)
	if err != nil || len(left) == 0 {
		return nil, err
	}
	out := make(map[string]bool, len(left))
	for _, l := range left {
		out[l.ID] = l.Superseded
	}
	return out, nil
}

// responseHeaders is the jsonb array element of an attempt's response headers (false: NULL).
func responseHeaders(a Attempt) (string, bool) {
	if a.ResponseHeaders == nil {
		return "", false
	}
	b, _ := json.Marshal(a.ResponseHeaders) // a map of strings always marshals
	return string(b), true
}

// Attempts returns a delivery's attempts, oldest first.
func (s *Deliveries) Attempts(ctx context.Context, deliveryID string) ([]Attempt, error) {
	as := []Attempt{}
	err := s.db.r.NewSelect().Model(&as).Where("a.delivery_id = ?", deliveryID).Order("a.id").Scan(ctx)
	return as, err
}

// EndpointAttempts returns the attempts of an endpoint's deliveries that started at or after since, newest first,
// at most limit. It returns no sentinel errors.
func (s *Deliveries) EndpointAttempts(ctx context.Context, endpointID string, since time.Time, limit int) ([]Attempt, error) {
	as := []Attempt{}
	err := s.db.r.NewSelect().Model(&as).
		Join("JOIN webhook_deliveries AS d ON d.id = a.delivery_id").
		Where("d.endpoint_id = ? AND a.started_at >= ?", endpointID, since.UTC()).
		OrderExpr("a.started_at DESC").Limit(int64(limit)).Scan(ctx)
	return as, err
}

// ForEvents returns the deliveries of a workspace's events, one per endpoint each went to, oldest first. It returns
// no sentinel errors.
func (s *Deliveries) ForEvents(ctx context.Context, workspaceID string, eventIDs []string) ([]Delivery, error) {
	ds := []Delivery{}
	if len(eventIDs) == 0 {
		return ds, nil
	}
	err := s.db.r.NewSelect().Model(&ds).Where("d.workspace_id = ? AND d.event_id IN (?)", workspaceID, bun.In(eventIDs)).
		Order("d.id").Scan(ctx)
	return ds, err
}

// Get returns a delivery of a workspace. Returns ErrNotFound if it is not in that workspace.
func (s *Deliveries) Get(ctx context.Context, workspaceID, id string) (Delivery, error) {
	return s.get(ctx, workspaceID, id)
}

// Release gives back leased deliveries without an attempt: a dispatcher claimed more of one endpoint than its
// in-flight cap or rate allows. They are due again at notBefore (at once when it is zero or past); until then no
// dispatcher claims them.
func (s *Deliveries) Release(ctx context.Context, ids []string, notBefore time.Time) error {
	if len(ids) == 0 {
		return nil
	}
	var until *time.Time
	if !notBefore.IsZero() {
		u := notBefore.UTC().Truncate(time.Microsecond)
		until = &u
	}
	return s.db.repeatable(ctx, asyncCommit, func(idb bun.IDB) error {
		_, err := idb.NewUpdate().Table("webhook_deliveries").Set("lease_until = ?", until).
			Where("id IN (?) AND status = ?", bun.In(ids), DeliveryPending).Exec(ctx)
		return err
	})
}

// QueueStats describes the delivery queue, for metrics.
type QueueStats struct {
	// Pending counts the deliveries waiting for an attempt, due now or later, whatever their endpoint's status.
	Pending int64
	// OldestDue is when the longest-waiting due delivery of an active endpoint fell due (nil when none is due):
	// the age of the backlog the dispatchers have not caught up with. Paused and disabled endpoints wait on purpose
	// and are left out.
	OldestDue *time.Time
}

// QueueStats reads the state of the delivery queue at now, with two indexed queries.
func (s *Deliveries) QueueStats(ctx context.Context, now time.Time) (QueueStats, error) {
	var st QueueStats
	n, err := s.db.r.NewSelect().Table("webhook_deliveries").Where("status = ?", DeliveryPending).Count(ctx)
	if err != nil {
		return st, err
	}
	st.Pending = n
	var due []time.Time
	err = s.db.r.NewSelect().TableExpr("webhook_deliveries AS d").Column("d.next_attempt_at").
		Join("JOIN webhook_endpoints AS e ON e.id = d.endpoint_id").
		Where("d.status = ?", DeliveryPending).Where("d.next_attempt_at <= ?", now.UTC().Truncate(time.Microsecond)).
		Where("e.status = ?", EndpointActive).OrderExpr("d.next_attempt_at").Limit(1).Scan(ctx, &due)
	if err != nil {
		return st, err
	}
	if len(due) == 1 {
		st.OldestDue = &due[0]
	}
	return st, nil
}
