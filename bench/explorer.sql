-- The message explorer's data set (bench/explorer.sh), straight into PostgreSQL: :messages
-- messages (default 1,000,000) over :contacts contacts (default 50,000) of organisation
-- :'org', on its two numbers :'pn1' and :'pn2', spread over the last 30 days, with ids that
-- are UUID v7 of their time (as Tern makes them).
--   outbound 90 %: read 55 %, delivered 25 %, sent 12 %, failed 8 % (two failure codes);
--   inbound 10 % (received); every 10th message belongs to one completed campaign;
--   every 10th contact also has a BSUID and a username.
-- Deterministic: ids come from md5 of the row number, so two runs build the same set.
\set ON_ERROR_STOP on
BEGIN;
SELECT (extract(epoch FROM now()) * 1000)::bigint AS now_ms \gset

INSERT INTO contacts (id, org_id, wa_id, name, custom_fields, consent_status, created_at, updated_at,
                      user_id, username)
SELECT md5('contact' || c)::uuid, :'org', (14156000000 + c)::text, 'Customer ' || c, '{}', 'unknown',
       :now_ms - 40 * 86400000::bigint, :now_ms - 40 * 86400000::bigint,
       CASE WHEN c % 10 = 0 THEN 'US.' || (100000000000000 + c)::text END,
       CASE WHEN c % 10 = 0 THEN 'user' || c END
FROM generate_series(1, :contacts) AS c;

-- One conversation per contact, on the number of its parity.
INSERT INTO conversations (id, org_id, contact_id, phone_number_id, last_message_at, created_at)
SELECT md5('conv' || c)::uuid, :'org', md5('contact' || c)::uuid,
       CASE WHEN c % 2 = 0 THEN :'pn1' ELSE :'pn2' END, :now_ms, :now_ms - 40 * 86400000::bigint
FROM generate_series(1, :contacts) AS c;

INSERT INTO campaigns (id, org_id, name, status, template_name, template_language, phone_number_id,
                       audience, variables, launched_at, completed_at, recipient_count, resolved_at,
                       created_at, updated_at)
VALUES (md5('campaign')::uuid, :'org', 'Bench campaign', 'completed', 'promo', 'en_US', :'pn1',
        '{"all_contacts": true}', '{}', :now_ms - 30 * 86400000::bigint, :now_ms,
        :messages / 10, :now_ms - 30 * 86400000::bigint, :now_ms - 31 * 86400000::bigint, :now_ms);

INSERT INTO messages (id, org_id, conversation_id, contact_id, phone_number_id, direction, type,
                      status, text, wamid, request, campaign_id, created_at, sent_at, delivered_at,
                      read_at, failed_at, failure_code, failure, updated_at)
SELECT (lpad(to_hex(t), 12, '0') || '7' || substr(h, 1, 3) || '8' || substr(h, 4, 15))::uuid,
       :'org', md5('conv' || c)::uuid, md5('contact' || c)::uuid,
       CASE WHEN c % 2 = 0 THEN :'pn1' ELSE :'pn2' END,
       CASE WHEN inbound THEN 'inbound' ELSE 'outbound' END, 'text',
       CASE WHEN inbound THEN 'received' WHEN r < 55 THEN 'read' WHEN r < 80 THEN 'delivered'
            WHEN r < 92 THEN 'sent' ELSE 'failed' END,
       'Bench message ' || i, 'wamid.bench' || i,
       CASE WHEN inbound THEN NULL
            ELSE jsonb_build_object('to', '+' || (14156000000 + c), 'type', 'text',
                                    'text', jsonb_build_object('body', 'Bench message ' || i)) END,
       CASE WHEN i % 10 = 0 AND NOT inbound THEN md5('campaign')::uuid END,
       t,
       CASE WHEN NOT inbound AND r < 92 THEN t + 300 END,
       CASE WHEN NOT inbound AND r < 80 THEN t + 900 END,
       CASE WHEN NOT inbound AND r < 55 THEN t + 60000 END,
       CASE WHEN NOT inbound AND r >= 92 THEN t + 400 END,
       CASE WHEN inbound OR r < 92 THEN NULL WHEN r < 97 THEN 'recipient_unreachable' ELSE 'template_paused' END,
       CASE WHEN inbound OR r < 92 THEN NULL
            ELSE jsonb_build_object('code', CASE WHEN r < 97 THEN 'recipient_unreachable' ELSE 'template_paused' END,
                                    'message', 'Bench failure') END,
       t + 60000
FROM (
  SELECT i, c, h, inbound, r,
         :now_ms - ((:messages - i)::bigint * 2592000000 / :messages) AS t
  FROM (
    SELECT i, (i % :contacts) + 1 AS c, md5(i::text) AS h, i % 10 = 5 AS inbound,
           abs(('x' || substr(md5('r' || i), 1, 8))::bit(32)::int % 100) AS r
    FROM generate_series(1, :messages) AS i
  ) g
) s;
COMMIT;
ANALYZE contacts;
ANALYZE conversations;
ANALYZE messages;
