package storetest

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/switchboard/switchboard/store"
)

// CompareDatabases fails t unless every table of src holds the same rows in dst, value for value (booleans, times
// and JSON compared by meaning, not by how each database spells them).
func CompareDatabases(t *testing.T, src, dst *store.DB) {
	t.Helper()
	tables, err := src.Tables(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, tb := range tables {
		a, b := dumpTable(t, src, tb), dumpTable(t, dst, tb)
		if len(a) != len(b) {
			t.Errorf("%s: %d rows in SQLite, %d in PostgreSQL", tb.Name, len(a), len(b))
			continue
		}
		for i := range a {
			if a[i] != b[i] {
				t.Errorf("%s row %d:\nSQLite     %s\nPostgreSQL %s", tb.Name, i, a[i], b[i])
				break
			}
		}
	}
}

func dumpTable(t *testing.T, db *store.DB, tb store.Table) []string {
	t.Helper()
	q := func(s string) string { return `"` + s + `"` }
	cols := make([]string, len(tb.Columns))
	for i, c := range tb.Columns {
		cols[i] = q(c)
	}
	key := make([]string, len(tb.Key))
	for i, c := range tb.Key {
		key[i] = q(c)
	}
	rows, err := db.Bun().QueryContext(context.Background(), "SELECT "+strings.Join(cols, ", ")+" FROM "+q(tb.Name)+" ORDER BY "+strings.Join(key, ", "))
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	vals := make([]any, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	for rows.Next() {
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		parts := make([]string, len(vals))
		for i, v := range vals {
			parts[i] = tb.Columns[i] + "=" + normalize(v)
		}
		out = append(out, strings.Join(parts, " "))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// normalize spells a value the same way whichever database it came from.
func normalize(v any) string {
	switch x := v.(type) {
	case nil:
		return "NULL"
	case bool:
		if x {
			return "1"
		}
		return "0"
	case time.Time:
		return x.UTC().Format(time.RFC3339Nano)
	case []byte:
		return normalize(string(x))
	case string:
		var j any
		if strings.HasPrefix(x, "{") || strings.HasPrefix(x, "[") {
			if json.Unmarshal([]byte(x), &j) == nil {
				b, _ := json.Marshal(j)
				return string(b)
			}
		}
		return fmt.Sprintf("%q", x)
	}
	return fmt.Sprint(v)
}
