-- The event-webhooks capability (PostgreSQL). Must stay column-for-column identical to
-- migrations/sqlite/0009_event_webhooks.sql.
--
-- The four tables of 0001 were placeholders that no code ever wrote, so they are replaced
-- rather than altered (children first, for the foreign keys).
DROP TABLE webhook_attempts;
DROP TABLE webhook_deliveries;
DROP TABLE events;
DROP TABLE webhook_subscriptions;

-- An endpoint of an organisation, owned by the API key that created it (other keys of the
-- organisation do not see it) but fed every event of the organisation whose type it lists.
-- Secrets are encrypted by the caller; during a rotation the previous secret signs too,
-- until previous_secret_expires_at.
CREATE TABLE webhook_subscriptions (
    id                         UUID    NOT NULL,
    org_id                     UUID    NOT NULL REFERENCES organisations (id),
    api_key_id                 UUID    NOT NULL REFERENCES api_keys (id),
    url                        TEXT    NOT NULL,
    event_types                JSONB   NOT NULL, -- array of event type names
    secret_enc                 BYTEA   NOT NULL,
    previous_secret_enc        BYTEA,
    previous_secret_expires_at BIGINT,
    enabled                    BOOLEAN NOT NULL DEFAULT TRUE,
    description                TEXT,
    disabled_reason            TEXT, -- e.g. gone (the receiver answered 410)
    created_at                 BIGINT  NOT NULL,
    updated_at                 BIGINT  NOT NULL,
    CONSTRAINT webhook_subscriptions_pkey PRIMARY KEY (id)
);
-- A key's subscriptions by id (listing, pagination).
CREATE INDEX webhook_subscriptions_api_key_id_id_idx ON webhook_subscriptions (api_key_id, id);
-- The subscriptions an event of the organisation goes to.
CREATE INDEX webhook_subscriptions_org_id_idx ON webhook_subscriptions (org_id);

-- The durable outbox: an event and its deliveries are written in the transaction of the
-- change they report. payload is TEXT on both backends: it is the exact body that is signed
-- and sent, on every attempt (JSONB would reorder keys and drop whitespace).
CREATE TABLE events (
    id         UUID    NOT NULL,
    org_id     UUID    NOT NULL REFERENCES organisations (id),
    type       TEXT    NOT NULL,
    payload    TEXT    NOT NULL,
    created_at BIGINT  NOT NULL,
    CONSTRAINT events_pkey PRIMARY KEY (id)
);
CREATE INDEX events_org_id_id_idx ON events (org_id, id);

-- One event for one subscription: a job queue. A pending delivery is due at
-- next_attempt_at (a claim moves it to the end of its lease, so a crashed worker's delivery
-- comes back then); succeeded and failed ones have no next_attempt_at.
CREATE TABLE webhook_deliveries (
    id               UUID    NOT NULL,
    event_id         UUID    NOT NULL REFERENCES events (id) ON DELETE CASCADE,
    subscription_id  UUID    NOT NULL REFERENCES webhook_subscriptions (id) ON DELETE CASCADE,
    status           TEXT    NOT NULL, -- pending | succeeded | failed
    attempts         BIGINT  NOT NULL DEFAULT 0, -- attempts recorded
    next_attempt_at  BIGINT,
    locked_until     BIGINT,
    lease_owner      TEXT,
    last_status_code BIGINT,
    last_error       TEXT,
    created_at       BIGINT  NOT NULL,
    updated_at       BIGINT  NOT NULL,
    CONSTRAINT webhook_deliveries_pkey PRIMARY KEY (id),
    CONSTRAINT webhook_deliveries_event_id_subscription_id_key UNIQUE (event_id, subscription_id)
);
-- Due deliveries, earliest first, and the earliest due time; only pending ones are indexed.
CREATE INDEX webhook_deliveries_due_idx ON webhook_deliveries (next_attempt_at, id)
    WHERE status = 'pending';
-- Replay of a subscription's failed deliveries (and the cascade on delete).
CREATE INDEX webhook_deliveries_subscription_id_status_idx
    ON webhook_deliveries (subscription_id, status);

-- Every attempt to deliver, for the deliveries log of a subscription (newest first).
CREATE TABLE webhook_attempts (
    id              UUID    NOT NULL,
    delivery_id     UUID    NOT NULL REFERENCES webhook_deliveries (id) ON DELETE CASCADE,
    subscription_id UUID    NOT NULL, -- denormalised: the log is listed per subscription
    event_id        UUID    NOT NULL,
    event_type      TEXT    NOT NULL,
    attempt         BIGINT  NOT NULL, -- 1-based number of the attempt within its delivery
    status          TEXT    NOT NULL, -- succeeded | failed
    response_status BIGINT,
    latency_ms      BIGINT  NOT NULL,
    error           TEXT,
    created_at      BIGINT  NOT NULL,
    CONSTRAINT webhook_attempts_pkey PRIMARY KEY (id)
);
CREATE INDEX webhook_attempts_subscription_id_created_at_id_idx
    ON webhook_attempts (subscription_id, created_at DESC, id DESC);
CREATE INDEX webhook_attempts_delivery_id_idx ON webhook_attempts (delivery_id);
