-- Labels an instance's account keeps for its chats (WhatsApp's labels; the sandbox's), and which chats carry them.
-- external_id is the label's ID on the network (NULL where the network has none of its own).
CREATE TABLE labels (
    id           TEXT PRIMARY KEY,
    workspace_id TEXT NOT NULL REFERENCES workspaces (id) ON DELETE CASCADE,
    instance_id  TEXT NOT NULL REFERENCES instances (id) ON DELETE CASCADE,
    name         TEXT NOT NULL,
    color        INTEGER NOT NULL DEFAULT 0,
    external_id  TEXT,
    created_at   TIMESTAMPTZ NOT NULL,
    updated_at   TIMESTAMPTZ NOT NULL
);

--bun:split

CREATE INDEX labels_instance ON labels (instance_id, id);

--bun:split

CREATE UNIQUE INDEX labels_external ON labels (instance_id, external_id) WHERE external_id IS NOT NULL;

--bun:split

CREATE TABLE chat_labels (
    chat_id  TEXT NOT NULL REFERENCES chats (id) ON DELETE CASCADE,
    label_id TEXT NOT NULL REFERENCES labels (id) ON DELETE CASCADE,
    PRIMARY KEY (chat_id, label_id)
);

--bun:split

CREATE INDEX chat_labels_label ON chat_labels (label_id, chat_id);
