-- Customers known by business-scoped user id (BSUID) and username, possibly without a phone
-- number (2026), and the content of messages.
ALTER TABLE contacts ALTER COLUMN wa_id DROP NOT NULL;
ALTER TABLE contacts ADD COLUMN user_id TEXT;
ALTER TABLE contacts ADD COLUMN parent_user_id TEXT;
ALTER TABLE contacts ADD COLUMN username TEXT;
CREATE UNIQUE INDEX contacts_org_id_user_id_key ON contacts (org_id, user_id)
    WHERE user_id IS NOT NULL;

-- content: the type's object in the network's shape; reply_to: {"message_id","wamid"};
-- referral: the click-to-WhatsApp ad object (inbound).
ALTER TABLE messages ADD COLUMN content JSONB;
ALTER TABLE messages ADD COLUMN reply_to JSONB;
ALTER TABLE messages ADD COLUMN referral JSONB;
ALTER TABLE messages ADD COLUMN edited_at BIGINT;
ALTER TABLE messages ADD COLUMN revoked_at BIGINT;
