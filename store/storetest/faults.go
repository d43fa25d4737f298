package storetest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"

	"github.com/switchboard/switchboard/store"
)

// FailInserts makes every insert into table whose column holds value fail with a database error (a trigger, dropped
// when the test ends): the way to fail one transaction of many. value is compared as text and must not contain a
// quote.
func FailInserts(t testing.TB, db *store.DB, table, column, value string) {
	t.Helper()
	failWrites(t, db, "INSERT", table, column, value)
}

// FailUpdates is FailInserts for updates that give column the value.
func FailUpdates(t testing.TB, db *store.DB, table, column, value string) {
	t.Helper()
	failWrites(t, db, "UPDATE", table, column, value)
}

func failWrites(t testing.TB, db *store.DB, op, table, column, value string) {
	t.Helper()
	if strings.Contains(value, "'") {
		t.Fatalf("failing %s: value %q contains a quote", op, value)
	}
	ctx := context.Background()
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	name := "fail_" + hex.EncodeToString(b)
	stmts := []string{fmt.Sprintf(`CREATE TRIGGER %s BEFORE %s ON %s WHEN NEW.%s = '%s'
		BEGIN SELECT RAISE(ABORT, 'injected failure'); END`, name, op, table, column, value)}
	drop := []string{"DROP TRIGGER " + name}
	if db.Dialect() == store.Postgres {
		stmts = []string{
			fmt.Sprintf(`CREATE FUNCTION %s() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN
				IF NEW.%s::text = '%s' THEN RAISE EXCEPTION 'injected failure'; END IF; RETURN NEW; END $$`,
				name, column, value),
			fmt.Sprintf("CREATE TRIGGER %s BEFORE %s ON %s FOR EACH ROW EXECUTE FUNCTION %[1]s()", name, op, table),
		}
		drop = []string{"DROP TRIGGER " + name + " ON " + table, "DROP FUNCTION " + name}
	}
	for _, q := range stmts {
		if _, err := db.Bun().ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		for _, q := range drop {
			if _, err := db.Bun().ExecContext(ctx, q); err != nil {
				t.Error(err)
			}
		}
	})
}
