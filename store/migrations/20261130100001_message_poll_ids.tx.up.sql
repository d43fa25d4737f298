-- The network's own ID of a poll message, where the network names votes by it rather than by the message (Telegram's
-- poll_answer carries only the poll's ID).
ALTER TABLE messages ADD COLUMN provider_poll_id TEXT;

--bun:split

CREATE INDEX messages_provider_poll_id ON messages (instance_id, provider_poll_id) WHERE provider_poll_id IS NOT NULL;
