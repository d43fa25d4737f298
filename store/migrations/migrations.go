// Package migrations holds the embedded SQL migrations of the store, applied at start and by `switchboard migrate`.
//
// Files are Go templates rendered with {{.Dialect}} ("pg" or "sqlite") where the dialects differ; a name ending in
// .tx.up.sql runs in one transaction.
package migrations

import "embed"

// FS holds every migration file.
//
//go:embed *.sql
var FS embed.FS
