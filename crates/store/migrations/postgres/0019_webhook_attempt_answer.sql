-- The first 1 KiB of a receiver's answer to a delivery attempt (PostgreSQL), shown in the
-- app's delivery log (APP.md §3). Must stay column-for-column identical to
-- migrations/sqlite/0019_webhook_attempt_answer.sql. NULL when no answer came (or before
-- this migration).
ALTER TABLE webhook_attempts ADD COLUMN response_body TEXT;
