-- The webhook engine: endpoints, the event log (transactional outbox) and one delivery per (event, endpoint) with
-- its attempts. An event and its deliveries are inserted in the same transaction as the business change.
CREATE TABLE webhook_endpoints (
    id                    TEXT PRIMARY KEY,
    workspace_id          TEXT NOT NULL REFERENCES workspaces (id) ON DELETE CASCADE,
    url                   TEXT NOT NULL,
    description           TEXT NOT NULL,
    -- JSON array of event type patterns: exact names, "link.*" or "*"
    events                {{if eq .Dialect "pg"}}JSONB{{else}}TEXT{{end}} NOT NULL,
    -- JSON object of static headers added to every delivery
    headers               {{if eq .Dialect "pg"}}JSONB{{else}}TEXT{{end}} NOT NULL,
    -- deliveries per second; NULL means unlimited (the in-flight cap still applies)
    rate_limit            INTEGER,
    -- active | paused | disabled
    status                TEXT NOT NULL,
    -- why a disabled endpoint was disabled: gone (410), failing (5 days of failures) or manual
    disabled_reason       TEXT,
    -- signing secrets, sealed with the server key (AES-GCM, bound to the endpoint ID)
    secret                TEXT NOT NULL,
    previous_secret       TEXT,
    previous_secret_until TIMESTAMPTZ,
    -- start of the current run of failed attempts (NULL after a success)
    failing_since         TIMESTAMPTZ,
    created_at            TIMESTAMPTZ NOT NULL,
    updated_at            TIMESTAMPTZ NOT NULL
);

--bun:split

CREATE INDEX webhook_endpoints_workspace ON webhook_endpoints (workspace_id, id);

--bun:split

CREATE TABLE events (
    id           TEXT PRIMARY KEY,
    workspace_id TEXT NOT NULL REFERENCES workspaces (id) ON DELETE CASCADE,
    type         TEXT NOT NULL,
    -- the envelope's "data" member
    data         {{if eq .Dialect "pg"}}JSONB{{else}}TEXT{{end}} NOT NULL,
    created_at   TIMESTAMPTZ NOT NULL
);

--bun:split

CREATE INDEX events_workspace ON events (workspace_id, id);

--bun:split

CREATE INDEX events_workspace_type ON events (workspace_id, type, id);

--bun:split

CREATE TABLE webhook_deliveries (
    id               TEXT PRIMARY KEY,
    workspace_id     TEXT NOT NULL REFERENCES workspaces (id) ON DELETE CASCADE,
    endpoint_id      TEXT NOT NULL REFERENCES webhook_endpoints (id) ON DELETE CASCADE,
    event_id         TEXT NOT NULL REFERENCES events (id) ON DELETE CASCADE,
    event_type       TEXT NOT NULL,
    -- pending (queued or waiting for a retry) | succeeded | failed (retries exhausted) | skipped (endpoint disabled)
    status           TEXT NOT NULL,
    attempts         INTEGER NOT NULL,
    -- when a pending delivery is due; NULL otherwise
    next_attempt_at  TIMESTAMPTZ,
    -- a dispatcher holds the delivery until then; after a crash the lease runs out and another one retries it
    lease_until      TIMESTAMPTZ,
    last_status_code INTEGER,
    last_error       TEXT,
    created_at       TIMESTAMPTZ NOT NULL,
    updated_at       TIMESTAMPTZ NOT NULL,
    completed_at     TIMESTAMPTZ
);

--bun:split

CREATE INDEX webhook_deliveries_due ON webhook_deliveries (status, next_attempt_at);

--bun:split

CREATE INDEX webhook_deliveries_endpoint ON webhook_deliveries (endpoint_id, id);

--bun:split

CREATE INDEX webhook_deliveries_event ON webhook_deliveries (event_id);

--bun:split

CREATE TABLE webhook_attempts (
    id               TEXT PRIMARY KEY,
    delivery_id      TEXT NOT NULL REFERENCES webhook_deliveries (id) ON DELETE CASCADE,
    started_at       TIMESTAMPTZ NOT NULL,
    duration_ms      INTEGER NOT NULL,
    status_code      INTEGER,
    error_class      TEXT,
    response_excerpt TEXT
);

--bun:split

CREATE INDEX webhook_attempts_delivery ON webhook_attempts (delivery_id, id);
