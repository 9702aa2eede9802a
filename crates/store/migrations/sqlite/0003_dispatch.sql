-- Dispatch queue state of outbound messages (NULL once the queue is done with a message):
--   queued    : waiting for (another) attempt at next_attempt_at
--   in_flight : claimed by a worker until locked_until; the send call may be under way
--   unknown   : the send call's outcome is unknown; a status webhook settles it, or the
--               message fails at next_attempt_at (the grace deadline)
ALTER TABLE messages ADD COLUMN dispatch_state TEXT;
-- The network's or the adapter's last refusal, kept for operators.
ALTER TABLE messages ADD COLUMN last_error TEXT;
DROP INDEX messages_dispatch_idx;
CREATE INDEX messages_dispatch_idx ON messages (dispatch_state, next_attempt_at)
    WHERE dispatch_state IS NOT NULL;
