package store

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/uptrace/bun"
)

// CommandsChannel is the PostgreSQL notification channel that tells processes a command waits for one of their
// sessions (the payload is the owner's name).
const CommandsChannel = "switchboard_instance_commands"

// InstanceLease says which process holds an instance's session, until when.
type InstanceLease struct {
	bun.BaseModel `bun:"table:instance_leases,alias:l"`

	InstanceID string    `bun:"instance_id,pk"`
	Owner      string    `bun:"owner"`
	LeaseUntil time.Time `bun:"lease_until"`
	AcquiredAt time.Time `bun:"acquired_at"`
}

// InstanceLeases are the leases by which exactly one process holds each instance's session.
type InstanceLeases struct{ db *DB }

// Free returns, among the instances that should hold a session (see Instances.Wanted), those no process holds at at
// (no lease, or one that ran out) and those whose lease an earlier process of slot left (the slot's name followed
// by "/" starts their owner's name; "" for none): that process is gone, as a slot is held while its process lives.
// Each comes with whether it was held before (a takeover) and whether slot's earlier process held it. It returns
// no sentinel errors.
func (s *InstanceLeases) Free(ctx context.Context, at time.Time, slot string) (ids []string, held, left map[string]bool, err error) {
	at = at.UTC().Truncate(time.Microsecond)
	var rows []struct {
		ID    string  `bun:"id"`
		Owner *string `bun:"owner"`
		Left  bool    `bun:"left_by_slot"`
	}
	err = s.db.r.NewSelect().TableExpr("instances AS i").
		ColumnExpr("i.id").ColumnExpr("l.owner").ColumnExpr("? AS left_by_slot", leftBySlot("l", slot)).
		Join("LEFT JOIN instance_leases AS l ON l.instance_id = i.id").
		Where("i.status NOT IN (?)", bun.In(instanceStatusesOffline)).
		Where("(l.instance_id IS NULL OR l.lease_until <= ? OR ?)", at, leftBySlot("l", slot)).
		OrderExpr("i.id").Scan(ctx, &rows)
	if err != nil {
		return nil, nil, nil, err
	}
	held, left = map[string]bool{}, map[string]bool{}
	for _, r := range rows {
		ids = append(ids, r.ID)
		if r.Owner != nil {
			held[r.ID] = true
		}
		if r.Left {
			left[r.ID] = true
		}
	}
	return ids, held, left, nil
}

// leftBySlot is the condition that the lease of table alias was left by a process of slot ("": never).
func leftBySlot(alias, slot string) bun.Safe {
	if slot == "" {
		return bun.Safe("(1 = 0)")
	}
	prefix := slot + "/"
	// The slot's name is the host's name and a number, written as a string literal: the condition also appears as a
	// column of Free's select.
	return bun.Safe(fmt.Sprintf("(substr(%s.owner, 1, %d) = '%s')", alias, len(prefix), strings.ReplaceAll(prefix, "'", "''")))
}

// Acquire takes the instances among ids that no process holds at at (no lease or an expired one), or whose lease an
// earlier process of slot left (see Free), for owner until at+lease and returns those it took. It returns no
// sentinel errors.
//
// One statement takes a chunk of acquireChunk instances: a restart takes every instance of the deployment at once,
// and a statement each (10,000 of them) held the first staggered connect back by seconds.
func (s *InstanceLeases) Acquire(ctx context.Context, owner, slot string, ids []string, at time.Time, lease time.Duration) ([]string, error) {
	at = at.UTC().Truncate(time.Microsecond)
	var took []string
	for off := 0; off < len(ids); off += acquireChunk {
		chunk := ids[off:min(off+acquireChunk, len(ids))]
		var got []string
		// The instances that exist among the chunk, each once; an ID without its instance (deleted) is not taken.
		_, err := s.db.w.NewRaw(`INSERT INTO instance_leases (instance_id, owner, lease_until, acquired_at)
			SELECT id, ?, ?, ? FROM instances WHERE id IN (?)
			ON CONFLICT (instance_id) DO UPDATE SET owner = excluded.owner, lease_until = excluded.lease_until,
				acquired_at = excluded.acquired_at
			WHERE instance_leases.lease_until <= ? OR ?
			RETURNING instance_id`, owner, at.Add(lease), at, bun.In(chunk), at,
			leftBySlot("instance_leases", slot)).Exec(ctx, &got)
		if err != nil {
			return took, err
		}
		took = append(took, got...)
	}
	// In the order asked for (the stagger hands out turns in this order), whatever order the database returned.
	in := make(map[string]bool, len(took))
	for _, id := range took {
		in[id] = true
	}
	out := took[:0]
	for _, id := range ids {
		if in[id] {
			out = append(out, id)
			delete(in, id)
		}
	}
	return out, nil
}

// acquireChunk is how many instances one statement of Acquire takes.
const acquireChunk = 500

// Renew extends owner's leases of ids to at+lease and returns the IDs still held (a lease another process took
// over after it ran out, or whose instance was deleted, is lost). It returns no sentinel errors.
func (s *InstanceLeases) Renew(ctx context.Context, owner string, ids []string, at time.Time, lease time.Duration) ([]string, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	at = at.UTC().Truncate(time.Microsecond)
	var kept []string
	_, err := s.db.w.NewUpdate().Table("instance_leases").Set("lease_until = ?", at.Add(lease)).
		Where("owner = ?", owner).Where("instance_id IN (?)", bun.In(ids)).
		Returning("instance_id").Exec(ctx, &kept)
	return kept, err
}

// Release gives owner's leases of ids up, so that another process may take them at once. It returns no sentinel
// errors.
func (s *InstanceLeases) Release(ctx context.Context, owner string, ids []string) error {
	if len(ids) == 0 {
		return nil
	}
	_, err := s.db.w.NewDelete().Table("instance_leases").Where("owner = ?", owner).
		Where("instance_id IN (?)", bun.In(ids)).Exec(ctx)
	return err
}

// Holder returns the process holding an instance's session at at ("" when none does). It returns no sentinel
// errors.
func (s *InstanceLeases) Holder(ctx context.Context, instanceID string, at time.Time) (string, error) {
	var owners []string
	err := s.db.r.NewSelect().Table("instance_leases").Column("owner").Where("instance_id = ?", instanceID).
		Where("lease_until > ?", at.UTC().Truncate(time.Microsecond)).Scan(ctx, &owners)
	if err != nil || len(owners) == 0 {
		return "", err
	}
	return owners[0], nil
}

// InstanceCommand is a call to a session that another process holds.
type InstanceCommand struct {
	bun.BaseModel `bun:"table:instance_commands,alias:c"`

	ID         string     `bun:"id,pk"`
	InstanceID string     `bun:"instance_id"`
	Owner      string     `bun:"owner"`
	Op         string     `bun:"op"`
	Args       string     `bun:"args"`
	Result     *string    `bun:"result"`
	ErrorKind  *string    `bun:"error_kind"`
	Error      *string    `bun:"error"`
	CreatedAt  time.Time  `bun:"created_at"`
	DoneAt     *time.Time `bun:"done_at"`
}

// InstanceCommands carry calls to sessions across processes.
type InstanceCommands struct{ db *DB }

// Put records a command for owner and wakes it on PostgreSQL. It returns no sentinel errors.
func (s *InstanceCommands) Put(ctx context.Context, c *InstanceCommand) error {
	c.CreatedAt = now()
	return s.db.RunInTx(ctx, func(ctx context.Context, tx bun.Tx) error {
		if _, err := tx.NewInsert().Model(c).Exec(ctx); err != nil {
			return mapErr(err)
		}
		return s.db.notifyAtCommit(ctx, tx, CommandsChannel, c.Owner)
	})
}

// Pending returns owner's commands not done yet, oldest first. It returns no sentinel errors.
func (s *InstanceCommands) Pending(ctx context.Context, owner string) ([]InstanceCommand, error) {
	var cs []InstanceCommand
	err := s.db.r.NewSelect().Model(&cs).Where("c.owner = ?", owner).Where("c.done_at IS NULL").
		OrderExpr("c.id").Scan(ctx)
	return cs, err
}

// Complete stores a command's result or error. It returns no sentinel errors.
func (s *InstanceCommands) Complete(ctx context.Context, c *InstanceCommand) error {
	t := now()
	c.DoneAt = &t
	_, err := s.db.w.NewUpdate().Model(c).Column("result", "error_kind", "error", "done_at").WherePK().
		Where("c.done_at IS NULL").Exec(ctx)
	return err
}

// Get returns a command. Returns ErrNotFound if it does not exist.
func (s *InstanceCommands) Get(ctx context.Context, id string) (InstanceCommand, error) {
	var c InstanceCommand
	err := s.db.r.NewSelect().Model(&c).Where("c.id = ?", id).Scan(ctx)
	return c, mapErr(err)
}

// Delete removes a command (once its caller read the result or gave up). It returns no sentinel errors.
func (s *InstanceCommands) Delete(ctx context.Context, id string) error {
	_, err := s.db.w.NewDelete().Table("instance_commands").Where("id = ?", id).Exec(ctx)
	return err
}

// Expire removes commands created before before (their callers gave up long ago). It returns no sentinel errors.
func (s *InstanceCommands) Expire(ctx context.Context, before time.Time) error {
	_, err := s.db.w.NewDelete().Table("instance_commands").
		Where("created_at < ?", before.UTC().Truncate(time.Microsecond)).Exec(ctx)
	return err
}
