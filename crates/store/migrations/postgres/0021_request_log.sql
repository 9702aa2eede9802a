-- The request log (PostgreSQL): every request to the public API, for the app (APP.md §4). Must
-- stay column-for-column identical to migrations/sqlite/0021_request_log.sql.
-- Written in batches off the request path by core::request_log; kept TERN_REQUEST_LOG_DAYS.
-- Never a request body, never a key value or secret.
-- `id` is the request id (the X-Request-Id answered, a UUID v7): time-ordered, so the
-- primary key also serves the retention's range delete (`id < <a v7 id of the cut-off>`).
-- No foreign keys: an entry outlives its key or message, and a request without a valid key
-- has no organisation (org_id NULL: shown in no organisation's log).
CREATE TABLE request_log (
    id              UUID    NOT NULL,
    org_id          UUID,
    at              BIGINT  NOT NULL,
    method          TEXT    NOT NULL,
    route           TEXT,             -- the template (/messages/{message_id}); NULL: no route
    path            TEXT    NOT NULL, -- below /api/public/v1, without the query
    status          BIGINT  NOT NULL,
    error_code      TEXT,
    key_id          UUID,
    key_name        TEXT,
    key_prefix      TEXT,
    latency_ms      BIGINT  NOT NULL,
    address         TEXT,
    user_agent      TEXT,
    idempotency_key TEXT,
    error_body      TEXT,             -- Tern's own JSON error body of a 4xx/5xx answer
    message_id      UUID,             -- the message a POST /messages accepted (or replayed)
    CONSTRAINT request_log_pkey PRIMARY KEY (id)
);
-- An organisation's log, newest first, keyset-paginated; the filters narrow it.
CREATE INDEX request_log_org_id_at_id_idx ON request_log (org_id, at DESC, id DESC);
