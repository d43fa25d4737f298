-- Static delivery headers often carry credentials (a workflow tool's header auth): they are sealed with the server
-- key like the signing secrets, as one JSON object, instead of being stored in clear.
ALTER TABLE webhook_endpoints DROP COLUMN headers;

--bun:split

-- NULL: no static headers
ALTER TABLE webhook_endpoints ADD COLUMN sealed_headers TEXT;

--bun:split

-- A redelivery or recovery restarts the retry schedule without forgetting earlier attempts: the schedule position
-- of a delivery is attempts - schedule_start.
ALTER TABLE webhook_deliveries ADD COLUMN schedule_start INTEGER NOT NULL DEFAULT 0;

--bun:split

-- Retention prunes events (and with them deliveries and attempts) by age.
CREATE INDEX events_created ON events (created_at);
