-- Test mode (APP.md §5; SQLite). Must stay in step with
-- migrations/postgres/0023_test_mode.sql.
--
-- An organisation's test space is an organisation row of its own that names its live
-- organisation: everything scoped by organisation (contacts, messages, media, templates,
-- campaigns, subscriptions, events, idempotency keys, usage) is then apart from live data
-- without a mode in every table and query. Plans are shared: the live row's plan,
-- subscription status and overrides are written to its test space with it.
ALTER TABLE organisations ADD COLUMN live_org_id BLOB REFERENCES organisations (id);
CREATE UNIQUE INDEX organisations_live_org_id_key ON organisations (live_org_id)
    WHERE live_org_id IS NOT NULL;
-- Keys stay the live organisation's (people manage them there); a test key reaches the test
-- space.
ALTER TABLE api_keys ADD COLUMN mode TEXT NOT NULL DEFAULT 'live'
    CONSTRAINT api_keys_mode_check CHECK (mode IN ('live', 'test'));
-- A test space's number is answered by the built-in simulator, never the real network.
ALTER TABLE phone_numbers ADD COLUMN mode TEXT NOT NULL DEFAULT 'live'
    CONSTRAINT phone_numbers_mode_check CHECK (mode IN ('live', 'test'));
