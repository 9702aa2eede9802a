-- Columns that hold a phone_number_id use the same collation as phone_numbers.id (C). With
-- different collations a join such as `m.phone_number_id = p.id` compares under C and
-- cannot use the default-collation indexes on the referencing side: the dispatcher's
-- "which numbers have due messages" scanned the whole backlog on every round.
ALTER TABLE conversations ALTER COLUMN phone_number_id TYPE TEXT COLLATE "C";
ALTER TABLE messages ALTER COLUMN phone_number_id TYPE TEXT COLLATE "C";
ALTER TABLE campaigns ALTER COLUMN phone_number_id TYPE TEXT COLLATE "C";
ALTER TABLE media ALTER COLUMN phone_number_id TYPE TEXT COLLATE "C";

-- Claims take the earliest due messages by (next_attempt_at, id): with id in the indexes
-- that order comes straight from an index scan instead of a sort of the whole backlog.
DROP INDEX messages_dispatch_idx;
CREATE INDEX messages_dispatch_idx ON messages (dispatch_state, next_attempt_at, id)
    WHERE dispatch_state IS NOT NULL;
DROP INDEX messages_dispatch_number_idx;
CREATE INDEX messages_dispatch_number_idx ON messages (phone_number_id, next_attempt_at, id)
    WHERE dispatch_state = 'queued';
