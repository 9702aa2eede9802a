-- Deferred fan-out (issue 14): the change's transaction writes one events row naming the
-- subscriptions that wanted it (fanout, a JSON array of ids); the delivery workers turn it
-- into delivery rows later, in batches, and clear fanout. A status change with 50
-- subscribers writes 1 row instead of 51. Must stay identical to
-- migrations/postgres/0011_event_fanout.sql.
ALTER TABLE events ADD COLUMN fanout TEXT;
-- Events still to fan out, oldest first.
CREATE INDEX events_fanout_idx ON events (created_at, id) WHERE fanout IS NOT NULL;
