-- People: contacts of different instances of one workspace that share an address (E.164 number, bare JID) or were
-- linked by hand are one person. Contacts that exist before this get their person lazily, the next time the
-- channel reports them (see Contacts.Resolve): grouping needs the address rules of the application, which plain
-- SQL on both databases cannot repeat, and until then they are simply not in any person.
CREATE TABLE people (
    id           TEXT PRIMARY KEY,
    workspace_id TEXT NOT NULL REFERENCES workspaces (id) ON DELETE CASCADE,
    created_at   TIMESTAMPTZ NOT NULL,
    updated_at   TIMESTAMPTZ NOT NULL
);

--bun:split

CREATE INDEX people_workspace ON people (workspace_id, id);

--bun:split

-- person_manual: the user linked or split this contact, so grouping by shared addresses no longer moves it.
ALTER TABLE contacts ADD COLUMN person_id TEXT REFERENCES people (id) ON DELETE SET NULL;

--bun:split

ALTER TABLE contacts ADD COLUMN person_manual BOOLEAN NOT NULL DEFAULT FALSE;

--bun:split

CREATE INDEX contacts_person ON contacts (person_id);

--bun:split

-- Grouping looks addresses up across the instances of a workspace.
CREATE INDEX contact_addresses_address ON contact_addresses (address);
