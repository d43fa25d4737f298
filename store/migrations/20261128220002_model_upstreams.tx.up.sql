-- A workspace's own OpenAI-compatible model servers: its models join the workspace's list only. The key is sealed
-- with the server key (api_key_last4 names it); models is the allow-list (JSON array, NULL for every model).
CREATE TABLE model_upstreams (
    id            TEXT PRIMARY KEY,
    workspace_id  TEXT NOT NULL REFERENCES workspaces (id) ON DELETE CASCADE,
    name          TEXT NOT NULL,
    base_url      TEXT NOT NULL,
    sealed_key    TEXT,
    api_key_last4 TEXT NOT NULL,
    models        {{if eq .Dialect "pg"}}JSONB{{else}}TEXT{{end}},
    created_at    TIMESTAMPTZ NOT NULL
);

--bun:split

CREATE UNIQUE INDEX model_upstreams_name ON model_upstreams (workspace_id, name);
