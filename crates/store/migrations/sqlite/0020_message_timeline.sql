-- A message's whole story (SQLite; APP.md §4). Must stay column-for-column identical to
-- migrations/postgres/0020_message_timeline.sql.
--
-- Who accepted an outbound message, written by the acceptance's own insert (the `accepted`
-- entry is read from the message row, not stored twice). NULL for campaign and inbound
-- messages, and for messages accepted before this migration.
ALTER TABLE messages ADD COLUMN api_key_id BLOB;
ALTER TABLE messages ADD COLUMN request_id TEXT;
ALTER TABLE messages ADD COLUMN idempotency_key TEXT;
-- The message an event is about (message.status / received / updated), so a delivery
-- attempt of it is written into that message's timeline. NULL for other events.
ALTER TABLE events ADD COLUMN message_id BLOB;

-- The entries written where the thing happened, in that change's transaction. `data` is
-- the entry's JSON (kind included) as the API shows it, TEXT on both backends. `id` is a
-- UUID v7 taken when the entry was made: entries of one millisecond keep their order.
-- No foreign key and no org_id: every read starts from the organisation's message, and
-- entries are kept as long as the message.
CREATE TABLE message_timeline (
    message_id BLOB    NOT NULL,
    at         INTEGER NOT NULL,
    id         BLOB    NOT NULL,
    kind       TEXT    NOT NULL,
    data       TEXT    NOT NULL,
    CONSTRAINT message_timeline_pkey PRIMARY KEY (message_id, at, id)
) WITHOUT ROWID; -- one B-tree (the key's) instead of a rowid table beside an index
