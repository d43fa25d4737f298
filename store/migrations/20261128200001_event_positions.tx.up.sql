-- Live event streams read the event log in the order its transactions committed, so that a reader who resumes
-- after an event never misses one that committed later with an earlier ID (IDs are taken when a transaction writes,
-- not when it commits). Each event also names the messaging instance it is about, for the streams' instance filter.
ALTER TABLE events ADD COLUMN instance_id TEXT;

--bun:split

-- SQLite: the event's place in commit order. SQLite runs one write transaction at a time, so numbers drawn from
-- event_sequence inside the transaction that writes the events follow commit order; unlike the rowid, a number is
-- never given again after the newest events were deleted. (PostgreSQL leaves it NULL: see tx_id.)
ALTER TABLE events ADD COLUMN seq BIGINT;

--bun:split

CREATE TABLE event_sequence (
    id   INTEGER PRIMARY KEY CHECK (id = 1),
    last BIGINT NOT NULL
);

--bun:split

{{if eq .Dialect "pg"}}
INSERT INTO event_sequence (id, last) VALUES (1, 0);

--bun:split

-- PostgreSQL: the transaction that wrote the event. Rows of transactions older than the oldest one still running
-- (pg_snapshot_xmin) can no longer appear; readers go no further, so (tx_id, id) orders a log that only grows at its
-- end. Events written before this column existed take 0 and keep the order of their IDs.
ALTER TABLE events ADD COLUMN tx_id BIGINT NOT NULL DEFAULT 0;

--bun:split

ALTER TABLE events ALTER COLUMN tx_id SET DEFAULT (pg_current_xact_id()::text::bigint);

--bun:split

CREATE INDEX events_position ON events (tx_id, id);

--bun:split

CREATE INDEX events_workspace_position ON events (workspace_id, tx_id, id);
{{else}}
-- Events written before this column existed are numbered in the order of their IDs.
UPDATE events SET seq = ranked.n
FROM (SELECT id, row_number() OVER (ORDER BY id) AS n FROM events) AS ranked
WHERE ranked.id = events.id;

--bun:split

INSERT INTO event_sequence (id, last) VALUES (1, (SELECT count(*) FROM events));

--bun:split

CREATE INDEX events_position ON events (seq);

--bun:split

CREATE INDEX events_workspace_position ON events (workspace_id, seq);
{{end}}
