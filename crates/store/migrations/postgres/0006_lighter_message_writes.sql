-- Less work per accepted message (each line was measured on the send path).
--
-- A message's conversation ties it to an existing organisation, contact and number (the
-- conversation's own foreign keys), and Tern always writes a message's org_id, contact_id
-- and phone_number_id from that conversation; nothing is ever deleted from those tables.
-- Checking the three parents again on every insert took a row lock on each and was a fifth
-- of PostgreSQL's work per accepted message. The conversation's check stays. Likewise an
-- idempotency key is only ever bound for the authenticated organisation.
ALTER TABLE messages
    DROP CONSTRAINT messages_org_id_fkey,
    DROP CONSTRAINT messages_contact_id_fkey,
    DROP CONSTRAINT messages_phone_number_id_fkey;
ALTER TABLE idempotency_keys DROP CONSTRAINT idempotency_keys_org_id_fkey;

-- Indexes no query uses: a message or conversation is read by its primary key (with
-- org_id as a filter), conversations are listed by the activity index, and the unique
-- (contact_id, phone_number_id) index serves lookups by contact. Every send inserts a
-- message and moves its conversation's last_message_at, which is in the activity index, so
-- that update cannot be HOT and writes an entry into every index of the table.
DROP INDEX messages_org_id_id_idx;
DROP INDEX conversations_org_id_id_idx;
DROP INDEX conversations_contact_id_idx;
