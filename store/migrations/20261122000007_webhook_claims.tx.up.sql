-- Dispatchers claim pending deliveries in due order, then queue order. A partial index holds just the pending ones in
-- that order, so a claim reads the first due rows and stops, however many deliveries the log keeps, and updates of
-- finished deliveries no longer touch it.
CREATE INDEX webhook_deliveries_pending ON webhook_deliveries (next_attempt_at, id) WHERE status = 'pending';

--bun:split

DROP INDEX webhook_deliveries_due;
