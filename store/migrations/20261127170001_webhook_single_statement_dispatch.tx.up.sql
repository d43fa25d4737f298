-- A webhook dispatcher's claims, and its records of successful attempts, as single statements on PostgreSQL: a
-- call to one of these functions is its own transaction, one round trip, where a transaction around it took three
-- (BEGIN with the settings; the statements; COMMIT) and, to record, a read of the batch's deliveries first.
-- Each sets what its transaction needs itself: the planner settings for the call only (SET clauses), and a commit
-- that does not wait for a disk flush (losing a claim or a record in a crash of the server only sends deliveries
-- again, which at-least-once delivery allows). SQLite, whose transactions cost no round trips, keeps its
-- statements in the store.
{{if eq .Dialect "pg"}}
-- Claim: lease up to p_limit due deliveries of active endpoints not in p_exclude until p_until, oldest due first,
-- each with its event's data and time (a dispatcher sends them: one statement where a claim and a read of its
-- events were two) and the version of its endpoint's row (its xmin, which every update of the row changes: a
-- dispatcher reads an endpoint again only when it changed since it last read it, instead of once per claim). The
-- planner walks the pending index in order and stops at the limit (no sort, no bitmap scan): with statistics older
-- than a sudden backlog it would rather read every due delivery and sort them.
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

-- Record: a batch of successful attempts (a batch with a failure reads and judges its endpoints in a transaction).
-- Each delivery is marked succeeded if the dispatcher still holds the lease it claimed it with (if not, the lease
-- ran out and another dispatcher holds it now, or it was deleted with its endpoint or event), its endpoint's run of
-- failures ends, and the attempts are logged. The attempt columns are arrays, element i of each for the delivery
-- p_ids[i] claimed under the lease p_leases[i]. It returns the deliveries it left alone: superseded (they exist,
-- under another lease) or not (they are gone, and their attempts are not logged).
CREATE FUNCTION switchboard_record_webhook_successes(p_at TIMESTAMPTZ, p_ids TEXT[], p_leases TIMESTAMPTZ[],
    p_attempt_ids TEXT[], p_started_at TIMESTAMPTZ[], p_duration_ms INTEGER[], p_status_code INTEGER[],
    p_error_class TEXT[], p_response_excerpt TEXT[], p_response_headers JSONB[], p_signature TEXT[])
    RETURNS TABLE (left_id TEXT, superseded BOOLEAN) LANGUAGE plpgsql
    -- Every statement finds its rows by key; planned with the statistics of an empty queue, the update would rather
    -- hash-join a sequential scan of every delivery.
    SET enable_seqscan = off AS $$
DECLARE
    v_recorded TEXT[];
    v_endpoints TEXT[];
BEGIN
    PERFORM set_config('synchronous_commit', 'off', true);
    WITH done AS (
        UPDATE webhook_deliveries AS d SET status = 'succeeded', attempts = d.attempts + 1, next_attempt_at = NULL,
            lease_until = NULL, last_status_code = u.status_code, last_error = u.error_class, updated_at = p_at,
            completed_at = p_at
        FROM unnest(p_ids, p_leases, p_status_code, p_error_class) AS u (id, lease_until, status_code, error_class)
        WHERE d.id = u.id AND d.lease_until = u.lease_until
        RETURNING d.id, d.endpoint_id)
    SELECT array_agg(done.id), array_agg(DISTINCT done.endpoint_id) INTO v_recorded, v_endpoints FROM done;
    UPDATE webhook_endpoints AS e SET failing_since = NULL
    WHERE e.id = ANY (v_endpoints) AND e.failing_since IS NOT NULL;
    INSERT INTO webhook_attempts (id, delivery_id, started_at, duration_ms, status_code, error_class,
        response_excerpt, response_headers, signature)
    SELECT a.* FROM unnest(p_attempt_ids, p_ids, p_started_at, p_duration_ms, p_status_code, p_error_class,
            p_response_excerpt, p_response_headers, p_signature)
        AS a (id, delivery_id, started_at, duration_ms, status_code, error_class, response_excerpt,
            response_headers, signature)
    WHERE EXISTS (SELECT 1 FROM webhook_deliveries AS d WHERE d.id = a.delivery_id);
    RETURN QUERY SELECT u.id, EXISTS (SELECT 1 FROM webhook_deliveries AS d WHERE d.id = u.id)
        FROM unnest(p_ids) AS u (id)
        WHERE u.id <> ALL (coalesce(v_recorded, '{}'));
END
$$;
{{else}}
SELECT 1;
{{end}}
