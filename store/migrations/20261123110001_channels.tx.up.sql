-- Messaging: instances (connected channel accounts), their messages, chats, contacts and groups, and media.

-- The instance filter of webhook endpoints: a JSON array of instance IDs whose messaging events they receive
-- (NULL or empty: every instance).
ALTER TABLE webhook_endpoints ADD COLUMN instance_ids {{if eq .Dialect "pg"}}JSONB{{else}}TEXT{{end}};

--bun:split

CREATE TABLE instances (
    id                 TEXT PRIMARY KEY,
    workspace_id       TEXT NOT NULL REFERENCES workspaces (id) ON DELETE CASCADE,
    name               TEXT NOT NULL,
    provider           TEXT NOT NULL,
    status             TEXT NOT NULL,
    status_reason      TEXT NOT NULL,
    status_since       TIMESTAMPTZ NOT NULL,
    -- while awaiting_auth: qr or pairing_code
    auth_method        TEXT,
    -- the current pairing QR code and its expiry (while awaiting_auth by QR)
    qr_code            TEXT,
    qr_expires_at      TIMESTAMPTZ,
    -- the connected account: JSON {address, display_name, ids}
    account            {{if eq .Dialect "pg"}}JSONB{{else}}TEXT{{end}},
    -- what the session saved to restore without pairing again, sealed with the server key (NULL after a logout)
    credentials        TEXT,
    -- the config without its secrets (JSON object), and the secrets as a sealed JSON object
    config             {{if eq .Dialect "pg"}}JSONB{{else}}TEXT{{end}} NOT NULL,
    sealed_secrets     TEXT,
    metadata           {{if eq .Dialect "pg"}}JSONB{{else}}TEXT{{end}} NOT NULL,
    reconnect_attempt  INTEGER NOT NULL DEFAULT 0,
    reconnect_next_at  TIMESTAMPTZ,
    -- the sequence number of the instance's last event
    event_sequence     BIGINT NOT NULL DEFAULT 0,
    created_at         TIMESTAMPTZ NOT NULL,
    updated_at         TIMESTAMPTZ NOT NULL
);

--bun:split

CREATE INDEX instances_workspace ON instances (workspace_id, id);

--bun:split

CREATE TABLE contacts (
    id            TEXT PRIMARY KEY,
    workspace_id  TEXT NOT NULL REFERENCES workspaces (id) ON DELETE CASCADE,
    instance_id   TEXT NOT NULL REFERENCES instances (id) ON DELETE CASCADE,
    display_name  TEXT,
    on_network    BOOLEAN,
    -- when the network was last asked whether the contact is on it (lookups are cached until then + the TTL)
    looked_up_at  TIMESTAMPTZ,
    blocked       BOOLEAN NOT NULL DEFAULT FALSE,
    created_at    TIMESTAMPTZ NOT NULL,
    updated_at    TIMESTAMPTZ NOT NULL
);

--bun:split

CREATE INDEX contacts_instance ON contacts (instance_id, id);

--bun:split

-- every address of a contact: one person is one contact whatever address the network reports
CREATE TABLE contact_addresses (
    instance_id  TEXT NOT NULL REFERENCES instances (id) ON DELETE CASCADE,
    address      TEXT NOT NULL,
    contact_id   TEXT NOT NULL REFERENCES contacts (id) ON DELETE CASCADE,
    PRIMARY KEY (instance_id, address)
);

--bun:split

CREATE INDEX contact_addresses_contact ON contact_addresses (contact_id);

--bun:split

CREATE TABLE chat_groups (
    id            TEXT PRIMARY KEY,
    workspace_id  TEXT NOT NULL REFERENCES workspaces (id) ON DELETE CASCADE,
    instance_id   TEXT NOT NULL REFERENCES instances (id) ON DELETE CASCADE,
    address       TEXT NOT NULL,
    subject       TEXT NOT NULL,
    description   TEXT NOT NULL,
    -- JSON array of {address, display_name, role}
    participants  {{if eq .Dialect "pg"}}JSONB{{else}}TEXT{{end}} NOT NULL,
    -- when the instance stopped being a participant (left or removed): the group is no longer listed
    left_at       TIMESTAMPTZ,
    created_at    TIMESTAMPTZ NOT NULL,
    updated_at    TIMESTAMPTZ NOT NULL
);

--bun:split

CREATE UNIQUE INDEX chat_groups_address ON chat_groups (instance_id, address);

--bun:split

CREATE TABLE chats (
    id               TEXT PRIMARY KEY,
    workspace_id     TEXT NOT NULL REFERENCES workspaces (id) ON DELETE CASCADE,
    instance_id      TEXT NOT NULL REFERENCES instances (id) ON DELETE CASCADE,
    type             TEXT NOT NULL,
    address          TEXT NOT NULL,
    name             TEXT,
    contact_id       TEXT REFERENCES contacts (id) ON DELETE SET NULL,
    group_id         TEXT REFERENCES chat_groups (id) ON DELETE SET NULL,
    last_message_id  TEXT,
    last_message_at  TIMESTAMPTZ,
    unread_count     INTEGER NOT NULL DEFAULT 0,
    created_at       TIMESTAMPTZ NOT NULL,
    updated_at       TIMESTAMPTZ NOT NULL
);

--bun:split

CREATE UNIQUE INDEX chats_address ON chats (instance_id, address);

--bun:split

CREATE TABLE messages (
    id                   TEXT PRIMARY KEY,
    workspace_id         TEXT NOT NULL REFERENCES workspaces (id) ON DELETE CASCADE,
    instance_id          TEXT NOT NULL REFERENCES instances (id) ON DELETE CASCADE,
    chat_id              TEXT NOT NULL REFERENCES chats (id) ON DELETE CASCADE,
    direction            TEXT NOT NULL,
    -- JSON {contact_id, address, display_name}
    from_party           {{if eq .Dialect "pg"}}JSONB{{else}}TEXT{{end}} NOT NULL,
    to_party             {{if eq .Dialect "pg"}}JSONB{{else}}TEXT{{end}} NOT NULL,
    type                 TEXT NOT NULL,
    text                 TEXT,
    -- JSON of the media, location and contact card, when the message has one
    media                {{if eq .Dialect "pg"}}JSONB{{else}}TEXT{{end}},
    location             {{if eq .Dialect "pg"}}JSONB{{else}}TEXT{{end}},
    contact              {{if eq .Dialect "pg"}}JSONB{{else}}TEXT{{end}},
    reply_to_message_id  TEXT,
    target_message_id    TEXT,
    emoji                TEXT,
    provider_message_id  TEXT,
    client_message_id    TEXT,
    status               TEXT NOT NULL,
    -- JSON array of {status, at, detail}
    status_history       {{if eq .Dialect "pg"}}JSONB{{else}}TEXT{{end}} NOT NULL,
    -- JSON {code, detail} of a failed message
    failure              {{if eq .Dialect "pg"}}JSONB{{else}}TEXT{{end}},
    metadata             {{if eq .Dialect "pg"}}JSONB{{else}}TEXT{{end}} NOT NULL,
    created_at           TIMESTAMPTZ NOT NULL,
    updated_at           TIMESTAMPTZ NOT NULL
);

--bun:split

CREATE INDEX messages_instance ON messages (instance_id, id);

--bun:split

CREATE INDEX messages_chat ON messages (chat_id, id);

--bun:split

CREATE UNIQUE INDEX messages_client_id ON messages (instance_id, client_message_id) WHERE client_message_id IS NOT NULL;

--bun:split

CREATE INDEX messages_provider_id ON messages (instance_id, provider_message_id) WHERE provider_message_id IS NOT NULL;

--bun:split

CREATE TABLE media (
    id            TEXT PRIMARY KEY,
    workspace_id  TEXT NOT NULL REFERENCES workspaces (id) ON DELETE CASCADE,
    kind          TEXT NOT NULL,
    mime_type     TEXT NOT NULL,
    filename      TEXT,
    size          BIGINT NOT NULL,
    sha256        TEXT NOT NULL,
    source_url    TEXT,
    created_at    TIMESTAMPTZ NOT NULL
);

--bun:split

CREATE INDEX media_workspace ON media (workspace_id, id);

--bun:split

-- the bytes of media on PostgreSQL (every process of a deployment shares them); SQLite keeps them in files of the
-- data directory instead, beside the database
CREATE TABLE media_content (
    media_id  TEXT PRIMARY KEY REFERENCES media (id) ON DELETE CASCADE,
    content   {{if eq .Dialect "pg"}}BYTEA{{else}}BLOB{{end}} NOT NULL
);
