-- Workspaces own every object of the product; API keys belong to exactly one workspace.
-- Users, memberships and console sessions arrive with the console and reference these tables.
CREATE TABLE workspaces (
    id             TEXT PRIMARY KEY,
    name           TEXT NOT NULL,
    -- JSON array of model IDs the workspace may use; NULL means every model of the operator's catalogue.
    enabled_models {{if eq .Dialect "pg"}}JSONB{{else}}TEXT{{end}},
    created_at     TIMESTAMPTZ NOT NULL,
    updated_at     TIMESTAMPTZ NOT NULL
);

--bun:split

CREATE TABLE api_keys (
    id             TEXT PRIMARY KEY,
    workspace_id   TEXT NOT NULL REFERENCES workspaces (id) ON DELETE CASCADE,
    name           TEXT NOT NULL,
    -- hex SHA-256 of the whole secret; the secret itself is never stored.
    secret_hash    TEXT NOT NULL,
    -- "sb_sk_" and the first four random characters, and the last four characters, for display only.
    display_prefix TEXT NOT NULL,
    last4          TEXT NOT NULL,
    scopes         {{if eq .Dialect "pg"}}JSONB{{else}}TEXT{{end}} NOT NULL,
    -- who created the key: "cli" or, once the console exists, a user ID.
    created_by     TEXT NOT NULL,
    created_at     TIMESTAMPTZ NOT NULL,
    expires_at     TIMESTAMPTZ,
    revoked_at     TIMESTAMPTZ,
    last_used_at   TIMESTAMPTZ
);

--bun:split

CREATE UNIQUE INDEX api_keys_secret_hash ON api_keys (secret_hash);

--bun:split

CREATE INDEX api_keys_workspace ON api_keys (workspace_id, id);
