-- Routes: a message to a person tried channel after channel (POST /api/v1/people/{id}/messages). A route is pending
-- while a step is under way; due_at is when the route worker must act on it next (a step's deadline, or now when a
-- step ended and the next must start), so a restart or another replica carries it on. person_id is not a foreign
-- key: people merge, and a route keeps the person it was sent to.
CREATE TABLE routes (
    id           TEXT PRIMARY KEY,
    workspace_id TEXT NOT NULL REFERENCES workspaces (id) ON DELETE CASCADE,
    person_id    TEXT NOT NULL,
    status       TEXT NOT NULL,
    message      TEXT NOT NULL,
    steps        TEXT NOT NULL,
    step         INTEGER NOT NULL,
    message_id   TEXT,
    due_at       TIMESTAMPTZ,
    created_at   TIMESTAMPTZ NOT NULL,
    updated_at   TIMESTAMPTZ NOT NULL,
    ended_at     TIMESTAMPTZ
);

--bun:split

CREATE INDEX routes_due ON routes (due_at) WHERE status = 'pending';

--bun:split

CREATE INDEX routes_workspace ON routes (workspace_id, id);

--bun:split

CREATE INDEX routes_person ON routes (workspace_id, person_id, id);

--bun:split

-- The route a message is an attempt of (NULL for every other message).
ALTER TABLE messages ADD COLUMN route_id TEXT;
