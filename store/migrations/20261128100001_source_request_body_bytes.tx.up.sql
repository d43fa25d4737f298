-- A source's request log keeps the start of each body as the bytes that came in: a body refused because its text
-- cannot be kept (U+0000, bytes that are not UTF-8) is shown as it was sent, and no body can fail the write of its
-- own log entry. Earlier excerpts were UTF-8 text already; they become its bytes.
{{if eq .Dialect "pg"}}
ALTER TABLE source_requests ALTER COLUMN body_excerpt TYPE BYTEA USING convert_to(body_excerpt, 'UTF8');
{{else}}
-- SQLite cannot change a column's type: the table is copied into one that declares it.
CREATE TABLE source_requests_bytes (
    id             TEXT PRIMARY KEY,
    source_id      TEXT NOT NULL REFERENCES sources (id) ON DELETE CASCADE,
    workspace_id   TEXT NOT NULL,
    received_at    TIMESTAMPTZ NOT NULL,
    method         TEXT NOT NULL,
    content_type   TEXT NOT NULL,
    size_bytes     INTEGER NOT NULL,
    -- accepted | duplicate | handshake | refused
    outcome        TEXT NOT NULL,
    status         INTEGER NOT NULL,
    reason         TEXT,
    detail         TEXT,
    -- no foreign key: events are pruned by retention while the log keeps its rows
    event_id       TEXT,
    headers        TEXT NOT NULL,
    body_excerpt   BLOB NOT NULL,
    body_truncated BOOLEAN NOT NULL
);

--bun:split

INSERT INTO source_requests_bytes (id, source_id, workspace_id, received_at, method, content_type, size_bytes, outcome,
    status, reason, detail, event_id, headers, body_excerpt, body_truncated)
SELECT id, source_id, workspace_id, received_at, method, content_type, size_bytes, outcome, status, reason, detail,
    event_id, headers, CAST(body_excerpt AS BLOB), body_truncated
FROM source_requests;

--bun:split

DROP TABLE source_requests;

--bun:split

ALTER TABLE source_requests_bytes RENAME TO source_requests;

--bun:split

CREATE INDEX source_requests_source ON source_requests (source_id, id);
{{end}}
