-- A claim on PostgreSQL also returns the version of each delivery's endpoint row (its xmin, which every update of
-- the row changes), so that a dispatcher reads an endpoint only when it changed since it last read it instead of
-- once per claim: the endpoint read had become as costly as the claim itself (JSON columns to decode, a statement
-- to parse and plan). Otherwise the claim is the one before.
{{if eq .Dialect "pg"}}
DROP FUNCTION switchboard_claim_webhook_deliveries(TIMESTAMPTZ, TIMESTAMPTZ, INTEGER, TEXT[]);

CREATE FUNCTION switchboard_claim_webhook_deliveries(p_now TIMESTAMPTZ, p_until TIMESTAMPTZ, p_limit INTEGER,
    p_exclude TEXT[]) RETURNS TABLE (id TEXT, workspace_id TEXT, endpoint_id TEXT, event_id TEXT, event_type TEXT,
        status TEXT, attempts INTEGER, schedule_start INTEGER, next_attempt_at TIMESTAMPTZ, lease_until TIMESTAMPTZ,
        last_status_code INTEGER, last_error TEXT, created_at TIMESTAMPTZ, updated_at TIMESTAMPTZ,
        completed_at TIMESTAMPTZ, event_data JSONB, event_created_at TIMESTAMPTZ, endpoint_version TEXT)
    LANGUAGE plpgsql SET enable_sort = off SET enable_bitmapscan = off AS $$
#variable_conflict use_column
BEGIN
    PERFORM set_config('synchronous_commit', 'off', true);
    RETURN QUERY WITH claimed AS (
        UPDATE webhook_deliveries AS d SET lease_until = p_until, updated_at = p_now
        WHERE d.id IN (
            SELECT d2.id FROM webhook_deliveries AS d2
            WHERE d2.status = 'pending' AND d2.next_attempt_at <= p_now
                AND (d2.lease_until IS NULL OR d2.lease_until <= p_now)
                AND NOT EXISTS (SELECT 1 FROM webhook_endpoints AS e WHERE e.id = d2.endpoint_id AND e.status <> 'active')
                AND d2.endpoint_id <> ALL (p_exclude)
            ORDER BY d2.next_attempt_at, d2.id
            LIMIT p_limit
            FOR UPDATE OF d2 SKIP LOCKED)
        RETURNING d.*)
    SELECT c.id, c.workspace_id, c.endpoint_id, c.event_id, c.event_type, c.status, c.attempts, c.schedule_start,
        c.next_attempt_at, c.lease_until, c.last_status_code, c.last_error, c.created_at, c.updated_at,
        c.completed_at, ev.data, ev.created_at, e.xmin::text
    FROM claimed AS c JOIN events AS ev ON ev.id = c.event_id JOIN webhook_endpoints AS e ON e.id = c.endpoint_id;
END
$$;
{{else}}
SELECT 1;
{{end}}
