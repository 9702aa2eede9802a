-- Deliveries in flight per subscription (a claim lets each subscription have only a few at
-- once, so one slow or dead receiver cannot take every worker). Must stay identical to
-- migrations/sqlite/0010_webhook_leases.sql.
CREATE INDEX webhook_deliveries_leased_idx ON webhook_deliveries (subscription_id, locked_until)
    WHERE status = 'pending' AND locked_until IS NOT NULL;
-- Events by age: replays (events since T) and the 30-day pruning.
CREATE INDEX events_created_at_idx ON events (created_at);
-- A subscription's due deliveries, earliest first: claims take each subscription's first few
-- through it, so a claim's cost does not grow with the backlog.
CREATE INDEX webhook_deliveries_subscription_due_idx
    ON webhook_deliveries (subscription_id, next_attempt_at, id) WHERE status = 'pending';
