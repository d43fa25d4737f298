-- The statements a webhook dispatcher runs for every batch, as PL/pgSQL functions on PostgreSQL. A server session
-- keeps the plans of a function's statements, so a claim or a recorded batch is parsed and planned once per
-- connection instead of once per call: while a dispatcher drained a backlog, planning the claim alone cost the
-- server 185 µs a call, more than a quarter of what a claim cost it. A call is still one plain statement (the
-- simple protocol, pipelined transactions and PgBouncer's transaction mode work as before), and the settings of the
-- caller's transaction (no sorts for the claim, no sequential scans for the record) apply to the plans made inside.
-- SQLite has no stored functions; there the store runs the same statements itself.
{{if eq .Dialect "pg"}}
-- Claim: lease up to p_limit due deliveries of active endpoints not in p_exclude until p_until, oldest due first.
CREATE FUNCTION switchboard_claim_webhook_deliveries(p_now TIMESTAMPTZ, p_until TIMESTAMPTZ, p_limit INTEGER,
    p_exclude TEXT[]) RETURNS SETOF webhook_deliveries LANGUAGE plpgsql AS $$
BEGIN
    RETURN QUERY UPDATE webhook_deliveries AS d SET lease_until = p_until, updated_at = p_now
    WHERE d.id IN (
        SELECT d2.id FROM webhook_deliveries AS d2
        WHERE d2.status = 'pending' AND d2.next_attempt_at <= p_now
            AND (d2.lease_until IS NULL OR d2.lease_until <= p_now)
            AND NOT EXISTS (SELECT 1 FROM webhook_endpoints AS e WHERE e.id = d2.endpoint_id AND e.status <> 'active')
            AND d2.endpoint_id <> ALL (p_exclude)
        ORDER BY d2.next_attempt_at, d2.id
        LIMIT p_limit
        FOR UPDATE OF d2 SKIP LOCKED)
    RETURNING d.*;
END
$$;

-- Record: the new state of a batch of deliveries, one array per column, element i of each for delivery p_ids[i].
CREATE FUNCTION switchboard_record_webhook_deliveries(p_ids TEXT[], p_status TEXT[], p_attempts INTEGER[],
    p_next_attempt_at TIMESTAMPTZ[], p_lease_until TIMESTAMPTZ[], p_last_status_code INTEGER[], p_last_error TEXT[],
    p_updated_at TIMESTAMPTZ[], p_completed_at TIMESTAMPTZ[]) RETURNS VOID LANGUAGE plpgsql AS $$
BEGIN
    UPDATE webhook_deliveries AS d SET status = u.status, attempts = u.attempts, next_attempt_at = u.next_attempt_at,
        lease_until = u.lease_until, last_status_code = u.last_status_code, last_error = u.last_error,
        updated_at = u.updated_at, completed_at = u.completed_at
    FROM unnest(p_ids, p_status, p_attempts, p_next_attempt_at, p_lease_until, p_last_status_code, p_last_error,
            p_updated_at, p_completed_at)
        AS u (id, status, attempts, next_attempt_at, lease_until, last_status_code, last_error, updated_at,
            completed_at)
    WHERE d.id = u.id;
END
$$;

-- Log: a batch of attempts, one array per column.
CREATE FUNCTION switchboard_log_webhook_attempts(p_ids TEXT[], p_delivery_ids TEXT[], p_started_at TIMESTAMPTZ[],
    p_duration_ms INTEGER[], p_status_code INTEGER[], p_error_class TEXT[], p_response_excerpt TEXT[],
    p_response_headers JSONB[], p_signature TEXT[]) RETURNS VOID LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO webhook_attempts (id, delivery_id, started_at, duration_ms, status_code, error_class,
        response_excerpt, response_headers, signature)
    SELECT * FROM unnest(p_ids, p_delivery_ids, p_started_at, p_duration_ms, p_status_code, p_error_class,
        p_response_excerpt, p_response_headers, p_signature);
END
$$;
{{else}}
SELECT 1;
{{end}}
