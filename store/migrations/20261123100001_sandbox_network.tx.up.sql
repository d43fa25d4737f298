-- The sandbox network: a simulated messaging network shared by every instance of the deployment, across processes.
-- Its state lives here, not in the memory of one process, so that two serve processes on one PostgreSQL form one
-- network. None of it belongs to a workspace: like a real network, it connects accounts of any workspace.

-- An account of the network: a number in the reserved +999 range, held by the instance that paired it (the same
-- number every time that instance pairs again). token_hash is the SHA-256 (hex) of the credential the instance
-- keeps; NULL after a logout, when the instance has to pair again.
CREATE TABLE sandbox_accounts (
    number       TEXT PRIMARY KEY,
    instance_id  TEXT NOT NULL UNIQUE,
    display_name TEXT NOT NULL,
    token_hash   TEXT,
    created_at   TIMESTAMPTZ NOT NULL,
    paired_at    TIMESTAMPTZ
);

--bun:split

-- Every message the network carried: what receipts, mark-read, replies, reactions, edits and deletes refer to. id is
-- the provider message id, time-sortable, so "up to this message" is an id range. client_id is the sender's
-- message id: a send repeated after an unknown outcome finds its first copy. injected marks a message made by a test
-- control or the echo service, which no instance sent and so no instance gets receipts of.
CREATE TABLE sandbox_messages (
    id           TEXT PRIMARY KEY,
    sender       TEXT NOT NULL,
    chat         TEXT NOT NULL,
    client_id    TEXT,
    injected     BOOLEAN NOT NULL,
    sent_at      TIMESTAMPTZ NOT NULL,
    delivered_at TIMESTAMPTZ,
    read_at      TIMESTAMPTZ
);

--bun:split

CREATE UNIQUE INDEX sandbox_messages_client ON sandbox_messages (sender, client_id);

--bun:split

CREATE INDEX sandbox_messages_chat ON sandbox_messages (chat, id);

--bun:split

-- What the network holds for an account until its instance takes it, oldest first: messages, receipts (due when
-- the receipt schedule says) and group changes. The envelope is the sandbox's own JSON, opaque to the store (TEXT on
-- both databases: it is written once, read once and never queried).
CREATE TABLE sandbox_mailbox (
    id         TEXT PRIMARY KEY,
    number     TEXT NOT NULL,
    due_at     TIMESTAMPTZ NOT NULL,
    envelope   TEXT NOT NULL
);

--bun:split

CREATE INDEX sandbox_mailbox_due ON sandbox_mailbox (number, due_at, id);

--bun:split

-- Groups, their participants (role owner, admin or member) and the invite code that lets anyone join (NULL: none
-- issued yet or revoked).
CREATE TABLE sandbox_groups (
    address     TEXT PRIMARY KEY,
    subject     TEXT NOT NULL,
    description TEXT NOT NULL,
    invite_code TEXT UNIQUE,
    created_at  TIMESTAMPTZ NOT NULL
);

--bun:split

CREATE TABLE sandbox_group_members (
    group_address TEXT NOT NULL REFERENCES sandbox_groups (address) ON DELETE CASCADE,
    number        TEXT NOT NULL,
    role          TEXT NOT NULL,
    joined_at     TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (group_address, number)
);

--bun:split

CREATE INDEX sandbox_group_members_number ON sandbox_group_members (number);

--bun:split

-- number blocked blocked: the network delivers no direct message from blocked to number.
CREATE TABLE sandbox_blocks (
    number     TEXT NOT NULL,
    blocked    TEXT NOT NULL,
    created_at TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (number, blocked)
);
