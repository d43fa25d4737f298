-- A contact's availability as their network shares it (available, away, busy, unavailable; NULL: never told) and
-- when they were last seen online, where the network tells; presence.updated carries both.
ALTER TABLE contacts ADD COLUMN presence TEXT;

--bun:split

ALTER TABLE contacts ADD COLUMN last_seen_at TIMESTAMPTZ;
