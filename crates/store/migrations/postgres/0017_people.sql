-- People (the app's accounts), their one-time links, recovery codes and app sessions
-- (APP.md §2). Must stay column-for-column identical to sqlite/0017_people.sql.
-- A person's memberships are the `members` rows with the same (lower-cased) email.

CREATE TABLE people (
    id               UUID    NOT NULL,
    email            TEXT    NOT NULL, -- lower-cased: unique across the installation
    name             TEXT    NOT NULL DEFAULT '',
    password_hash    TEXT,             -- argon2id PHC string; NULL until set through a link
    totp_secret_enc  BYTEA,             -- sealed with the master key (Purpose::TotpSecret)
    totp_pending_enc BYTEA,             -- during enrolment, until a first code confirms it
    totp_enabled_at  BIGINT,
    totp_last_step   BIGINT,          -- replay guard: only a later step is accepted
    failures         BIGINT  NOT NULL DEFAULT 0,
    first_failure_at BIGINT,
    locked_until     BIGINT,
    lockouts         BIGINT  NOT NULL DEFAULT 0,
    created_at       BIGINT  NOT NULL,
    updated_at       BIGINT  NOT NULL,
    CONSTRAINT people_pkey PRIMARY KEY (id),
    CONSTRAINT people_email_key UNIQUE (email)
);

-- Everyone who is already a member becomes a person (without a password: an operator's
-- `tern admin member reset` gives them a link).
INSERT INTO people (id, email, created_at, updated_at)
SELECT gen_random_uuid(), email, MIN(created_at), MIN(created_at) FROM members GROUP BY email;

ALTER TABLE organisations ADD COLUMN two_factor_required BOOLEAN NOT NULL DEFAULT FALSE;

-- A removed member keeps its row (its API keys reference it); removed rows give no rights.
ALTER TABLE members ADD COLUMN removed_at BIGINT;

CREATE TABLE person_links (
    token_hash BYTEA   NOT NULL, -- SHA-256 of the link's token
    person_id  UUID    NOT NULL REFERENCES people (id),
    purpose    TEXT    NOT NULL, -- invite | reset | sign_in
    org_id     UUID    REFERENCES organisations (id),
    created_at BIGINT  NOT NULL,
    expires_at BIGINT  NOT NULL,
    used_at    BIGINT,
    CONSTRAINT person_links_pkey PRIMARY KEY (token_hash)
);
CREATE INDEX person_links_person_id_idx ON person_links (person_id);

CREATE TABLE recovery_codes (
    person_id UUID    NOT NULL REFERENCES people (id),
    code_hash BYTEA   NOT NULL,
    used_at   BIGINT,
    CONSTRAINT recovery_codes_pkey PRIMARY KEY (person_id, code_hash)
);

CREATE TABLE app_sessions (
    id           UUID    NOT NULL,
    token_hash   BYTEA   NOT NULL, -- SHA-256 of the cookie's token
    person_id    UUID    NOT NULL REFERENCES people (id),
    org_id       UUID    REFERENCES organisations (id), -- the organisation being looked at
    created_at   BIGINT  NOT NULL,
    last_seen_at BIGINT  NOT NULL,
    confirmed_at BIGINT,
    address      TEXT,
    user_agent   TEXT,
    ended_at     BIGINT,
    end_reason   TEXT,
    CONSTRAINT app_sessions_pkey PRIMARY KEY (id),
    CONSTRAINT app_sessions_token_hash_key UNIQUE (token_hash)
);
CREATE INDEX app_sessions_person_id_idx ON app_sessions (person_id);
