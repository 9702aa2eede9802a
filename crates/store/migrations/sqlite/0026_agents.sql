-- Conversations for agents (APP.md §6, issue 32; SQLite). Must stay column-for-column
-- identical to migrations/postgres/0026_agents.sql.
--
-- When the organisation blocked the customer at the network (POST /contacts/{id}/block);
-- NULL when not blocked. A send to a blocked contact is refused, a campaign skips them.
-- The send path reads it with the contact it already reads (no extra statement). An
-- inbound message's read mark needs no column: it is the message's read_at.
ALTER TABLE contacts ADD COLUMN blocked_at INTEGER;
