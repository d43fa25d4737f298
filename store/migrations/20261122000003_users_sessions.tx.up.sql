-- Console accounts. Emails are stored lower-cased; passwords only as argon2id hashes (PHC strings).
CREATE TABLE users (
    id            TEXT PRIMARY KEY,
    email         TEXT NOT NULL,
    password_hash TEXT NOT NULL,
    created_at    TIMESTAMPTZ NOT NULL,
    updated_at    TIMESTAMPTZ NOT NULL
);

--bun:split

CREATE UNIQUE INDEX users_email ON users (email);

--bun:split

-- Who belongs to which workspace, with a role ("owner" now; invitations add more roles later).
CREATE TABLE memberships (
    workspace_id TEXT NOT NULL REFERENCES workspaces (id) ON DELETE CASCADE,
    user_id      TEXT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    role         TEXT NOT NULL,
    created_at   TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (workspace_id, user_id)
);

--bun:split

CREATE INDEX memberships_user ON memberships (user_id);

--bun:split

-- Server-side console sessions: the cookie holds a random token, the table only its SHA-256, so sign-out and a
-- password change end sessions for good.
CREATE TABLE sessions (
    id           TEXT PRIMARY KEY,
    token_hash   TEXT NOT NULL,
    user_id      TEXT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    csrf_token   TEXT NOT NULL,
    -- the workspace the console shows; NULL until the user has one
    workspace_id TEXT REFERENCES workspaces (id) ON DELETE SET NULL,
    user_agent   TEXT NOT NULL,
    ip           TEXT NOT NULL,
    created_at   TIMESTAMPTZ NOT NULL,
    last_seen_at TIMESTAMPTZ NOT NULL,
    expires_at   TIMESTAMPTZ NOT NULL
);

--bun:split

CREATE UNIQUE INDEX sessions_token_hash ON sessions (token_hash);

--bun:split

CREATE INDEX sessions_user ON sessions (user_id);
