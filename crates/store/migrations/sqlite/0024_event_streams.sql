-- Event streams (GET /events/stream, SQLite). Must stay column-for-column identical to
-- migrations/postgres/0024_event_streams.sql.
--
-- A stream is a subscription of kind 'stream' (no URL, no secret) so that the outbox
-- (events.fanout, webhook_deliveries) serves it unchanged: an event is stored when a stream
-- wants it and the fan-out gives each stream its delivery rows. Its identity is the key and
-- its normalised types (event_types, sorted): one stream per (api_key_id, event_types).
ALTER TABLE webhook_subscriptions ADD COLUMN kind TEXT NOT NULL DEFAULT 'webhook';
CREATE UNIQUE INDEX webhook_subscriptions_stream_key
    ON webhook_subscriptions (api_key_id, event_types) WHERE kind = 'stream';

-- A stream's state: which connection serves it (lease_owner: a new connection takes it over),
-- the last send number given (last_seq), and when a connection last held it (seen_at: the
-- stream and its rows expire 24 h after it).
CREATE TABLE event_streams (
    subscription_id BLOB    NOT NULL REFERENCES webhook_subscriptions (id) ON DELETE CASCADE,
    lease_owner     TEXT,
    last_seq        INTEGER NOT NULL DEFAULT 0,
    seen_at         INTEGER NOT NULL,
    created_at      INTEGER NOT NULL,
    CONSTRAINT event_streams_pkey PRIMARY KEY (subscription_id)
);
CREATE INDEX event_streams_seen_at_idx ON event_streams (seen_at);

-- A stream delivery's send number (per stream, increasing; NULL: never sent). Stream
-- deliveries have no next_attempt_at, so the HTTP delivery workers never claim them; they
-- are 'pending' until a reconnect's Last-Event-ID acknowledges them ('succeeded').
ALTER TABLE webhook_deliveries ADD COLUMN sent_seq INTEGER;
-- A stream's rows never sent, oldest first: what an open stream reads at every wake-up (the
-- rows it sent stay pending until a reconnect acknowledges them, and are not in it).
CREATE INDEX webhook_deliveries_stream_unsent_idx
    ON webhook_deliveries (subscription_id, created_at, event_id)
    WHERE status = 'pending' AND next_attempt_at IS NULL AND sent_seq IS NULL;
-- A stream's rows sent and not acknowledged, by send: sent again or acknowledged on reconnect.
CREATE INDEX webhook_deliveries_stream_sent_idx ON webhook_deliveries (subscription_id, sent_seq)
    WHERE status = 'pending' AND sent_seq IS NOT NULL;
