-- The dispatcher asks "which numbers have due messages" and claims per number; without this
-- index both read the whole backlog.
CREATE INDEX messages_dispatch_number_idx ON messages (phone_number_id, next_attempt_at)
    WHERE dispatch_state = 'queued';
