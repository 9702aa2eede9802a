-- no-transaction
-- Customers known by business-scoped user id (BSUID) and username, possibly without a phone
-- number (2026), and the content of messages. SQLite cannot drop a NOT NULL constraint in
-- place: the contacts table is rebuilt (SQLite's documented procedure), with foreign keys off
-- so dropping the old table does not cascade to the rows that refer to it.
PRAGMA foreign_keys = OFF;
BEGIN;

CREATE TABLE contacts_new (
    id                 BLOB   NOT NULL,
    org_id             BLOB   NOT NULL REFERENCES organisations (id),
    wa_id              TEXT, -- digits, no '+'; NULL when the network withholds the phone
    name               TEXT,
    custom_fields      TEXT   NOT NULL DEFAULT '{}',
    consent_status     TEXT   NOT NULL DEFAULT 'unknown',
    consent_source     TEXT,
    consent_updated_at INTEGER,
    last_inbound_at    INTEGER,
    created_at         INTEGER NOT NULL,
    updated_at         INTEGER NOT NULL,
    user_id            TEXT, -- BSUID, exactly as the network gives it
    parent_user_id     TEXT,
    username           TEXT,
    CONSTRAINT contacts_pkey PRIMARY KEY (id),
    CONSTRAINT contacts_org_id_wa_id_key UNIQUE (org_id, wa_id)
);
INSERT INTO contacts_new (id, org_id, wa_id, name, custom_fields, consent_status,
    consent_source, consent_updated_at, last_inbound_at, created_at, updated_at)
SELECT id, org_id, wa_id, name, custom_fields, consent_status, consent_source,
    consent_updated_at, last_inbound_at, created_at, updated_at FROM contacts;
DROP TABLE contacts;
ALTER TABLE contacts_new RENAME TO contacts;
CREATE INDEX contacts_org_id_id_idx ON contacts (org_id, id);
CREATE INDEX contacts_org_id_updated_at_id_idx ON contacts (org_id, updated_at, id);
CREATE INDEX contacts_org_id_created_at_id_idx ON contacts (org_id, created_at, id);
CREATE UNIQUE INDEX contacts_org_id_user_id_key ON contacts (org_id, user_id)
    WHERE user_id IS NOT NULL;

-- content: the type's object in the network's shape; reply_to: {"message_id","wamid"};
-- referral: the click-to-WhatsApp ad object (inbound).
ALTER TABLE messages ADD COLUMN content TEXT;
ALTER TABLE messages ADD COLUMN reply_to TEXT;
ALTER TABLE messages ADD COLUMN referral TEXT;
ALTER TABLE messages ADD COLUMN edited_at INTEGER;
ALTER TABLE messages ADD COLUMN revoked_at INTEGER;

PRAGMA foreign_key_check;
COMMIT;
PRAGMA foreign_keys = ON;
