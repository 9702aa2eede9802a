-- As on PostgreSQL: the recipients' foreign key to campaigns goes (resolve writes a whole
-- audience while it holds the campaign, and campaigns are never deleted); the key to
-- contacts stays. SQLite drops a constraint by rebuilding the table.
CREATE TABLE campaign_recipients_new (
    campaign_id  BLOB   NOT NULL,
    contact_id   BLOB   NOT NULL REFERENCES contacts (id),
    message_id   BLOB,
    status       TEXT   NOT NULL,
    locked_until INTEGER,
    created_at   INTEGER NOT NULL,
    updated_at   INTEGER NOT NULL,
    reason       TEXT,
    variables    TEXT,
    CONSTRAINT campaign_recipients_pkey PRIMARY KEY (campaign_id, contact_id)
);
INSERT INTO campaign_recipients_new (campaign_id, contact_id, message_id, status, locked_until,
    created_at, updated_at, reason, variables)
SELECT campaign_id, contact_id, message_id, status, locked_until, created_at, updated_at,
    reason, variables
FROM campaign_recipients;
DROP TABLE campaign_recipients;
ALTER TABLE campaign_recipients_new RENAME TO campaign_recipients;
CREATE INDEX campaign_recipients_campaign_id_status_idx
    ON campaign_recipients (campaign_id, status, contact_id);
