-- Contacts, conversations, templates and network-inbox access paths (PostgreSQL).
-- Must stay column-for-column identical to migrations/sqlite/0002_contacts_templates_inbox.sql.

-- Inbound network events already handled (e.g. a wamid + status), so network retries and
-- duplicate deliveries are applied once. Pruned by age.
CREATE TABLE network_event_keys (
    key        TEXT   NOT NULL,
    created_at BIGINT NOT NULL,
    CONSTRAINT network_event_keys_pkey PRIMARY KEY (key)
);
CREATE INDEX network_event_keys_created_at_idx ON network_event_keys (created_at);

-- GET /contacts (plain and search): newest first, keyset (created_at, id).
CREATE INDEX contacts_org_id_created_at_id_idx ON contacts (org_id, created_at, id);

-- GET /conversations: newest activity first, keyset (COALESCE(last_message_at, created_at), id).
CREATE INDEX conversations_org_id_activity_id_idx
    ON conversations (org_id, (COALESCE(last_message_at, created_at)), id);
CREATE INDEX conversations_contact_id_idx ON conversations (contact_id);

-- GET /templates: newest first, keyset (created_at, id).
CREATE INDEX templates_org_id_created_at_id_idx ON templates (org_id, created_at, id);
-- Template status webhooks without a known network id match by WABA + name (+ language).
CREATE INDEX templates_waba_id_name_language_idx ON templates (waba_id, name, language);
