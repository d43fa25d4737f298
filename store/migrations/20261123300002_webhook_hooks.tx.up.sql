-- Workflow tools' REST-hook subscriptions: a kind (a hook is deleted, not disabled, when its receiver answers 410),
-- an optional end, and conditions on the payload (a JSON array of {pointer, op, value|values}; NULL for none).
ALTER TABLE webhook_endpoints ADD COLUMN kind TEXT NOT NULL DEFAULT 'endpoint';

--bun:split

ALTER TABLE webhook_endpoints ADD COLUMN expires_at TIMESTAMPTZ;

--bun:split

ALTER TABLE webhook_endpoints ADD COLUMN filters {{if eq .Dialect "pg"}}JSONB{{else}}TEXT{{end}};

--bun:split

CREATE INDEX webhook_endpoints_expires ON webhook_endpoints (expires_at) WHERE expires_at IS NOT NULL;
