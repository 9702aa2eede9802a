-- The app's message explorer (APP.md §4; SQLite). Must stay identical to
-- migrations/postgres/0022_message_explorer.sql.
--
-- The organisation's messages newest first: the unfiltered list and the status, direction,
-- number and time filters (ids are UUID v7, so a time range is an id range). 0006 dropped
-- this index when nothing read it; it is the only index this adds to `messages`, and its
-- columns never change, so status writes stay HOT-eligible.
CREATE INDEX messages_org_id_id_idx ON messages (org_id, id);
-- A customer found by parent BSUID or by username (phone and BSUID have their unique
-- indexes). Partial: most contacts have neither.
CREATE INDEX contacts_org_id_parent_user_id_idx ON contacts (org_id, parent_user_id)
    WHERE parent_user_id IS NOT NULL;
CREATE INDEX contacts_org_id_username_idx ON contacts (org_id, LOWER(username))
    WHERE username IS NOT NULL;
