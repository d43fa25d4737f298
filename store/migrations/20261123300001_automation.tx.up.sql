-- Automation: a workspace's custom event types, its sources (public ingest URLs), their request log and the
-- de-duplication keys they remember.
CREATE TABLE event_types (
    workspace_id TEXT NOT NULL REFERENCES workspaces (id) ON DELETE CASCADE,
    -- "custom." + dotted lower-case words; built-in types never start with "custom."
    name         TEXT NOT NULL,
    description  TEXT NOT NULL,
    -- JSON Schema (draft 2020-12) of the events' data, and an example of it
    schema       {{if eq .Dialect "pg"}}JSONB{{else}}TEXT{{end}} NOT NULL,
    example      {{if eq .Dialect "pg"}}JSONB{{else}}TEXT{{end}} NOT NULL,
    archived     BOOLEAN NOT NULL,
    created_at   TIMESTAMPTZ NOT NULL,
    updated_at   TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (workspace_id, name)
);

--bun:split

CREATE TABLE sources (
    id                   TEXT PRIMARY KEY,
    workspace_id         TEXT NOT NULL REFERENCES workspaces (id) ON DELETE CASCADE,
    name                 TEXT NOT NULL,
    event_type           TEXT NOT NULL,
    -- hex SHA-256 of the ingest token; the token itself is shown once and never stored
    token_hash           TEXT NOT NULL,
    token_last4          TEXT NOT NULL,
    -- after a rotation, the previous token works until previous_token_until
    previous_token_hash  TEXT,
    previous_token_until TIMESTAMPTZ,
    -- the verification scheme without its secret (JSON object), and the secret sealed with the server key
    verification         {{if eq .Dialect "pg"}}JSONB{{else}}TEXT{{end}} NOT NULL,
    sealed_secret        TEXT,
    dedup_header         TEXT,
    dedup_pointer        TEXT,
    dedup_window_seconds INTEGER NOT NULL,
    max_body_bytes       INTEGER NOT NULL,
    rate_per_minute      INTEGER NOT NULL,
    created_at           TIMESTAMPTZ NOT NULL,
    updated_at           TIMESTAMPTZ NOT NULL
);

--bun:split

CREATE UNIQUE INDEX sources_token_hash ON sources (token_hash);

--bun:split

CREATE INDEX sources_previous_token_hash ON sources (previous_token_hash) WHERE previous_token_hash IS NOT NULL;

--bun:split

CREATE INDEX sources_workspace ON sources (workspace_id, id);

--bun:split

-- The recent requests of a source, accepted or refused, so a user can see why a sender was turned away. Headers
-- are stored with credential-like values redacted and bodies truncated; a job keeps the newest of each source.
CREATE TABLE source_requests (
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
    headers        {{if eq .Dialect "pg"}}JSONB{{else}}TEXT{{end}} NOT NULL,
    body_excerpt   TEXT NOT NULL,
    body_truncated BOOLEAN NOT NULL
);

--bun:split

CREATE INDEX source_requests_source ON source_requests (source_id, id);

--bun:split

-- De-duplication keys a source has seen, with the event the first request made, until expires_at.
CREATE TABLE source_dedup_keys (
    source_id  TEXT NOT NULL REFERENCES sources (id) ON DELETE CASCADE,
    dedup_key  TEXT NOT NULL,
    event_id   TEXT NOT NULL,
    expires_at TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (source_id, dedup_key)
);

--bun:split

CREATE INDEX source_dedup_keys_expires ON source_dedup_keys (expires_at);
