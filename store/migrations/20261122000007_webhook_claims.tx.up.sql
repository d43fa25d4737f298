-- Dispatchers claim pending deliveries in due order, then queue order. A partial index holds just the pending ones in
-- that order, so a claim reads the first due rows and stops, however many deliveries the log keeps, and updates of
-- finished deliveries no longer touch it.
CREATE INDEX webhook_deliveries_pending ON webhook_deliveries (next_attempt_at, id) WHERE status = 'pending';

--bun:split

DROP INDEX webhook_deliveries_due;

--bun:split

-- PostgreSQL: every delivery is updated twice (claimed, then recorded), and the dead versions left in the pending
-- index sit exactly where claims start reading; measured, draining 10,000 deliveries three times without a vacuum
-- halves the claim rate. Vacuum this table after 1 % of it changed instead of the default 20 %, and leave room in
-- its pages so that claims (which change no indexed column) are HOT updates that add no index entries at all.
{{if eq .Dialect "pg"}}ALTER TABLE webhook_deliveries SET (autovacuum_vacuum_scale_factor = 0.01, autovacuum_vacuum_threshold = 1000,
    autovacuum_analyze_scale_factor = 0.01, autovacuum_analyze_threshold = 1000, fillfactor = 80){{else}}SELECT 1{{end}};
