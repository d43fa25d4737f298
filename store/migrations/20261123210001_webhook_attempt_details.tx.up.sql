-- What the delivery log shows of each attempt besides its status and body excerpt: the receiver's response headers
-- (JSON object of name → value, bounded by the sender) and the webhook-signature header the attempt was sent with,
-- so that the exact signed request can be shown even after the endpoint's secret was rotated.
ALTER TABLE webhook_attempts ADD COLUMN response_headers {{if eq .Dialect "pg"}}JSONB{{else}}TEXT{{end}};

--bun:split

ALTER TABLE webhook_attempts ADD COLUMN signature TEXT;

--bun:split

-- An endpoint's health over the last day reads its attempts by time.
CREATE INDEX webhook_attempts_started ON webhook_attempts (started_at);
