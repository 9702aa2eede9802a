-- Tern initial schema (SQLite).
-- Must stay column-for-column identical to migrations/postgres/0001_initial.sql
-- (tests/conformance/parity.rs checks it).
-- Conventions: ids are UUIDs (v7) stored as 16-byte BLOBs, except phone_numbers.id (the network's id); instants are
-- INTEGER epoch milliseconds; JSON is TEXT, always read/written whole via sqlx Json<T>.
-- Constraint names follow `<table>_pkey` / `<table>_<cols>_key` so that StoreError::Conflict
-- carries the same name on both backends.
-- A row is "queued" for a background worker iff its next_attempt_at IS NOT NULL; workers
-- claim under BEGIN IMMEDIATE (PostgreSQL: FOR UPDATE SKIP LOCKED) and a lease (locked_until)
-- so crashed workers' rows return.

CREATE TABLE settings (
    key   TEXT  NOT NULL,
    value BLOB  NOT NULL,
    CONSTRAINT settings_pkey PRIMARY KEY (key)
);

CREATE TABLE organisations (
    id                   BLOB   NOT NULL,
    name                 TEXT   NOT NULL,
    plan                 TEXT   NOT NULL,
    subscription_status  TEXT   NOT NULL,
    wallet_balance_minor INTEGER NOT NULL DEFAULT 0,
    wallet_currency      TEXT   NOT NULL,
    overrides            TEXT   NOT NULL DEFAULT '{}',
    billing_period_start INTEGER NOT NULL,
    created_at           INTEGER NOT NULL,
    updated_at           INTEGER NOT NULL,
    CONSTRAINT organisations_pkey PRIMARY KEY (id)
);

CREATE TABLE members (
    id         BLOB   NOT NULL,
    org_id     BLOB   NOT NULL REFERENCES organisations (id),
    email      TEXT   NOT NULL, -- stored lower-cased: uniqueness is case-insensitive
    role       TEXT   NOT NULL,
    created_at INTEGER NOT NULL,
    CONSTRAINT members_pkey PRIMARY KEY (id),
    CONSTRAINT members_org_id_email_key UNIQUE (org_id, email)
);

CREATE TABLE api_keys (
    id           BLOB   NOT NULL,
    org_id       BLOB   NOT NULL REFERENCES organisations (id),
    member_id    BLOB   NOT NULL REFERENCES members (id),
    name         TEXT   NOT NULL,
    prefix       TEXT   NOT NULL,
    key_hash     BLOB   NOT NULL, -- SHA-256 of the full key; the key itself is never stored
    permissions  TEXT   NOT NULL,
    created_at   INTEGER NOT NULL,
    last_used_at INTEGER,
    revoked_at   INTEGER,
    replaced_by  BLOB REFERENCES api_keys (id),
    CONSTRAINT api_keys_pkey PRIMARY KEY (id),
    CONSTRAINT api_keys_key_hash_key UNIQUE (key_hash)
);
CREATE INDEX api_keys_org_id_id_idx ON api_keys (org_id, id);

CREATE TABLE phone_numbers (
    id                   TEXT   NOT NULL, -- the network's phone_number_id
    org_id               BLOB   NOT NULL REFERENCES organisations (id),
    display_phone_number TEXT   NOT NULL, -- E.164
    waba_id              TEXT   NOT NULL,
    access_token_enc     BLOB   NOT NULL,
    status               TEXT   NOT NULL,
    throughput_mps       INTEGER NOT NULL,
    created_at           INTEGER NOT NULL,
    updated_at           INTEGER NOT NULL,
    CONSTRAINT phone_numbers_pkey PRIMARY KEY (id)
);
CREATE INDEX phone_numbers_org_id_id_idx ON phone_numbers (org_id, id);
CREATE INDEX phone_numbers_org_id_display_idx ON phone_numbers (org_id, display_phone_number);

CREATE TABLE contact_fields (
    id         BLOB   NOT NULL,
    org_id     BLOB   NOT NULL REFERENCES organisations (id),
    key        TEXT   NOT NULL,
    label      TEXT   NOT NULL,
    field_type TEXT   NOT NULL,
    created_at INTEGER NOT NULL,
    CONSTRAINT contact_fields_pkey PRIMARY KEY (id),
    CONSTRAINT contact_fields_org_id_key_key UNIQUE (org_id, key)
);

CREATE TABLE contacts (
    id                 BLOB   NOT NULL,
    org_id             BLOB   NOT NULL REFERENCES organisations (id),
    wa_id              TEXT   NOT NULL, -- digits, no '+'
    name               TEXT,
    custom_fields      TEXT   NOT NULL DEFAULT '{}',
    consent_status     TEXT   NOT NULL DEFAULT 'unknown',
    consent_source     TEXT,
    consent_updated_at INTEGER,
    last_inbound_at    INTEGER,
    created_at         INTEGER NOT NULL,
    updated_at         INTEGER NOT NULL,
    CONSTRAINT contacts_pkey PRIMARY KEY (id),
    CONSTRAINT contacts_org_id_wa_id_key UNIQUE (org_id, wa_id)
);
CREATE INDEX contacts_org_id_id_idx ON contacts (org_id, id);
CREATE INDEX contacts_org_id_updated_at_id_idx ON contacts (org_id, updated_at, id);

CREATE TABLE contact_tags (
    org_id     BLOB   NOT NULL REFERENCES organisations (id),
    contact_id BLOB   NOT NULL REFERENCES contacts (id) ON DELETE CASCADE,
    tag        TEXT   NOT NULL,
    created_at INTEGER NOT NULL,
    CONSTRAINT contact_tags_pkey PRIMARY KEY (contact_id, tag)
);
-- GET /tags (distinct tags of an org) and audience filters by tag.
CREATE INDEX contact_tags_org_id_tag_idx ON contact_tags (org_id, tag, contact_id);

CREATE TABLE conversations (
    id              BLOB   NOT NULL,
    org_id          BLOB   NOT NULL REFERENCES organisations (id),
    contact_id      BLOB   NOT NULL REFERENCES contacts (id),
    phone_number_id TEXT   NOT NULL REFERENCES phone_numbers (id),
    last_inbound_at INTEGER, -- the network's timestamp of the last inbound message
    last_message_at INTEGER,
    created_at      INTEGER NOT NULL,
    CONSTRAINT conversations_pkey PRIMARY KEY (id),
    CONSTRAINT conversations_contact_id_phone_number_id_key UNIQUE (contact_id, phone_number_id)
);
CREATE INDEX conversations_org_id_id_idx ON conversations (org_id, id);

CREATE TABLE templates (
    id               BLOB   NOT NULL,
    org_id           BLOB   NOT NULL REFERENCES organisations (id),
    waba_id          TEXT   NOT NULL,
    name             TEXT   NOT NULL,
    language         TEXT   NOT NULL,
    category         TEXT   NOT NULL,
    status           TEXT   NOT NULL,
    components       TEXT   NOT NULL,
    rejection_reason TEXT,
    network_id       TEXT,
    created_at       INTEGER NOT NULL,
    updated_at       INTEGER NOT NULL,
    CONSTRAINT templates_pkey PRIMARY KEY (id),
    CONSTRAINT templates_org_id_waba_id_name_language_key UNIQUE (org_id, waba_id, name, language)
);
CREATE INDEX templates_org_id_id_idx ON templates (org_id, id);
CREATE INDEX templates_network_id_idx ON templates (network_id) WHERE network_id IS NOT NULL;

CREATE TABLE campaigns (
    id                BLOB   NOT NULL,
    org_id            BLOB   NOT NULL REFERENCES organisations (id),
    name              TEXT   NOT NULL,
    status            TEXT   NOT NULL,
    template_name     TEXT   NOT NULL,
    template_language TEXT   NOT NULL,
    phone_number_id   TEXT   NOT NULL REFERENCES phone_numbers (id),
    audience          TEXT   NOT NULL,
    variables         TEXT   NOT NULL,
    scheduled_at      INTEGER,
    launched_at       INTEGER,
    completed_at      INTEGER,
    counts            TEXT   NOT NULL DEFAULT '{}',
    locked_until      INTEGER, -- lease of the worker resolving / fanning out this campaign
    created_at        INTEGER NOT NULL,
    updated_at        INTEGER NOT NULL,
    CONSTRAINT campaigns_pkey PRIMARY KEY (id)
);
CREATE INDEX campaigns_org_id_id_idx ON campaigns (org_id, id);
CREATE INDEX campaigns_scheduled_at_idx ON campaigns (scheduled_at) WHERE scheduled_at IS NOT NULL;

CREATE TABLE messages (
    id                BLOB   NOT NULL,
    org_id            BLOB   NOT NULL REFERENCES organisations (id),
    conversation_id   BLOB   NOT NULL REFERENCES conversations (id),
    contact_id        BLOB   NOT NULL REFERENCES contacts (id),
    phone_number_id   TEXT   NOT NULL REFERENCES phone_numbers (id),
    direction         TEXT   NOT NULL,
    type              TEXT   NOT NULL,
    status            TEXT   NOT NULL,
    template_name     TEXT,
    template_language TEXT,
    text              TEXT,
    media_id          BLOB, -- no FK: media rows expire before messages do
    wamid             TEXT,
    request           TEXT ,
    campaign_id       BLOB REFERENCES campaigns (id),
    created_at        INTEGER NOT NULL,
    sent_at           INTEGER,
    delivered_at      INTEGER,
    read_at           INTEGER,
    failed_at         INTEGER,
    failure_code      TEXT,
    failure           TEXT ,
    -- dispatch queue
    attempts          INTEGER NOT NULL DEFAULT 0,
    next_attempt_at   INTEGER,
    locked_until      INTEGER,
    lease_owner       TEXT,
    updated_at        INTEGER NOT NULL,
    CONSTRAINT messages_pkey PRIMARY KEY (id)
);
-- Dedupe of inbound network retries and matching of status webhooks.
CREATE UNIQUE INDEX messages_wamid_key ON messages (wamid) WHERE wamid IS NOT NULL;
CREATE INDEX messages_org_id_id_idx ON messages (org_id, id);
CREATE INDEX messages_conversation_id_id_idx ON messages (conversation_id, id);
CREATE INDEX messages_campaign_id_idx ON messages (campaign_id) WHERE campaign_id IS NOT NULL;
-- The dispatcher's claim query scans only queued rows.
CREATE INDEX messages_dispatch_idx ON messages (next_attempt_at) WHERE next_attempt_at IS NOT NULL;

CREATE TABLE idempotency_keys (
    org_id       BLOB   NOT NULL REFERENCES organisations (id),
    key          TEXT   NOT NULL,
    fingerprint  BLOB   NOT NULL, -- SHA-256 of the canonical JSON body
    message_id   BLOB,
    state        TEXT   NOT NULL, -- in_progress | completed
    locked_until INTEGER, -- an in_progress claim left by a crashed process expires
    created_at   INTEGER NOT NULL,
    expires_at   INTEGER NOT NULL,
    CONSTRAINT idempotency_keys_pkey PRIMARY KEY (org_id, key)
);
CREATE INDEX idempotency_keys_expires_at_idx ON idempotency_keys (expires_at);

CREATE TABLE media (
    id               BLOB   NOT NULL,
    org_id           BLOB   NOT NULL REFERENCES organisations (id),
    phone_number_id  TEXT,
    mime_type        TEXT   NOT NULL,
    size_bytes       INTEGER NOT NULL,
    sha256           BLOB ,
    filename         TEXT,
    storage_key      TEXT,
    source_url       TEXT,
    network_media_id TEXT,
    status           TEXT   NOT NULL, -- importing | ready | failed | expired
    locked_until     INTEGER, -- lease of a running URL import (counts toward the per-org cap)
    created_at       INTEGER NOT NULL,
    expires_at       INTEGER NOT NULL,
    updated_at       INTEGER NOT NULL,
    CONSTRAINT media_pkey PRIMARY KEY (id)
);
CREATE INDEX media_org_id_status_idx ON media (org_id, status);
CREATE INDEX media_expires_at_idx ON media (expires_at);

CREATE TABLE webhook_subscriptions (
    id              BLOB    NOT NULL,
    org_id          BLOB    NOT NULL REFERENCES organisations (id),
    api_key_id      BLOB    NOT NULL REFERENCES api_keys (id),
    url             TEXT    NOT NULL,
    event_types     TEXT    NOT NULL,
    secret_enc      BLOB    NOT NULL,
    enabled         BOOLEAN NOT NULL DEFAULT TRUE,
    description     TEXT,
    disabled_reason TEXT,
    created_at      INTEGER  NOT NULL,
    updated_at      INTEGER  NOT NULL,
    CONSTRAINT webhook_subscriptions_pkey PRIMARY KEY (id)
);
CREATE INDEX webhook_subscriptions_api_key_id_id_idx ON webhook_subscriptions (api_key_id, id);
CREATE INDEX webhook_subscriptions_org_id_idx ON webhook_subscriptions (org_id);

-- The durable outbox of customer-facing events; deliveries are created in the same
-- transaction as the event so nothing is lost if a worker or cache is down.
CREATE TABLE events (
    id         BLOB   NOT NULL,
    org_id     BLOB   NOT NULL REFERENCES organisations (id),
    type       TEXT   NOT NULL,
    payload    TEXT   NOT NULL,
    created_at INTEGER NOT NULL,
    CONSTRAINT events_pkey PRIMARY KEY (id)
);
CREATE INDEX events_org_id_id_idx ON events (org_id, id);

CREATE TABLE webhook_deliveries (
    id               BLOB   NOT NULL,
    event_id         BLOB   NOT NULL REFERENCES events (id),
    subscription_id  BLOB   NOT NULL REFERENCES webhook_subscriptions (id) ON DELETE CASCADE,
    status           TEXT   NOT NULL, -- pending | succeeded | failed
    attempts         INTEGER NOT NULL DEFAULT 0,
    next_attempt_at  INTEGER,
    locked_until     INTEGER,
    lease_owner      TEXT,
    last_status_code INTEGER,
    last_error       TEXT,
    created_at       INTEGER NOT NULL,
    updated_at       INTEGER NOT NULL,
    CONSTRAINT webhook_deliveries_pkey PRIMARY KEY (id),
    CONSTRAINT webhook_deliveries_event_id_subscription_id_key UNIQUE (event_id, subscription_id)
);
CREATE INDEX webhook_deliveries_subscription_id_id_idx ON webhook_deliveries (subscription_id, id);
CREATE INDEX webhook_deliveries_due_idx ON webhook_deliveries (next_attempt_at) WHERE next_attempt_at IS NOT NULL;

CREATE TABLE webhook_attempts (
    id              BLOB   NOT NULL,
    delivery_id     BLOB   NOT NULL REFERENCES webhook_deliveries (id) ON DELETE CASCADE,
    subscription_id BLOB   NOT NULL, -- denormalised so attempts list per subscription cheaply
    attempted_at    INTEGER NOT NULL,
    status_code     INTEGER,
    error           TEXT,
    duration_ms     INTEGER NOT NULL,
    CONSTRAINT webhook_attempts_pkey PRIMARY KEY (id)
);
CREATE INDEX webhook_attempts_delivery_id_idx ON webhook_attempts (delivery_id, attempted_at);
CREATE INDEX webhook_attempts_subscription_id_id_idx ON webhook_attempts (subscription_id, id);

CREATE TABLE campaign_recipients (
    campaign_id  BLOB   NOT NULL REFERENCES campaigns (id) ON DELETE CASCADE,
    contact_id   BLOB   NOT NULL REFERENCES contacts (id),
    message_id   BLOB,
    status       TEXT   NOT NULL, -- pending | queued | skipped | sent | failed ...
    locked_until INTEGER,
    created_at   INTEGER NOT NULL,
    updated_at   INTEGER NOT NULL,
    CONSTRAINT campaign_recipients_pkey PRIMARY KEY (campaign_id, contact_id)
);
CREATE INDEX campaign_recipients_campaign_id_status_idx ON campaign_recipients (campaign_id, status, contact_id);

-- Raw signed batches from the network webhook, stored before answering 200.
CREATE TABLE network_inbox (
    id           BLOB   NOT NULL,
    received_at  INTEGER NOT NULL,
    signature    TEXT,
    body         BLOB   NOT NULL,
    processed_at INTEGER,
    attempts     INTEGER NOT NULL DEFAULT 0,
    locked_until INTEGER,
    error        TEXT,
    CONSTRAINT network_inbox_pkey PRIMARY KEY (id)
);
CREATE INDEX network_inbox_pending_idx ON network_inbox (received_at) WHERE processed_at IS NULL;

CREATE TABLE usage_counters (
    org_id       BLOB   NOT NULL REFERENCES organisations (id),
    meter        TEXT   NOT NULL, -- api_requests | messages_sent
    period_start INTEGER NOT NULL,
    count        INTEGER NOT NULL DEFAULT 0,
    CONSTRAINT usage_counters_pkey PRIMARY KEY (org_id, meter, period_start)
);

CREATE TABLE wallet_ledger (
    id           BLOB   NOT NULL,
    org_id       BLOB   NOT NULL REFERENCES organisations (id),
    amount_minor INTEGER NOT NULL, -- negative = debit
    reason       TEXT   NOT NULL, -- top_up | message_debit | message_refund | adjustment
    message_id   BLOB,
    created_at   INTEGER NOT NULL,
    CONSTRAINT wallet_ledger_pkey PRIMARY KEY (id)
);
CREATE INDEX wallet_ledger_org_id_id_idx ON wallet_ledger (org_id, id);
-- A message is debited once and refunded once, even if a worker retries.
CREATE UNIQUE INDEX wallet_ledger_message_id_reason_key ON wallet_ledger (message_id, reason)
    WHERE message_id IS NOT NULL;
