-- How a chat is kept on the account's devices: archived, pinned, muted (until muted_until; NULL while muted: until
-- unmuted).
ALTER TABLE chats ADD COLUMN archived BOOLEAN NOT NULL DEFAULT FALSE;

--bun:split

ALTER TABLE chats ADD COLUMN pinned BOOLEAN NOT NULL DEFAULT FALSE;

--bun:split

ALTER TABLE chats ADD COLUMN muted BOOLEAN NOT NULL DEFAULT FALSE;

--bun:split

ALTER TABLE chats ADD COLUMN muted_until TIMESTAMPTZ;
