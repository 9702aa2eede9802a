-- Items of the network's webhook batches that could not be applied after the batch's
-- retries: kept here (the item as received, as bytes, so whatever the database refused can
-- still be kept) while the rest of their batch was applied. Never pruned.
CREATE TABLE network_inbox_set_aside (
    inbox_id   UUID   NOT NULL,
    item_key   TEXT   NOT NULL, -- the item within its batch: a wamid, wamid:status, …
    kind       TEXT   NOT NULL, -- message | status | identity | template_status | template_category
    item       BYTEA  NOT NULL,
    error      TEXT   NOT NULL,
    attempts   BIGINT NOT NULL,
    created_at BIGINT NOT NULL,
    CONSTRAINT network_inbox_set_aside_pkey PRIMARY KEY (inbox_id, kind, item_key)
);
