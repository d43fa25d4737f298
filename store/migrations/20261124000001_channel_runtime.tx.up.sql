-- The channel runtime: which process holds each instance's session (a lease), the commands carried to that process,
-- the durable send queue, and per-instance send pacing.

-- One row per instance some process holds or held: the holder renews lease_until while its session lives; once it
-- ran out (the holder died) any process may take the instance over.
CREATE TABLE instance_leases (
    instance_id  TEXT PRIMARY KEY REFERENCES instances (id) ON DELETE CASCADE,
    owner        TEXT NOT NULL,
    lease_until  TIMESTAMPTZ NOT NULL,
    acquired_at  TIMESTAMPTZ NOT NULL
);

--bun:split

CREATE INDEX instance_leases_owner ON instance_leases (owner, lease_until);

--bun:split

-- A call to a live session held by another process (a group change, a lookup, a logout): the holder runs it and
-- writes the result; the caller waits for it.
CREATE TABLE instance_commands (
    id           TEXT PRIMARY KEY,
    instance_id  TEXT NOT NULL REFERENCES instances (id) ON DELETE CASCADE,
    owner        TEXT NOT NULL,
    op           TEXT NOT NULL,
    args         TEXT NOT NULL,
    -- JSON result, or the error: kind (failure, unsupported, not_connected, error) and its JSON
    result       TEXT,
    error_kind   TEXT,
    error        TEXT,
    created_at   TIMESTAMPTZ NOT NULL,
    done_at      TIMESTAMPTZ
);

--bun:split

CREATE INDEX instance_commands_owner ON instance_commands (owner, done_at);

--bun:split

-- The send queue: one row per outbound message waiting to be sent or being sent. Only the oldest row of a chat is
-- ever claimed (FIFO per chat, one in flight); the row goes when its outcome is recorded.
CREATE TABLE send_queue (
    message_id       TEXT PRIMARY KEY REFERENCES messages (id) ON DELETE CASCADE,
    workspace_id     TEXT NOT NULL,
    instance_id      TEXT NOT NULL REFERENCES instances (id) ON DELETE CASCADE,
    chat             TEXT NOT NULL,
    attempts         INTEGER NOT NULL DEFAULT 0,
    next_attempt_at  TIMESTAMPTZ NOT NULL,
    lease_until      TIMESTAMPTZ,
    last_error       TEXT,
    created_at       TIMESTAMPTZ NOT NULL
);

--bun:split

CREATE INDEX send_queue_chat ON send_queue (instance_id, chat, message_id);

--bun:split

CREATE INDEX send_queue_due ON send_queue (next_attempt_at, message_id);

--bun:split

-- Per-instance pacing (NULL: the server's default): at most pacing_rate messages a minute on average, bursts of
-- pacing_burst; a rate of 0 turns pacing off.
ALTER TABLE instances ADD COLUMN pacing_rate INTEGER;

--bun:split

ALTER TABLE instances ADD COLUMN pacing_burst INTEGER;
