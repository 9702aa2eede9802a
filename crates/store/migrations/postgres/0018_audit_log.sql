-- The audit log (PostgreSQL): who did what to an organisation, when and from where. Must stay
-- column-for-column identical to migrations/sqlite/0018_audit_log.sql.
-- Written by core::audit, in the transaction of the change where the change is one.
-- No foreign keys: an entry outlives what it names (a deleted subscription), and the
-- operator's entries may have no organisation.
CREATE TABLE audit_log (
    id          UUID    NOT NULL,
    org_id      UUID,
    at          BIGINT  NOT NULL,
    actor_kind  TEXT    NOT NULL, -- person | key | operator
    actor_id    TEXT,
    actor_label TEXT    NOT NULL, -- email; key name and prefix; "operator"
    action      TEXT    NOT NULL, -- e.g. key.created (core::audit lists them)
    target_kind TEXT,
    target_id   TEXT,
    detail      TEXT,             -- JSON, never a secret
    address     TEXT,
    CONSTRAINT audit_log_pkey PRIMARY KEY (id)
);
-- An organisation's log, newest first, keyset-paginated.
CREATE INDEX audit_log_org_id_at_id_idx ON audit_log (org_id, at DESC, id DESC);
