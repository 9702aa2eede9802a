-- Campaigns (issue 16). Must stay column-for-column identical to
-- migrations/postgres/0013_campaigns.sql. The tables of 0001 held nothing until now.
-- `variables` holds the template's parameters: {"variables": [...]} or {"components": [...]}.
ALTER TABLE campaigns ADD COLUMN expires_at INTEGER;
ALTER TABLE campaigns ADD COLUMN recipient_count INTEGER;
ALTER TABLE campaigns ADD COLUMN pause_reason TEXT;
ALTER TABLE campaigns ADD COLUMN resolved_at INTEGER;
ALTER TABLE campaigns ADD COLUMN paused_at INTEGER;
ALTER TABLE campaigns ADD COLUMN lease_owner TEXT;
-- The campaign worker's work list: scheduled and running campaigns only.
CREATE INDEX campaigns_active_idx ON campaigns (status, scheduled_at)
    WHERE status IN ('scheduled', 'running');
CREATE INDEX campaigns_org_id_status_id_idx ON campaigns (org_id, status, id);

-- A recipient without a message is `pending`, `skipped` (with `reason`) or `expired`;
-- `messaged` once its one message exists (message_id). `variables`: the values filled in
-- for it at resolve (a JSON array of strings), NULL when the template takes none.
ALTER TABLE campaign_recipients ADD COLUMN reason TEXT;
ALTER TABLE campaign_recipients ADD COLUMN variables TEXT;

-- Progress counters, one row per (campaign, shard) so concurrent status writers of one
-- campaign do not queue on a single row; a recipient counts in the bucket of its message's
-- status (accepted / sending = queued). Sums over the shards give the progress.
CREATE TABLE campaign_counters (
    campaign_id BLOB   NOT NULL REFERENCES campaigns (id) ON DELETE CASCADE,
    shard       INTEGER NOT NULL,
    pending     INTEGER NOT NULL DEFAULT 0,
    queued      INTEGER NOT NULL DEFAULT 0,
    sent        INTEGER NOT NULL DEFAULT 0,
    delivered   INTEGER NOT NULL DEFAULT 0,
    read        INTEGER NOT NULL DEFAULT 0,
    failed      INTEGER NOT NULL DEFAULT 0,
    skipped     INTEGER NOT NULL DEFAULT 0,
    expired     INTEGER NOT NULL DEFAULT 0,
    CONSTRAINT campaign_counters_pkey PRIMARY KEY (campaign_id, shard)
);

-- Counts of skip reasons (kind 'skipped') and failure codes (kind 'failed').
CREATE TABLE campaign_reasons (
    campaign_id BLOB   NOT NULL REFERENCES campaigns (id) ON DELETE CASCADE,
    kind        TEXT   NOT NULL,
    reason      TEXT   NOT NULL,
    n           INTEGER NOT NULL DEFAULT 0,
    CONSTRAINT campaign_reasons_pkey PRIMARY KEY (campaign_id, kind, reason)
);

-- A campaign's messages newest first (the error threshold's last outcomes).
DROP INDEX messages_campaign_id_idx;
CREATE INDEX messages_campaign_id_id_idx ON messages (campaign_id, id) WHERE campaign_id IS NOT NULL;

-- The priority lane: per number, API sends (campaign_id NULL) are claimed before a
-- campaign's, then by due time.
DROP INDEX messages_dispatch_number_idx;
CREATE INDEX messages_dispatch_number_idx
    ON messages (phone_number_id, (campaign_id IS NOT NULL), next_attempt_at, id)
    WHERE dispatch_state = 'queued';
