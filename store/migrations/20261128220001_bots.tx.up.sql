-- Bots answer the inbound messages of an instance: from a model of the operator's upstreams, or from a workflow (an
-- HTTP service that receives each message as a signed request). settings holds what the API shows of a bot (JSON);
-- sealed_secret is a workflow's signing secret, sealed with the server key.
CREATE TABLE bots (
    id            TEXT PRIMARY KEY,
    workspace_id  TEXT NOT NULL REFERENCES workspaces (id) ON DELETE CASCADE,
    instance_id   TEXT NOT NULL REFERENCES instances (id) ON DELETE CASCADE,
    name          TEXT NOT NULL,
    kind          TEXT NOT NULL,
    enabled       BOOLEAN NOT NULL,
    settings      {{if eq .Dialect "pg"}}JSONB{{else}}TEXT{{end}} NOT NULL,
    sealed_secret TEXT,
    created_at    TIMESTAMPTZ NOT NULL,
    updated_at    TIMESTAMPTZ NOT NULL
);

--bun:split

CREATE INDEX bots_instance ON bots (instance_id);

--bun:split

-- A chat in human takeover: no bot of its instance answers it until paused_until (NULL: until resumed by hand).
CREATE TABLE bot_takeovers (
    chat_id      TEXT PRIMARY KEY REFERENCES chats (id) ON DELETE CASCADE,
    workspace_id TEXT NOT NULL REFERENCES workspaces (id) ON DELETE CASCADE,
    instance_id  TEXT NOT NULL REFERENCES instances (id) ON DELETE CASCADE,
    -- keyword | workflow | manual
    reason       TEXT NOT NULL,
    bot_id       TEXT,
    paused_until TIMESTAMPTZ,
    created_at   TIMESTAMPTZ NOT NULL
);

--bun:split

-- One row per inbound message a bot took up: its primary key makes one process of all replicas answer it, and the
-- row records the outcome (replied | failed | handoff) and the reply.
CREATE TABLE bot_runs (
    bot_id           TEXT NOT NULL REFERENCES bots (id) ON DELETE CASCADE,
    message_id       TEXT NOT NULL,
    workspace_id     TEXT NOT NULL REFERENCES workspaces (id) ON DELETE CASCADE,
    chat_id          TEXT NOT NULL,
    status           TEXT NOT NULL,
    reply_message_id TEXT,
    reason           TEXT,
    attempts         INTEGER NOT NULL,
    created_at       TIMESTAMPTZ NOT NULL,
    updated_at       TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (bot_id, message_id)
);

--bun:split

CREATE INDEX bot_runs_chat ON bot_runs (chat_id, created_at);
