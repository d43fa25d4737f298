package store

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/uptrace/bun"
)

// SandboxAccount is an account of the sandbox network: a number held by the instance that paired it.
type SandboxAccount struct {
	bun.BaseModel `bun:"table:sandbox_accounts,alias:sa"`

	Number      string `bun:"number,pk"`
	InstanceID  string `bun:"instance_id"`
	DisplayName string `bun:"display_name"`
	// TokenHash is the SHA-256 (hex) of the instance's credential; nil after a logout.
	TokenHash *string `bun:"token_hash"`
	// About is the account's about text; Picture its profile picture (base64) of PictureType (nil: none set, the
	// network draws one).
	About       *string    `bun:"about"`
	Picture     *string    `bun:"picture"`
	PictureType *string    `bun:"picture_type"`
	CreatedAt   time.Time  `bun:"created_at"`
	PairedAt    *time.Time `bun:"paired_at"`
}

// SandboxMessage is a message the sandbox network carried, with the receipts its sender was given.
type SandboxMessage struct {
	bun.BaseModel `bun:"table:sandbox_messages,alias:sm"`

	ID       string  `bun:"id,pk"` // the provider message id, time-sortable
	Sender   string  `bun:"sender"`
	Chat     string  `bun:"chat"` // the recipient's number or the group's address
	ClientID *string `bun:"client_id"`
	// Injected marks a message no instance sent (a test control's, the echo service's): nobody gets its receipts.
	Injected    bool       `bun:"injected"`
	SentAt      time.Time  `bun:"sent_at"`
	DeliveredAt *time.Time `bun:"delivered_at"`
	ReadAt      *time.Time `bun:"read_at"`
}

// SandboxMail is what the sandbox network holds for an account until its instance takes it.
type SandboxMail struct {
	bun.BaseModel `bun:"table:sandbox_mailbox,alias:mb"`

	ID       string    `bun:"id,pk"` // time-sortable: the order the account is handed its mail in
	Number   string    `bun:"number"`
	DueAt    time.Time `bun:"due_at"`
	Envelope string    `bun:"envelope"`
}

// SandboxGroup is a group of the sandbox network.
type SandboxGroup struct {
	bun.BaseModel `bun:"table:sandbox_groups,alias:sg"`

	Address     string  `bun:"address,pk"`
	Subject     string  `bun:"subject"`
	Description string  `bun:"description"`
	InviteCode  *string `bun:"invite_code"`
	// AdminsOnlySend makes it an announcement group; AdminsOnlyEdit keeps its subject, description and picture to
	// admins. Picture is its picture (base64) of PictureType (nil: none).
	AdminsOnlySend bool      `bun:"admins_only_send"`
	AdminsOnlyEdit bool      `bun:"admins_only_edit"`
	Picture        *string   `bun:"picture"`
	PictureType    *string   `bun:"picture_type"`
	CreatedAt      time.Time `bun:"created_at"`
	// Members are the participants in the order they joined (at creation: the owner first).
	Members []SandboxGroupMember `bun:"-"`
}

// SandboxGroupMember is a participant of a sandbox group.
type SandboxGroupMember struct {
	bun.BaseModel `bun:"table:sandbox_group_members,alias:sgm"`

	GroupAddress string    `bun:"group_address,pk"`
	Number       string    `bun:"number,pk"`
	Role         string    `bun:"role"` // owner, admin, member
	JoinedAt     time.Time `bun:"joined_at"`
}

type sandboxBlock struct {
	bun.BaseModel `bun:"table:sandbox_blocks"`

	Number    string    `bun:"number,pk"`
	Blocked   string    `bun:"blocked,pk"`
	CreatedAt time.Time `bun:"created_at"`
}

// SandboxNetwork is the data of the sandbox network, the repository of the sandbox provider (its sandbox.Storage).
// Every method runs on the handle it is given: the reader, the writer or a transaction of InTx or Shared.
type SandboxNetwork struct {
	db *DB
	// commits writes the network's per-message transactions (a send, a handover's settlement) of all sessions
	// together: concurrent sends share one commit.
	commits *GroupCommit
}

// Reader is the handle of reads outside a transaction.
func (s *SandboxNetwork) Reader() Querier { return s.db.Reader() }

// Writer is the handle of a single write outside a transaction.
func (s *SandboxNetwork) Writer() Querier { return s.db.Bun() }

// InTx runs fn in a write transaction of its own.
func (s *SandboxNetwork) InTx(ctx context.Context, fn func(ctx context.Context, tx Tx) error) error {
	return s.db.RunInTx(ctx, fn)
}

// Shared runs fn in a write transaction shared with the concurrent calls of other sessions (see GroupCommit), for
// the small, frequent writes whose commit is the cost.
func (s *SandboxNetwork) Shared(ctx context.Context, fn func(ctx context.Context, tx Tx) error) error {
	return s.commits.Do(ctx, fn)
}

// Account reads the account with the number. Returns ErrNotFound if the number has none.
func (s *SandboxNetwork) Account(ctx context.Context, db bun.IDB, number string) (SandboxAccount, error) {
	var a SandboxAccount
	err := db.NewSelect().Model(&a).Where("sa.number = ?", number).Scan(ctx)
	return a, mapErr(err)
}

// AccountOf reads the account an instance holds. Returns ErrNotFound if it never paired.
func (s *SandboxNetwork) AccountOf(ctx context.Context, db bun.IDB, instanceID string) (SandboxAccount, error) {
	var a SandboxAccount
	err := db.NewSelect().Model(&a).Where("sa.instance_id = ?", instanceID).Scan(ctx)
	return a, mapErr(err)
}

// Accounts reads the accounts of the numbers that have one. It returns no sentinel errors.
func (s *SandboxNetwork) Accounts(ctx context.Context, db bun.IDB, numbers []string) ([]SandboxAccount, error) {
	rows := []SandboxAccount{}
	if len(numbers) == 0 {
		return rows, nil
	}
	err := db.NewSelect().Model(&rows).Where("sa.number IN (?)", bun.In(numbers)).Scan(ctx)
	return rows, err
}

// Recipient reads, for a direct message from sender to number, the instance that holds number and whether number
// blocks sender, in one statement. Returns ErrNotFound if the number has no account.
func (s *SandboxNetwork) Recipient(ctx context.Context, db bun.IDB, number, sender string) (instanceID string, blocked bool, err error) {
	err = db.NewSelect().Model((*SandboxAccount)(nil)).Column("sa.instance_id").
		ColumnExpr("EXISTS (SELECT 1 FROM sandbox_blocks AS b WHERE b.number = sa.number AND b.blocked = ?)", sender).
		Where("sa.number = ?", number).Scan(ctx, &instanceID, &blocked)
	return instanceID, blocked, mapErr(err)
}

// CreateAccount inserts an account unless the number or the instance has one already, and reports whether it did.
// It returns no sentinel errors (a conflict does not end a PostgreSQL transaction: the caller may draw another
// number in it).
func (s *SandboxNetwork) CreateAccount(ctx context.Context, db bun.IDB, a *SandboxAccount) (bool, error) {
	res, err := db.NewInsert().Model(a).On("CONFLICT DO NOTHING").Exec(ctx)
	return changedOne(res, err)
}

// Pair gives the instance's account a new credential (its hash). Returns ErrNotFound if the instance has no
// account.
func (s *SandboxNetwork) Pair(ctx context.Context, db bun.IDB, instanceID, tokenHash string, at time.Time) error {
	res, err := db.NewUpdate().Model((*SandboxAccount)(nil)).
		Set("token_hash = ?", tokenHash).Set("paired_at = ?", at).
		Where("instance_id = ?", instanceID).Exec(ctx)
	return expectOneRow(res, err)
}

// Rename sets the display name of the number's account and reports whether it changed. It returns no sentinel
// errors.
func (s *SandboxNetwork) Rename(ctx context.Context, db bun.IDB, number, displayName string) (bool, error) {
	res, err := db.NewUpdate().Model((*SandboxAccount)(nil)).Set("display_name = ?", displayName).
		Where("number = ? AND display_name <> ?", number, displayName).Exec(ctx)
	return changedOne(res, err)
}

// Counterparts reads the accounts that know the number: those it exchanged direct messages with and those it shares
// a group with. It returns no sentinel errors.
func (s *SandboxNetwork) Counterparts(ctx context.Context, db bun.IDB, number string) ([]SandboxAccount, error) {
	rows := []SandboxAccount{}
	err := db.NewSelect().Model(&rows).Where("sa.number <> ?", number).
		Where("sa.number IN (SELECT chat FROM sandbox_messages WHERE sender = ?) "+
			"OR sa.number IN (SELECT sender FROM sandbox_messages WHERE chat = ?) "+
			"OR sa.number IN (SELECT m.number FROM sandbox_group_members AS m JOIN sandbox_group_members AS mine "+
			"ON mine.group_address = m.group_address WHERE mine.number = ?)", number, number, number).
		Scan(ctx)
	return rows, err
}

// Unpair invalidates the instance's credential. Returns ErrNotFound if the instance has no account.
func (s *SandboxNetwork) Unpair(ctx context.Context, db bun.IDB, instanceID string) error {
	res, err := db.NewUpdate().Model((*SandboxAccount)(nil)).Set("token_hash = NULL").
		Where("instance_id = ?", instanceID).Exec(ctx)
	return expectOneRow(res, err)
}

// CreateMessage records a message unless its sender recorded one with the same client id, and reports whether it
// did. It returns no sentinel errors.
func (s *SandboxNetwork) CreateMessage(ctx context.Context, db bun.IDB, m *SandboxMessage) (bool, error) {
	res, err := db.NewInsert().Model(m).On("CONFLICT DO NOTHING").Exec(ctx)
	return changedOne(res, err)
}

// Message reads a message. Returns ErrNotFound if the network never carried it.
func (s *SandboxNetwork) Message(ctx context.Context, db bun.IDB, id string) (SandboxMessage, error) {
	var m SandboxMessage
	err := db.NewSelect().Model(&m).Where("sm.id = ?", id).Scan(ctx)
	return m, mapErr(err)
}

// Messages reads the messages with the ids that the network carried. It returns no sentinel errors.
func (s *SandboxNetwork) Messages(ctx context.Context, db bun.IDB, ids []string) ([]SandboxMessage, error) {
	rows := []SandboxMessage{}
	if len(ids) == 0 {
		return rows, nil
	}
	err := db.NewSelect().Model(&rows).Where("sm.id IN (?)", bun.In(ids)).Scan(ctx)
	return rows, err
}

// MessageByClientID reads the message a sender recorded with a client id. Returns ErrNotFound if there is none.
func (s *SandboxNetwork) MessageByClientID(ctx context.Context, db bun.IDB, sender, clientID string) (SandboxMessage, error) {
	var m SandboxMessage
	err := db.NewSelect().Model(&m).Where("sm.sender = ? AND sm.client_id = ?", sender, clientID).Scan(ctx)
	return m, mapErr(err)
}

// Unread lists the messages of a chat, as reader sees it, that others sent and whose senders were not told they
// were read, up to and including the message upTo ("" for all), oldest first. A direct chat is named by the other
// party's number, a group by its address. It returns no sentinel errors.
func (s *SandboxNetwork) Unread(ctx context.Context, db bun.IDB, reader, chat string, group bool, upTo string) ([]SandboxMessage, error) {
	rows := []SandboxMessage{}
	q := db.NewSelect().Model(&rows).Where("sm.read_at IS NULL AND NOT sm.injected")
	if group {
		q = q.Where("sm.chat = ? AND sm.sender <> ?", chat, reader)
	} else {
		q = q.Where("sm.chat = ? AND sm.sender = ?", reader, chat)
	}
	if upTo != "" {
		q = q.Where("sm.id <= ?", upTo)
	}
	err := q.Order("sm.id").Scan(ctx)
	return rows, err
}

// MarkMessage records that the message's sender was told it was delivered or read (status "delivered" or "read"),
// unless it was told already: it reports whether this call recorded it. It returns no sentinel errors.
func (s *SandboxNetwork) MarkMessage(ctx context.Context, db bun.IDB, id, status string, at time.Time) (bool, error) {
	column := bun.Ident("delivered_at")
	if status == "read" {
		column = bun.Ident("read_at")
	}
	res, err := db.NewUpdate().Model((*SandboxMessage)(nil)).Set("? = ?", column, at).
		Where("id = ? AND ? IS NULL", id, column).Exec(ctx)
	return changedOne(res, err)
}

// Post puts mail into the mailboxes of its numbers. It returns no sentinel errors.
func (s *SandboxNetwork) Post(ctx context.Context, db bun.IDB, mail []SandboxMail) error {
	if len(mail) == 0 {
		return nil
	}
	_, err := db.NewInsert().Model(&mail).Exec(ctx)
	return err
}

// Due reads at most limit pieces of mail of the number that are due at now, oldest first. It returns no sentinel
// errors.
func (s *SandboxNetwork) Due(ctx context.Context, db bun.IDB, number string, now time.Time, limit int) ([]SandboxMail, error) {
	rows := []SandboxMail{}
	err := db.NewSelect().Model(&rows).Where("mb.number = ? AND mb.due_at <= ?", number, now).
		Order("mb.due_at", "mb.id").Limit(int64(limit)).Scan(ctx)
	return rows, err
}

// NextDue reports when the number's earliest mail falls due (or fell due: mail that came due since the caller last
// read what was due); ok is false when it has none.
func (s *SandboxNetwork) NextDue(ctx context.Context, db bun.IDB, number string) (at time.Time, ok bool, err error) {
	var due []time.Time
	err = db.NewSelect().Model((*SandboxMail)(nil)).Column("due_at").
		Where("number = ?", number).Order("due_at").Limit(1).Scan(ctx, &due)
	if err != nil || len(due) == 0 {
		return time.Time{}, false, err
	}
	return due[0].UTC(), true, nil
}

// Take removes mail once its instance took it. It returns no sentinel errors: mail taken already (by an earlier
// owner of the instance) is gone either way.
func (s *SandboxNetwork) Take(ctx context.Context, db bun.IDB, ids []string) error {
	if len(ids) == 0 {
		return nil
	}
	_, err := db.NewDelete().Model((*SandboxMail)(nil)).Where("id IN (?)", bun.In(ids)).Exec(ctx)
	return err
}

// CreateGroup inserts a group with its members. Returns ErrConflict if the address is taken.
func (s *SandboxNetwork) CreateGroup(ctx context.Context, db bun.IDB, g *SandboxGroup) error {
	if err := insert(ctx, db, g); err != nil {
		return err
	}
	if len(g.Members) == 0 {
		return nil
	}
	return insert(ctx, db, &g.Members)
}

// Group reads a group with its members; inside a transaction it locks the group's row until the transaction ends,
// so that changes of one group are made one at a time. Returns ErrNotFound if there is no such group.
func (s *SandboxNetwork) Group(ctx context.Context, db bun.IDB, address string) (SandboxGroup, error) {
	var g SandboxGroup
	q := db.NewSelect().Model(&g).Where("sg.address = ?", address)
	if _, inTx := db.(bun.Tx); inTx {
		q = s.db.forUpdate(q)
	}
	if err := q.Scan(ctx); err != nil {
		return g, mapErr(err)
	}
	err := db.NewSelect().Model(&g.Members).Where("sgm.group_address = ?", address).
		OrderExpr("sgm.joined_at, CASE sgm.role WHEN 'owner' THEN 0 ELSE 1 END, sgm.number").Scan(ctx)
	return g, err
}

// GroupAddressByInvite finds the group an invite code lets one join. Returns ErrNotFound if no group has it.
func (s *SandboxNetwork) GroupAddressByInvite(ctx context.Context, db bun.IDB, code string) (string, error) {
	var address string
	err := db.NewSelect().Model((*SandboxGroup)(nil)).Column("address").Where("invite_code = ?", code).
		Scan(ctx, &address)
	if errors.Is(err, sql.ErrNoRows) {
		return "", ErrNotFound
	}
	return address, err
}

// UpdateGroup writes a group's subject, description, invite code, settings and picture. Returns ErrNotFound if
// there is no such group, ErrConflict if the invite code is another group's.
func (s *SandboxNetwork) UpdateGroup(ctx context.Context, db bun.IDB, g SandboxGroup) error {
	res, err := db.NewUpdate().Model(&g).Column("subject", "description", "invite_code", "admins_only_send",
		"admins_only_edit", "picture", "picture_type").WherePK().Exec(ctx)
	return expectOneRow(res, err)
}

// SetProfile writes an account's display name, about text and picture. Returns ErrNotFound if there is no such
// account.
func (s *SandboxNetwork) SetProfile(ctx context.Context, db bun.IDB, a SandboxAccount) error {
	res, err := db.NewUpdate().Model(&a).Column("display_name", "about", "picture", "picture_type").WherePK().Exec(ctx)
	return expectOneRow(res, err)
}

// AddMember adds a participant to a group. Returns ErrConflict if it is one already, ErrNotFound if the group does
// not exist.
func (s *SandboxNetwork) AddMember(ctx context.Context, db bun.IDB, m SandboxGroupMember) error {
	return insert(ctx, db, &m)
}

// RemoveMember removes a participant from a group. Returns ErrNotFound if it is not one.
func (s *SandboxNetwork) RemoveMember(ctx context.Context, db bun.IDB, group, number string) error {
	res, err := db.NewDelete().Model((*SandboxGroupMember)(nil)).
		Where("group_address = ? AND number = ?", group, number).Exec(ctx)
	return expectOneRow(res, err)
}

// SetRole changes a participant's role. Returns ErrNotFound if it is not a participant.
func (s *SandboxNetwork) SetRole(ctx context.Context, db bun.IDB, group, number, role string) error {
	res, err := db.NewUpdate().Model((*SandboxGroupMember)(nil)).Set("role = ?", role).
		Where("group_address = ? AND number = ?", group, number).Exec(ctx)
	return expectOneRow(res, err)
}

// SetBlock records that number blocks blocked (or no longer does). It returns no sentinel errors.
func (s *SandboxNetwork) SetBlock(ctx context.Context, db bun.IDB, number, blocked string, block bool, at time.Time) error {
	if !block {
		_, err := db.NewDelete().Table("sandbox_blocks").Where("number = ? AND blocked = ?", number, blocked).Exec(ctx)
		return err
	}
	row := sandboxBlock{Number: number, Blocked: blocked, CreatedAt: at}
	_, err := db.NewInsert().Model(&row).On("CONFLICT DO NOTHING").Exec(ctx)
	return err
}

// Blocks reports whether number blocks blocked. It returns no sentinel errors.
func (s *SandboxNetwork) Blocks(ctx context.Context, db bun.IDB, number, blocked string) (bool, error) {
	return db.NewSelect().Table("sandbox_blocks").Where("number = ? AND blocked = ?", number, blocked).Exists(ctx)
}

// changedOne reports whether a statement that changes at most one row changed one.
func changedOne(res sql.Result, err error) (bool, error) {
	if err := expectOneRow(res, err); err != nil {
		if errors.Is(err, ErrNotFound) {
			return false, nil
		}
		return false, err
	}
	return true, nil
}
