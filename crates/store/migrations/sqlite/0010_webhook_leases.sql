-- Deliveries in flight per subscription (a claim lets each subscription have only a few at
-- once, so one slow or dead receiver cannot take every worker). Must stay identical to
-- migrations/postgres/0010_webhook_leases.sql.
CREATE INDEX webhook_deliveries_leased_idx ON webhook_deliveries (subscription_id, locked_until)
    WHERE status = 'pending' AND locked_until IS NOT NULL;
-- Events by age: replays (events since T) and the 30-day pruning.
CREATE INDEX events_created_at_idx ON events (created_at);
