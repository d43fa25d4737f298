-- Idempotency-Key records, so that a client retrying a POST after a lost answer gets the first answer instead of a
-- second effect: per API key, the request a key was first used with and, once it finished,
-- the answer to replay. A row is claimed (completed_at NULL) while its request runs and kept until expires_at.
CREATE TABLE idempotency_keys (
    api_key_id       TEXT NOT NULL REFERENCES api_keys (id) ON DELETE CASCADE,
    idempotency_key  TEXT NOT NULL,
    -- SHA-256 (hex) of the method, path, query and body of the request the key was first used with
    fingerprint      TEXT NOT NULL,
    -- random token of the attempt that runs the request now: completing or releasing the claim must present it, so
    -- an attempt whose claim was taken over (it looked dead) cannot overwrite or delete its successor's
    lock_token       TEXT NOT NULL,
    locked_at        TIMESTAMPTZ NOT NULL,
    created_at       TIMESTAMPTZ NOT NULL,
    expires_at       TIMESTAMPTZ NOT NULL,
    completed_at     TIMESTAMPTZ,
    -- the stored answer (empty until completed_at): the request that produced it, status, the headers that
    -- describe the body, and the body as the server encoded it (sealed: it may hold a secret shown once)
    response_request_id TEXT NOT NULL,
    response_status     INTEGER NOT NULL,
    response_headers    {{if eq .Dialect "pg"}}JSONB{{else}}TEXT{{end}} NOT NULL,
    response_body       TEXT NOT NULL,
    PRIMARY KEY (api_key_id, idempotency_key)
);

--bun:split

CREATE INDEX idempotency_keys_expires ON idempotency_keys (expires_at);
