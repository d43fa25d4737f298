package store

import (
	"github.com/uptrace/bun/dialect/pgdialect"
	"github.com/uptrace/bun/dialect/sqlitedialect"
)

// The dialects the store opens Bun with: Bun's own, writing a JSON value into the SQL text with appendJSON instead
// of Bun's AppendJSON (v1.3.0). Bun's reads a backslash without the character it escapes, so a JSON text holding an
// escaped backslash followed by "u0000" (a client's string `\u0000`, six characters) came out as a backslash and a
// NUL escape: PostgreSQL refused the statement (a 500 for a client's input) and SQLite stored a changed value.
type (
	pgDialect     struct{ *pgdialect.Dialect }
	sqliteDialect struct{ *sqlitedialect.Dialect }
)

func newPGDialect() pgDialect         { return pgDialect{pgdialect.New()} }
func newSQLiteDialect() sqliteDialect { return sqliteDialect{sqlitedialect.New()} }

func (pgDialect) AppendJSON(b, jsonb []byte) []byte     { return appendJSON(b, jsonb) }
func (sqliteDialect) AppendJSON(b, jsonb []byte) []byte { return appendJSON(b, jsonb) }

// appendJSON appends a JSON text as an SQL string literal: quotes doubled, every escape sequence kept whole. A NUL
// escape (\u0000) is written as the six characters it is made of (an escaped backslash, then "u0000"), as Bun does,
// since PostgreSQL's jsonb holds no NUL and both databases must keep the same value; a raw NUL byte, which no valid
// JSON holds, is left out.
func appendJSON(b, jsonb []byte) []byte {
	b = append(b, '\'')
	for i := 0; i < len(jsonb); i++ {
		switch c := jsonb[i]; c {
		case '\'':
			b = append(b, "''"...)
		case 0:
		case '\\':
			if i+6 <= len(jsonb) && string(jsonb[i+1:i+6]) == "u0000" {
				b = append(b, `\\u0000`...)
				i += 5
				continue
			}
			b = append(b, '\\')
			if i+1 < len(jsonb) {
				i++
				switch e := jsonb[i]; e {
				case '\'':
					b = append(b, "''"...)
				case 0:
				default:
					b = append(b, e)
				}
			}
		default:
			b = append(b, c)
		}
	}
	return append(b, '\'')
}
