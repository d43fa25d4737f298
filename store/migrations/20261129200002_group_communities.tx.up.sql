-- Communities (WhatsApp): a group that is a community's parent is listed read-only (community), and a group of a
-- community names it (community_address; NULL when none).
ALTER TABLE chat_groups ADD COLUMN community BOOLEAN NOT NULL DEFAULT FALSE;

--bun:split

ALTER TABLE chat_groups ADD COLUMN community_address TEXT;
