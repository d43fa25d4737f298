-- One counter bumped in every transaction that changes what a key may do (revocation, workspace models).
-- SQLite readers check it only when PRAGMA data_version says another connection committed, so unrelated writes
-- (clicks, deliveries, last-use times) do not throw away the API key cache.
CREATE TABLE access_version (
    id      INTEGER PRIMARY KEY CHECK (id = 1),
    version BIGINT NOT NULL
);

--bun:split

INSERT INTO access_version (id, version) VALUES (1, 0);
