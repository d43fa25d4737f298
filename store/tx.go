package store

import "github.com/uptrace/bun"

// The store's handles, as the packages above it see them. A repository method runs its statements on the Querier
// it is given: the Reader, the writer outside a transaction, or a Tx — so that a capability composes the writes of
// several repositories in one transaction (RunInTx, a GroupCommit) and hands the transaction back to the store,
// without building a statement itself. They are the ORM's types under the store's names: the store is the one
// package that speaks to the ORM, and no capability imports it.
type (
	// Querier runs a repository method's statements: the Reader, the writer, or a transaction.
	Querier = bun.IDB
	// Tx is a write transaction, as RunInTx and GroupCommit hand it to their function.
	Tx = bun.Tx
)
