-- The forward proxy an instance's network connections go through (NULL: none): its URL (scheme, host and port), the
-- user name, and the password sealed with the server key for the instance (never stored in the clear).
ALTER TABLE instances ADD COLUMN proxy_url TEXT;

--bun:split

ALTER TABLE instances ADD COLUMN proxy_username TEXT;

--bun:split

ALTER TABLE instances ADD COLUMN proxy_sealed_password TEXT;
