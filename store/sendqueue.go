package store

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"time"

	"github.com/uptrace/bun"
)

// SendChannel is the PostgreSQL notification channel that wakes the send queues of every process when messages are
// queued.
const SendChannel = "switchboard_send"

// SendItem is an outbound message in the send queue.
type SendItem struct {
	bun.BaseModel `bun:"table:send_queue,alias:q"`

	MessageID     string     `bun:"message_id,pk"`
	WorkspaceID   string     `bun:"workspace_id"`
	InstanceID    string     `bun:"instance_id"`
	Chat          string     `bun:"chat"`
	Attempts      int        `bun:"attempts"`
	NextAttemptAt time.Time  `bun:"next_attempt_at"`
	LeaseUntil    *time.Time `bun:"lease_until"`
	LastError     *string    `bun:"last_error"`
	CreatedAt     time.Time  `bun:"created_at"`
}

// SendOutcome is what recording an attempt does to its item: Done removes it (sent, failed or nothing left to
// send); otherwise it is due again at RetryAt with LastError.
type SendOutcome struct {
	MessageID string
	// Lease is the lease_until the claim gave the item: the outcome is recorded only while the item still holds it.
	Lease     time.Time
	Done      bool
	RetryAt   time.Time
	LastError string
	// Attempts is the item's count of attempts after this one (a retry of a send that never reached the network
	// does not count).
	Attempts int
}

// SendQueue is the durable send queue of outbound messages.
type SendQueue struct{ db *DB }

// Enqueue adds items inside tx (the transaction that stores their messages), due now, and wakes the queues of
// every process when tx commits.
func (s *SendQueue) Enqueue(ctx context.Context, tx bun.IDB, items []SendItem) error {
	if len(items) == 0 {
		return nil
	}
	t := now()
	for i := range items {
		items[i].CreatedAt, items[i].NextAttemptAt = t, t
	}
	if _, err := tx.NewInsert().Model(&items).Exec(ctx); err != nil {
		return mapErr(err)
	}
	return s.db.notifyAtCommit(ctx, tx, SendChannel, "")
}

// AnyDue reports whether any item of the queue, of any instance, is due at at and not leased — when none is, no
// instance has anything to claim (Due is the exact answer for some instances): one probe of the due index on a read
// connection. Most wake-ups of an idle queue find nothing due at all — any commit of the process wakes it, and a
// restart of thousands of instances commits hundreds of times a second — and this answers them without listing the
// instances that may send or looking at each one's chat heads (Due). It returns no sentinel errors.
func (s *SendQueue) AnyDue(ctx context.Context, at time.Time) (bool, error) {
	at = at.UTC().Truncate(time.Microsecond)
	n, err := s.db.scanInt(ctx, s.db.r, "SELECT CASE WHEN EXISTS (SELECT 1 FROM send_queue WHERE next_attempt_at <= ? "+
		"AND (lease_until IS NULL OR lease_until <= ?)) THEN 1 ELSE 0 END", at, at)
	return n > 0, err
}

// Due reports whether an item of the instances given, leaving out those in exclude, may be claimed at at: a look
// on a read connection, so that a wake-up that finds nothing due (most are: any commit of the process wakes the
// queue) takes no writer on SQLite. It returns no sentinel errors.
func (s *SendQueue) Due(ctx context.Context, at time.Time, instances, exclude []string) (bool, error) {
	instances = claimFrom(instances, exclude)
	if len(instances) == 0 {
		return false, nil
	}
	// With parameters (see execParams): the queue looks before every claim.
	where, args := s.claimableParams(at.UTC().Truncate(time.Microsecond), instances)
	n, err := s.db.scanInt(ctx, s.db.r, "SELECT CASE WHEN EXISTS (SELECT 1 FROM send_queue AS q2 WHERE "+where+") THEN 1 ELSE 0 END", args...)
	return n > 0, err
}

// claimableParams is the condition of claimable on q2 with parameters, and its arguments.
func (s *SendQueue) claimableParams(at time.Time, instances []string) (string, []any) {
	heads, arg := s.headsParams(instances)
	in := "q2.message_id IN (" + heads + ")"
	if s.db.dialect == Postgres {
		// As an array: PostgreSQL then looks the few heads up by primary key, where it hashes IN's subquery
		// against a scan of the whole queue (it cannot tell how few heads the recursive query returns).
		in = "q2.message_id = ANY(ARRAY(" + heads + "))"
	}
	return in + " AND q2.next_attempt_at <= ? AND (q2.lease_until IS NULL OR q2.lease_until <= ?)", []any{arg, at, at}
}

// headsParams is a statement that selects the heads of the chats of instances (the lowest message ID of each
// (instance, chat)), with its one argument. It skips through the index on (instance_id, chat, message_id): one seek
// for each chat's successor and one for its head, so that finding the heads reads two index entries a chat however
// long the backlog behind them. (A GROUP BY over the index reads every entry of the instances: each claim under a
// backlog of 10,000 messages read all 10,000, twice with its look before.)
func (s *SendQueue) headsParams(instances []string) (string, any) {
	list, arg := "SELECT i.value FROM unnest(?::text[]) AS i(value)", any(pgTexts(instances, same))
	if s.db.dialect == SQLite {
		b, _ := json.Marshal(instances)
		list, arg = "SELECT i.value FROM json_each(?) AS i", string(b)
	}
	return "WITH RECURSIVE c(instance_id, chat) AS (" +
		"SELECT l.value, (SELECT MIN(s.chat) FROM send_queue AS s WHERE s.instance_id = l.value) FROM (" + list + ") AS l " +
		"UNION ALL SELECT c.instance_id, (SELECT MIN(s.chat) FROM send_queue AS s WHERE s.instance_id = c.instance_id AND s.chat > c.chat) " +
		"FROM c WHERE c.chat IS NOT NULL) " +
		"SELECT (SELECT MIN(s.message_id) FROM send_queue AS s WHERE s.instance_id = c.instance_id AND s.chat = c.chat) " +
		"FROM c WHERE c.chat IS NOT NULL", arg
}

func claimFrom(instances, exclude []string) []string {
	return slices.DeleteFunc(slices.Clone(instances), func(id string) bool { return slices.Contains(exclude, id) })
}

// claimable selects the items that may be claimed at at: the heads of the chats of instances (see headsParams), due
// and not leased.
func (s *SendQueue) claimable(db bun.IDB, at time.Time, instances []string) *bun.SelectQuery {
	where, args := s.claimableParams(at, instances)
	return db.NewSelect().TableExpr("send_queue AS q2").Where(where, args...)
}

// Claim leases, inside tx, up to limit items until now+lease among the instances given (those whose sessions this
// process holds and are connected), leaving out the instances in exclude, and at most perInstance of one instance
// (no limit when zero). Only the oldest item of a chat can be claimed, so a chat's messages go out in the order
// they were queued, one at a time; a head waiting for a retry holds its chat. The instances take turns: every
// instance's oldest head comes before any instance's second, so an instance with a long backlog over many chats
// never holds back a quiet one's message for more than a claim. Items come oldest first.
//
// On PostgreSQL, lock runs first with the instances that have items to claim, in ID order: the caller locks their
// rows there, before the claim locks any item, in the order every transaction that changes an instance and its
// queue (a send, a cancel, an instance's deletion) takes them, so that none of them deadlocks with a claim.
func (s *SendQueue) Claim(ctx context.Context, tx bun.IDB, at time.Time, lease time.Duration, limit, perInstance int,
	instances, exclude []string, lock func(ctx context.Context, ids []string) error) ([]SendItem, error) {
	instances = claimFrom(instances, exclude)
	if len(instances) == 0 || limit <= 0 {
		return nil, nil
	}
	if perInstance <= 0 {
		perInstance = limit
	}
	at = at.UTC().Truncate(time.Microsecond)
	if s.db.dialect == Postgres {
		var due []string
		if err := s.claimable(tx, at, instances).ColumnExpr("DISTINCT q2.instance_id").Scan(ctx, &due); err != nil {
			return nil, err
		}
		if len(due) == 0 {
			return nil, nil
		}
		slices.Sort(due)
		if err := lock(ctx, due); err != nil {
			return nil, err
		}
		instances = due
	}
	// Each head's turn in its instance (1 for its oldest head), so that the claim takes the instances' heads in
	// turns and at most perInstance of one.
	if s.db.dialect == SQLite {
		// With parameters (see execParams): every claim runs it.
		where, args := s.claimableParams(at, instances)
		out, err := selectParams[SendItem](ctx, s.db, tx, "UPDATE send_queue AS q SET lease_until = ?, attempts = attempts + 1 "+
			"WHERE q.message_id IN (SELECT q3.message_id FROM send_queue AS q3 JOIN (SELECT q2.message_id, "+
			"ROW_NUMBER() OVER (PARTITION BY q2.instance_id ORDER BY q2.message_id) AS turn FROM send_queue AS q2 WHERE "+
			where+") AS r ON r.message_id = q3.message_id WHERE r.turn <= ? ORDER BY r.turn, q3.message_id LIMIT ?) "+
			"RETURNING "+columnsOf[SendItem](s.db, ""),
			append(append([]any{at.Add(lease)}, args...), perInstance, limit)...)
		if err != nil {
			return nil, err
		}
		slices.SortFunc(out, func(a, b SendItem) int { return strings.Compare(a.MessageID, b.MessageID) })
		return out, nil
	}
	ranked := s.claimable(tx, at, instances).Column("q2.message_id").
		ColumnExpr("ROW_NUMBER() OVER (PARTITION BY q2.instance_id ORDER BY q2.message_id) AS turn")
	sub := tx.NewSelect().TableExpr("send_queue AS q3").Column("q3.message_id").
		Join("JOIN (?) AS r ON r.message_id = q3.message_id", ranked).
		Where("r.turn <= ?", perInstance).OrderExpr("r.turn, q3.message_id").Limit(int64(limit))
	if s.db.dialect == Postgres {
		sub = sub.For("UPDATE OF q3 SKIP LOCKED")
	}
	var out []SendItem
	_, err := tx.NewUpdate().Model(&out).ModelTableExpr("send_queue AS q").
		Set("lease_until = ?", at.Add(lease)).Set("attempts = attempts + 1").
		Where("q.message_id IN (?)", sub).Returning("*").Exec(ctx, &out)
	if err != nil {
		return nil, err
	}
	slices.SortFunc(out, func(a, b SendItem) int { return strings.Compare(a.MessageID, b.MessageID) })
	return out, nil
}

// Unclaim gives back every claim on the items of instances, whoever made it, so that they are due again at once:
// for instances whose last holder is known to be gone (its claims would only run out). A late outcome of such a
// claim is no longer recorded (Settle). It returns no sentinel errors.
func (s *SendQueue) Unclaim(ctx context.Context, instances []string) error {
	if len(instances) == 0 {
		return nil
	}
	_, err := s.db.w.NewUpdate().Table("send_queue").Set("lease_until = NULL").
		Where("instance_id IN (?)", bun.In(instances)).Where("lease_until IS NOT NULL").Exec(ctx)
	return err
}

// Release gives claimed items back on db without an attempt (their attempt is not counted); they are due again at
// notBefore (now when zero).
func (s *SendQueue) Release(ctx context.Context, db bun.IDB, items []SendItem, notBefore time.Time) error {
	if len(items) == 0 {
		return nil
	}
	ids := make([]string, len(items))
	for i, it := range items {
		ids[i] = it.MessageID
	}
	q := db.NewUpdate().Table("send_queue").Set("lease_until = NULL").Set("attempts = attempts - 1").
		Where("message_id IN (?)", bun.In(ids))
	if !notBefore.IsZero() {
		q = q.Set("next_attempt_at = ?", notBefore.UTC().Truncate(time.Microsecond))
	}
	_, err := q.Exec(ctx)
	return err
}

// Settle records outcomes inside tx, each only while its item still holds the lease of its claim, and returns the
// message IDs it recorded (the others were taken over after their lease ran out, or canceled). The items done go in
// one statement: a batch of outcomes is mostly sends that went out.
func (s *SendQueue) Settle(ctx context.Context, tx bun.IDB, outcomes []SendOutcome) ([]string, error) {
	var held []string
	var done []string
	var doneArgs []any
	for _, o := range outcomes {
		lease := o.Lease.UTC().Truncate(time.Microsecond)
		if o.Done {
			done = append(done, "(message_id = ? AND lease_until = ?)")
			doneArgs = append(doneArgs, o.MessageID, lease)
			continue
		}
		res, err := s.db.execParams(ctx, tx, "UPDATE send_queue SET lease_until = NULL, next_attempt_at = ?, "+
			"last_error = ?, attempts = ? WHERE message_id = ? AND lease_until = ?",
			o.RetryAt.UTC().Truncate(time.Microsecond), o.LastError, o.Attempts, o.MessageID, lease)
		var n int64
		if err == nil {
			n, err = res.RowsAffected()
		}
		if err != nil {
			return nil, err
		}
		if n > 0 {
			held = append(held, o.MessageID)
		}
	}
	if len(done) > 0 {
		rows, err := s.db.queryParams(ctx, tx, "DELETE FROM send_queue WHERE "+strings.Join(done, " OR ")+
			" RETURNING message_id", doneArgs...)
		if err != nil {
			return nil, err
		}
		var deleted []string
		if err := s.db.w.ScanRows(ctx, rows, &deleted); err != nil {
			return nil, err
		}
		held = append(held, deleted...)
	}
	return held, nil
}

// Remove deletes an instance's waiting items among ids inside tx (all its waiting items when ids is nil) and
// returns the IDs removed. An item being sent (leased) stays: it is no longer waiting.
func (s *SendQueue) Remove(ctx context.Context, tx bun.IDB, instanceID string, ids []string, at time.Time) ([]string, error) {
	at = at.UTC().Truncate(time.Microsecond)
	q := tx.NewDelete().Table("send_queue").Where("instance_id = ?", instanceID).
		Where("(lease_until IS NULL OR lease_until <= ?)", at)
	if ids != nil {
		if len(ids) == 0 {
			return nil, nil
		}
		q = q.Where("message_id IN (?)", bun.In(ids))
	}
	var removed []string
	if _, err := q.Returning("message_id").Exec(ctx, &removed); err != nil {
		return nil, err
	}
	slices.Sort(removed)
	return removed, nil
}

// SendStats is the state of an instance's queue.
type SendStats struct {
	Depth, InFlight int
	Oldest          *time.Time
}

// Stats counts an instance's items, those leased at at, and the oldest's enqueue time.
func (s *SendQueue) Stats(ctx context.Context, instanceID string, at time.Time) (SendStats, error) {
	at = at.UTC().Truncate(time.Microsecond)
	var row struct {
		Depth    int        `bun:"depth"`
		InFlight int        `bun:"in_flight"`
		Oldest   *time.Time `bun:"oldest"`
	}
	err := s.db.r.NewSelect().TableExpr("send_queue").
		ColumnExpr("COUNT(*) AS depth").
		ColumnExpr("COALESCE(SUM(CASE WHEN lease_until > ? THEN 1 ELSE 0 END), 0) AS in_flight", at).
		ColumnExpr("MIN(created_at) AS oldest").
		Where("instance_id = ?", instanceID).Scan(ctx, &row)
	if err != nil {
		return SendStats{}, err
	}
	return SendStats{Depth: row.Depth, InFlight: row.InFlight, Oldest: row.Oldest}, nil
}
