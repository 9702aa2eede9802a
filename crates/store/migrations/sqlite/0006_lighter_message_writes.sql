-- As PostgreSQL's 0006, less the foreign keys: SQLite keeps those (dropping one means
-- rebuilding the table, and its checks are in-process index probes that cost little).
-- Indexes no query uses: a message or conversation is read by its primary key (with
-- org_id as a filter), conversations are listed by the activity index, and the unique
-- (contact_id, phone_number_id) index serves lookups by contact.
DROP INDEX messages_org_id_id_idx;
DROP INDEX conversations_org_id_id_idx;
DROP INDEX conversations_contact_id_idx;
