-- A webhook endpoint can deliver into a message broker instead of posting to an https receiver: its type, and for a
-- broker its destination (the broker URL with its credentials, the exchange, subject or topic) sealed with the server
-- key like its secret. url keeps the broker URL without its password, for people.
ALTER TABLE webhook_endpoints ADD COLUMN type TEXT NOT NULL DEFAULT 'https';

--bun:split

ALTER TABLE webhook_endpoints ADD COLUMN destination TEXT;
