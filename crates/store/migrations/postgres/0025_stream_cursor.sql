-- Event streams read the events table by a cursor (PostgreSQL). Must stay in step
-- with migrations/sqlite/0025_stream_cursor.sql.
--
-- 0024 gave each stream one delivery row per event (written at fan-out, numbered when sent,
-- acknowledged on reconnect): three writes per event per stream. Now the fan-out numbers an
-- event that a stream wants in its organisation's stream order (stream_seq, from the
-- organisation's head in stream_heads, taken under that row's lock so the numbers become
-- visible in order), and a stream is a position in that order: nothing is written per event
-- per stream, and a Last-Event-ID names its position.
ALTER TABLE events ADD COLUMN stream_seq BIGINT;
CREATE INDEX events_stream_seq_idx ON events (org_id, stream_seq) WHERE stream_seq IS NOT NULL;

CREATE TABLE stream_heads (
    org_id   UUID NOT NULL REFERENCES organisations (id),
    last_seq BIGINT NOT NULL,
    CONSTRAINT stream_heads_pkey PRIMARY KEY (org_id)
);

-- A stream starts at its organisation's head when it is registered: a Last-Event-ID before
-- it is not the stream's.
ALTER TABLE event_streams ADD COLUMN start_seq BIGINT NOT NULL DEFAULT 0;
ALTER TABLE event_streams DROP COLUMN last_seq;

-- The rows of 0024's design go (a connected stream starts from now after the upgrade).
DELETE FROM webhook_deliveries WHERE subscription_id IN (
    SELECT id FROM webhook_subscriptions WHERE kind = 'stream');
DROP INDEX webhook_deliveries_stream_unsent_idx;
DROP INDEX webhook_deliveries_stream_sent_idx;
ALTER TABLE webhook_deliveries DROP COLUMN sent_seq;
