package sandbox

import (
	"context"
	"time"

	"github.com/switchboard/switchboard/store"
)

// Storage is the sandbox network's own records, the repository the provider owns (store.SandboxNetwork implements
// it over the deployment's database, so that every process of the deployment sees one network). The provider
// composes its writes in the transactions Storage runs and hands each back to its methods; it builds no statement
// itself.
type Storage interface {
	// Reader reads outside a transaction; Writer makes a single write outside one.
	Reader() store.Querier
	Writer() store.Querier
	// InTx runs fn in a write transaction of its own; Shared runs it in one shared with the concurrent calls of other
	// sessions (group commit), for the per-message writes — a send, a handover's settlement — whose commit is the
	// cost.
	InTx(ctx context.Context, fn func(ctx context.Context, tx store.Tx) error) error
	Shared(ctx context.Context, fn func(ctx context.Context, tx store.Tx) error) error

	// Accounts: numbers paired with instances.
	Account(ctx context.Context, q store.Querier, number string) (store.SandboxAccount, error)
	AccountOf(ctx context.Context, q store.Querier, instanceID string) (store.SandboxAccount, error)
	Accounts(ctx context.Context, q store.Querier, numbers []string) ([]store.SandboxAccount, error)
	Recipient(ctx context.Context, q store.Querier, number, sender string) (instanceID string, blocked bool, err error)
	CreateAccount(ctx context.Context, q store.Querier, a *store.SandboxAccount) (bool, error)
	Pair(ctx context.Context, q store.Querier, instanceID, tokenHash string, at time.Time) error
	Rename(ctx context.Context, q store.Querier, number, displayName string) (bool, error)
	SetProfile(ctx context.Context, q store.Querier, a store.SandboxAccount) error
	Counterparts(ctx context.Context, q store.Querier, number string) ([]store.SandboxAccount, error)
	Unpair(ctx context.Context, q store.Querier, instanceID string) error

	// Messages the network carries, and their statuses.
	CreateMessage(ctx context.Context, q store.Querier, m *store.SandboxMessage) (bool, error)
	Message(ctx context.Context, q store.Querier, id string) (store.SandboxMessage, error)
	Messages(ctx context.Context, q store.Querier, ids []string) ([]store.SandboxMessage, error)
	MessageByClientID(ctx context.Context, q store.Querier, sender, clientID string) (store.SandboxMessage, error)
	Unread(ctx context.Context, q store.Querier, reader, chat string, group bool, upTo string) ([]store.SandboxMessage, error)
	MarkMessage(ctx context.Context, q store.Querier, id, status string, at time.Time) (bool, error)

	// Mail: what the network holds for an account until its session takes it.
	Post(ctx context.Context, q store.Querier, mail []store.SandboxMail) error
	Due(ctx context.Context, q store.Querier, number string, now time.Time, limit int) ([]store.SandboxMail, error)
	NextDue(ctx context.Context, q store.Querier, number string) (at time.Time, ok bool, err error)
	Take(ctx context.Context, q store.Querier, ids []string) error

	// Groups and their members.
	CreateGroup(ctx context.Context, q store.Querier, g *store.SandboxGroup) error
	Group(ctx context.Context, q store.Querier, address string) (store.SandboxGroup, error)
	GroupAddressByInvite(ctx context.Context, q store.Querier, code string) (string, error)
	UpdateGroup(ctx context.Context, q store.Querier, g store.SandboxGroup) error
	AddMember(ctx context.Context, q store.Querier, m store.SandboxGroupMember) error
	RemoveMember(ctx context.Context, q store.Querier, group, number string) error
	SetRole(ctx context.Context, q store.Querier, group, number, role string) error

	// Blocks between accounts.
	SetBlock(ctx context.Context, q store.Querier, number, blocked string, block bool, at time.Time) error
	Blocks(ctx context.Context, q store.Querier, number, blocked string) (bool, error)
}

var _ Storage = (*store.SandboxNetwork)(nil)
