//go:build whatsapp_web

package whatsappweb

import (
	"path/filepath"
	"testing"

	"github.com/switchboard/switchboard/store"
	"github.com/switchboard/switchboard/store/storetest"
)

// migratedPostgres is a fresh PostgreSQL database with the product's migrations and nothing else, as migrate-data
// gets it.
func migratedPostgres(t *testing.T) *store.DB {
	t.Helper()
	db, err := store.Open(t.Context(), storetest.EmptyPostgresURL(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	if err := db.Migrate(t.Context()); err != nil {
		t.Fatal(err)
	}
	return db
}

// A device paired on SQLite survives migrate-data into a fresh PostgreSQL: whatsmeow's tables are created there by
// whatsmeow's own upgrade, and whatsmeow's store reads the device back whole, with its binding to its instance.
func TestMigrateDataCarriesSessions(t *testing.T) {
	ctx := t.Context()
	src := storetest.SQLite(t)
	saved := saveDevice(t, NewDevices(src))
	if err := NewDevices(src).Bind(ctx, "inst_moved", *saved.dev.ID); err != nil {
		t.Fatal(err)
	}
	dst := migratedPostgres(t)
	copied, err := src.CopyTo(ctx, dst, nil, CopyExtra())
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]int{}
	for _, c := range copied {
		rows[c.Table] = c.Rows
	}
	for table, want := range map[string]int{"whatsmeow_device": 1, "whatsmeow_sessions": 1, "whatsmeow_identity_keys": 1,
		"whatsmeow_pre_keys": 3, "whatsmeow_lid_map": 1, "whatsapp_web_instances": 1} {
		if rows[table] != want {
			t.Errorf("copied %d rows of %s, want %d", rows[table], table, want)
		}
	}
	if _, ok := rows["whatsmeow_version"]; ok {
		t.Error("whatsmeow_version was copied; the destination's upgrade records its own")
	}
	storetest.CompareDatabases(t, src, dst)

	moved := NewDevices(dst) // the server started on PostgreSQL
	got := saved.check(t, moved)
	var jid string
	if err := dst.Reader().NewRaw("SELECT jid FROM whatsapp_web_instances WHERE instance_id = ?", "inst_moved").
		Scan(ctx, &jid); err != nil || jid != got.ID.String() {
		t.Errorf("the instance's binding on PostgreSQL: %q, %v", jid, err)
	}
	// The carried device keeps working: its Signal session is updated in place on PostgreSQL.
	if err := got.Sessions.PutSession(ctx, saved.peer, []byte("next session")); err != nil {
		t.Fatal(err)
	}
	if b, err := got.Sessions.GetSession(ctx, saved.peer); err != nil || string(b) != "next session" {
		t.Errorf("the session after an update on PostgreSQL: %q, %v", b, err)
	}
}

// backup is a copy of the whole SQLite file (VACUUM INTO), so whatsmeow's tables are in it: a device saved before
// the backup is read back whole from the restored copy.
func TestBackupCarriesSessions(t *testing.T) {
	db := storetest.SQLite(t)
	saved := saveDevice(t, NewDevices(db))
	path := filepath.Join(t.TempDir(), "backup.db")
	if err := db.BackupTo(t.Context(), path); err != nil {
		t.Fatal(err)
	}
	restored, err := store.Open(t.Context(), "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = restored.Close() })
	saved.check(t, NewDevices(restored))
}
