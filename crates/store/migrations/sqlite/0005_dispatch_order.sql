-- (PostgreSQL also aligns the collation of phone_number_id columns with phone_numbers.id
-- here; SQLite compares TEXT bytewise everywhere already.)
-- Claims take the earliest due messages by (next_attempt_at, id): with id in the indexes
-- that order comes straight from an index scan instead of a sort of the whole backlog.
DROP INDEX messages_dispatch_idx;
CREATE INDEX messages_dispatch_idx ON messages (dispatch_state, next_attempt_at, id)
    WHERE dispatch_state IS NOT NULL;
DROP INDEX messages_dispatch_number_idx;
CREATE INDEX messages_dispatch_number_idx ON messages (phone_number_id, next_attempt_at, id)
    WHERE dispatch_state = 'queued';
