-- Tern initial schema (PostgreSQL).
-- Must stay column-for-column identical to migrations/sqlite/0001_initial.sql
-- (tests/conformance/parity.rs checks it).
-- Conventions: ids are UUID (v7) except phone_numbers.id (the network's id); instants are
-- BIGINT epoch milliseconds; JSON is JSONB, always read/written whole via sqlx Json<T>.
-- Constraint names follow `<table>_pkey` / `<table>_<cols>_key` so that StoreError::Conflict
-- carries the same name on both backends.
-- A row is "queued" for a background worker iff its next_attempt_at IS NOT NULL; workers
-- claim with FOR UPDATE SKIP LOCKED and a lease (locked_until) so crashed workers' rows return.

CREATE TABLE settings (
    key   TEXT  NOT NULL,
    value BYTEA NOT NULL,
    CONSTRAINT settings_pkey PRIMARY KEY (key)
);

CREATE TABLE organisations (
    id                   UUID   NOT NULL,
    name                 TEXT   NOT NULL,
    plan                 TEXT   NOT NULL,
    subscription_status  TEXT   NOT NULL,
    wallet_balance_minor BIGINT NOT NULL DEFAULT 0,
    wallet_currency      TEXT   NOT NULL,
    overrides            JSONB  NOT NULL DEFAULT '{}',
    billing_period_start BIGINT NOT NULL,
    created_at           BIGINT NOT NULL,
    updated_at           BIGINT NOT NULL,
    CONSTRAINT organisations_pkey PRIMARY KEY (id)
);

CREATE TABLE members (
    id         UUID   NOT NULL,
    org_id     UUID   NOT NULL REFERENCES organisations (id),
    email      TEXT   NOT NULL, -- stored lower-cased: uniqueness is case-insensitive
    role       TEXT   NOT NULL,
    created_at BIGINT NOT NULL,
    CONSTRAINT members_pkey PRIMARY KEY (id),
    CONSTRAINT members_org_id_email_key UNIQUE (org_id, email)
);

CREATE TABLE api_keys (
    id           UUID   NOT NULL,
    org_id       UUID   NOT NULL REFERENCES organisations (id),
    member_id    UUID   NOT NULL REFERENCES members (id),
    name         TEXT   NOT NULL,
    prefix       TEXT   NOT NULL,
    key_hash     BYTEA  NOT NULL, -- SHA-256 of the full key; the key itself is never stored
    permissions  JSONB  NOT NULL,
    created_at   BIGINT NOT NULL,
    last_used_at BIGINT,
    revoked_at   BIGINT,
    replaced_by  UUID REFERENCES api_keys (id),
    CONSTRAINT api_keys_pkey PRIMARY KEY (id),
    CONSTRAINT api_keys_key_hash_key UNIQUE (key_hash)
);
CREATE INDEX api_keys_org_id_id_idx ON api_keys (org_id, id);

CREATE TABLE phone_numbers (
    -- COLLATE "C": keyset pages order bytewise, like SQLite, whatever the database locale.
    id                   TEXT   COLLATE "C" NOT NULL, -- the network's phone_number_id
    org_id               UUID   NOT NULL REFERENCES organisations (id),
    display_phone_number TEXT   NOT NULL, -- E.164
    waba_id              TEXT   NOT NULL,
    access_token_enc     BYTEA  NOT NULL,
    status               TEXT   NOT NULL,
    throughput_mps       BIGINT NOT NULL,
    created_at           BIGINT NOT NULL,
    updated_at           BIGINT NOT NULL,
    CONSTRAINT phone_numbers_pkey PRIMARY KEY (id)
);
CREATE INDEX phone_numbers_org_id_id_idx ON phone_numbers (org_id, id);
CREATE INDEX phone_numbers_org_id_display_idx ON phone_numbers (org_id, display_phone_number);

CREATE TABLE contact_fields (
    id         UUID   NOT NULL,
    org_id     UUID   NOT NULL REFERENCES organisations (id),
    key        TEXT   COLLATE "C" NOT NULL, -- keyset order, as phone_numbers.id
    label      TEXT   NOT NULL,
    field_type TEXT   NOT NULL,
    created_at BIGINT NOT NULL,
    CONSTRAINT contact_fields_pkey PRIMARY KEY (id),
    CONSTRAINT contact_fields_org_id_key_key UNIQUE (org_id, key)
);

CREATE TABLE contacts (
    id                 UUID   NOT NULL,
    org_id             UUID   NOT NULL REFERENCES organisations (id),
    wa_id              TEXT   NOT NULL, -- digits, no '+'
    name               TEXT,
    custom_fields      JSONB  NOT NULL DEFAULT '{}',
    consent_status     TEXT   NOT NULL DEFAULT 'unknown',
    consent_source     TEXT,
    consent_updated_at BIGINT,
    last_inbound_at    BIGINT,
    created_at         BIGINT NOT NULL,
    updated_at         BIGINT NOT NULL,
    CONSTRAINT contacts_pkey PRIMARY KEY (id),
    CONSTRAINT contacts_org_id_wa_id_key UNIQUE (org_id, wa_id)
);
CREATE INDEX contacts_org_id_id_idx ON contacts (org_id, id);
CREATE INDEX contacts_org_id_updated_at_id_idx ON contacts (org_id, updated_at, id);

CREATE TABLE contact_tags (
    org_id     UUID   NOT NULL REFERENCES organisations (id),
    contact_id UUID   NOT NULL REFERENCES contacts (id) ON DELETE CASCADE,
    tag        TEXT   COLLATE "C" NOT NULL, -- keyset order, as phone_numbers.id
    created_at BIGINT NOT NULL,
    CONSTRAINT contact_tags_pkey PRIMARY KEY (contact_id, tag)
);
-- GET /tags (distinct tags of an org) and audience filters by tag.
CREATE INDEX contact_tags_org_id_tag_idx ON contact_tags (org_id, tag, contact_id);

CREATE TABLE conversations (
    id              UUID   NOT NULL,
    org_id          UUID   NOT NULL REFERENCES organisations (id),
    contact_id      UUID   NOT NULL REFERENCES contacts (id),
    phone_number_id TEXT   NOT NULL REFERENCES phone_numbers (id),
    last_inbound_at BIGINT, -- the network's timestamp of the last inbound message
    last_message_at BIGINT,
    created_at      BIGINT NOT NULL,
    CONSTRAINT conversations_pkey PRIMARY KEY (id),
    CONSTRAINT conversations_contact_id_phone_number_id_key UNIQUE (contact_id, phone_number_id)
);
CREATE INDEX conversations_org_id_id_idx ON conversations (org_id, id);

CREATE TABLE templates (
    id               UUID   NOT NULL,
    org_id           UUID   NOT NULL REFERENCES organisations (id),
    waba_id          TEXT   NOT NULL,
    name             TEXT   NOT NULL,
    language         TEXT   NOT NULL,
    category         TEXT   NOT NULL,
    status           TEXT   NOT NULL,
    components       JSONB  NOT NULL,
    rejection_reason TEXT,
    network_id       TEXT,
    created_at       BIGINT NOT NULL,
    updated_at       BIGINT NOT NULL,
    CONSTRAINT templates_pkey PRIMARY KEY (id),
    CONSTRAINT templates_org_id_waba_id_name_language_key UNIQUE (org_id, waba_id, name, language)
);
CREATE INDEX templates_org_id_id_idx ON templates (org_id, id);
CREATE INDEX templates_network_id_idx ON templates (network_id) WHERE network_id IS NOT NULL;

CREATE TABLE campaigns (
    id                UUID   NOT NULL,
    org_id            UUID   NOT NULL REFERENCES organisations (id),
    name              TEXT   NOT NULL,
    status            TEXT   NOT NULL,
    template_name     TEXT   NOT NULL,
    template_language TEXT   NOT NULL,
    phone_number_id   TEXT   NOT NULL REFERENCES phone_numbers (id),
    audience          JSONB  NOT NULL,
    variables         JSONB  NOT NULL,
    scheduled_at      BIGINT,
    launched_at       BIGINT,
    completed_at      BIGINT,
    counts            JSONB  NOT NULL DEFAULT '{}',
    locked_until      BIGINT, -- lease of the worker resolving / fanning out this campaign
    created_at        BIGINT NOT NULL,
    updated_at        BIGINT NOT NULL,
    CONSTRAINT campaigns_pkey PRIMARY KEY (id)
);
CREATE INDEX campaigns_org_id_id_idx ON campaigns (org_id, id);
CREATE INDEX campaigns_scheduled_at_idx ON campaigns (scheduled_at) WHERE scheduled_at IS NOT NULL;

CREATE TABLE messages (
    id                UUID   NOT NULL,
    org_id            UUID   NOT NULL REFERENCES organisations (id),
    conversation_id   UUID   NOT NULL REFERENCES conversations (id),
    contact_id        UUID   NOT NULL REFERENCES contacts (id),
    phone_number_id   TEXT   NOT NULL REFERENCES phone_numbers (id),
    direction         TEXT   NOT NULL,
    type              TEXT   NOT NULL,
    status            TEXT   NOT NULL,
    template_name     TEXT,
    template_language TEXT,
    text              TEXT,
    media_id          UUID, -- no FK: media rows expire before messages do
    wamid             TEXT,
    request           JSONB,
    campaign_id       UUID REFERENCES campaigns (id),
    created_at        BIGINT NOT NULL,
    sent_at           BIGINT,
    delivered_at      BIGINT,
    read_at           BIGINT,
    failed_at         BIGINT,
    failure_code      TEXT,
    failure           JSONB,
    -- dispatch queue
    attempts          BIGINT NOT NULL DEFAULT 0,
    next_attempt_at   BIGINT,
    locked_until      BIGINT,
    lease_owner       TEXT,
    updated_at        BIGINT NOT NULL,
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
    org_id       UUID   NOT NULL REFERENCES organisations (id),
    key          TEXT   NOT NULL,
    fingerprint  BYTEA  NOT NULL, -- SHA-256 of the canonical JSON body
    message_id   UUID,
    state        TEXT   NOT NULL, -- in_progress | completed
    locked_until BIGINT, -- an in_progress claim left by a crashed process expires
    created_at   BIGINT NOT NULL,
    expires_at   BIGINT NOT NULL,
    CONSTRAINT idempotency_keys_pkey PRIMARY KEY (org_id, key)
);
CREATE INDEX idempotency_keys_expires_at_idx ON idempotency_keys (expires_at);

CREATE TABLE media (
    id               UUID   NOT NULL,
    org_id           UUID   NOT NULL REFERENCES organisations (id),
    phone_number_id  TEXT,
    mime_type        TEXT   NOT NULL,
    size_bytes       BIGINT NOT NULL,
    sha256           BYTEA,
    filename         TEXT,
    storage_key      TEXT,
    source_url       TEXT,
    network_media_id TEXT,
    status           TEXT   NOT NULL, -- importing | ready | failed | expired
    locked_until     BIGINT, -- lease of a running URL import (counts toward the per-org cap)
    created_at       BIGINT NOT NULL,
    expires_at       BIGINT NOT NULL,
    updated_at       BIGINT NOT NULL,
    CONSTRAINT media_pkey PRIMARY KEY (id)
);
CREATE INDEX media_org_id_status_idx ON media (org_id, status);
CREATE INDEX media_expires_at_idx ON media (expires_at);

CREATE TABLE webhook_subscriptions (
    id              UUID    NOT NULL,
    org_id          UUID    NOT NULL REFERENCES organisations (id),
    api_key_id      UUID    NOT NULL REFERENCES api_keys (id),
    url             TEXT    NOT NULL,
    event_types     JSONB   NOT NULL,
    secret_enc      BYTEA   NOT NULL,
    enabled         BOOLEAN NOT NULL DEFAULT TRUE,
    description     TEXT,
    disabled_reason TEXT,
    created_at      BIGINT  NOT NULL,
    updated_at      BIGINT  NOT NULL,
    CONSTRAINT webhook_subscriptions_pkey PRIMARY KEY (id)
);
CREATE INDEX webhook_subscriptions_api_key_id_id_idx ON webhook_subscriptions (api_key_id, id);
CREATE INDEX webhook_subscriptions_org_id_idx ON webhook_subscriptions (org_id);

-- The durable outbox of customer-facing events; deliveries are created in the same
-- transaction as the event so nothing is lost if a worker or cache is down.
CREATE TABLE events (
    id         UUID   NOT NULL,
    org_id     UUID   NOT NULL REFERENCES organisations (id),
    type       TEXT   NOT NULL,
    payload    JSONB  NOT NULL,
    created_at BIGINT NOT NULL,
    CONSTRAINT events_pkey PRIMARY KEY (id)
);
CREATE INDEX events_org_id_id_idx ON events (org_id, id);

CREATE TABLE webhook_deliveries (
    id               UUID   NOT NULL,
    event_id         UUID   NOT NULL REFERENCES events (id),
    subscription_id  UUID   NOT NULL REFERENCES webhook_subscriptions (id) ON DELETE CASCADE,
    status           TEXT   NOT NULL, -- pending | succeeded | failed
    attempts         BIGINT NOT NULL DEFAULT 0,
    next_attempt_at  BIGINT,
    locked_until     BIGINT,
    lease_owner      TEXT,
    last_status_code BIGINT,
    last_error       TEXT,
    created_at       BIGINT NOT NULL,
    updated_at       BIGINT NOT NULL,
    CONSTRAINT webhook_deliveries_pkey PRIMARY KEY (id),
    CONSTRAINT webhook_deliveries_event_id_subscription_id_key UNIQUE (event_id, subscription_id)
);
CREATE INDEX webhook_deliveries_subscription_id_id_idx ON webhook_deliveries (subscription_id, id);
CREATE INDEX webhook_deliveries_due_idx ON webhook_deliveries (next_attempt_at) WHERE next_attempt_at IS NOT NULL;

CREATE TABLE webhook_attempts (
    id              UUID   NOT NULL,
    delivery_id     UUID   NOT NULL REFERENCES webhook_deliveries (id) ON DELETE CASCADE,
    subscription_id UUID   NOT NULL, -- denormalised so attempts list per subscription cheaply
    attempted_at    BIGINT NOT NULL,
    status_code     BIGINT,
    error           TEXT,
    duration_ms     BIGINT NOT NULL,
    CONSTRAINT webhook_attempts_pkey PRIMARY KEY (id)
);
CREATE INDEX webhook_attempts_delivery_id_idx ON webhook_attempts (delivery_id, attempted_at);
CREATE INDEX webhook_attempts_subscription_id_id_idx ON webhook_attempts (subscription_id, id);

CREATE TABLE campaign_recipients (
    campaign_id  UUID   NOT NULL REFERENCES campaigns (id) ON DELETE CASCADE,
    contact_id   UUID   NOT NULL REFERENCES contacts (id),
    message_id   UUID,
    status       TEXT   NOT NULL, -- pending | queued | skipped | sent | failed ...
    locked_until BIGINT,
    created_at   BIGINT NOT NULL,
    updated_at   BIGINT NOT NULL,
    CONSTRAINT campaign_recipients_pkey PRIMARY KEY (campaign_id, contact_id)
);
CREATE INDEX campaign_recipients_campaign_id_status_idx ON campaign_recipients (campaign_id, status, contact_id);

-- Raw signed batches from the network webhook, stored before answering 200.
CREATE TABLE network_inbox (
    id           UUID   NOT NULL,
    received_at  BIGINT NOT NULL,
    signature    TEXT,
    body         BYTEA  NOT NULL,
    processed_at BIGINT,
    attempts     BIGINT NOT NULL DEFAULT 0,
    locked_until BIGINT,
    error        TEXT,
    CONSTRAINT network_inbox_pkey PRIMARY KEY (id)
);
CREATE INDEX network_inbox_pending_idx ON network_inbox (received_at) WHERE processed_at IS NULL;

CREATE TABLE usage_counters (
    org_id       UUID   NOT NULL REFERENCES organisations (id),
    meter        TEXT   NOT NULL, -- api_requests | messages_sent
    period_start BIGINT NOT NULL,
    count        BIGINT NOT NULL DEFAULT 0,
    CONSTRAINT usage_counters_pkey PRIMARY KEY (org_id, meter, period_start)
);

CREATE TABLE wallet_ledger (
    id           UUID   NOT NULL,
    org_id       UUID   NOT NULL REFERENCES organisations (id),
    amount_minor BIGINT NOT NULL, -- negative = debit
    reason       TEXT   NOT NULL, -- top_up | message_debit | message_refund | adjustment
    message_id   UUID,
    created_at   BIGINT NOT NULL,
    CONSTRAINT wallet_ledger_pkey PRIMARY KEY (id)
);
CREATE INDEX wallet_ledger_org_id_id_idx ON wallet_ledger (org_id, id);
-- A message is debited once and refunded once, even if a worker retries.
CREATE UNIQUE INDEX wallet_ledger_message_id_reason_key ON wallet_ledger (message_id, reason)
    WHERE message_id IS NOT NULL;
