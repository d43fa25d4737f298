-- The tokens a model bot's run cost (as its upstream reported them): what the bot's tokens_per_day counts.
ALTER TABLE bot_runs ADD COLUMN tokens INTEGER NOT NULL DEFAULT 0;

--bun:split

CREATE INDEX bot_runs_bot_time ON bot_runs (bot_id, created_at);
