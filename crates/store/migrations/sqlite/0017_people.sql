-- People (the app's accounts), their one-time links, recovery codes and app sessions
-- (APP.md §2). Must stay column-for-column identical to postgres/0017_people.sql.
-- A person's memberships are the `members` rows with the same (lower-cased) email.

CREATE TABLE people (
    id               BLOB    NOT NULL,
    email            TEXT    NOT NULL, -- lower-cased: unique across the installation
    name             TEXT    NOT NULL DEFAULT '',
    password_hash    TEXT,             -- argon2id PHC string; NULL until set through a link
    totp_secret_enc  BLOB,             -- sealed with the master key (Purpose::TotpSecret)
    totp_pending_enc BLOB,             -- during enrolment, until a first code confirms it
    totp_enabled_at  INTEGER,
    totp_last_step   INTEGER,          -- replay guard: only a later step is accepted
    failures         INTEGER NOT NULL DEFAULT 0,
    first_failure_at INTEGER,
    locked_until     INTEGER,
    lockouts         INTEGER NOT NULL DEFAULT 0,
    created_at       INTEGER NOT NULL,
    updated_at       INTEGER NOT NULL,
    CONSTRAINT people_pkey PRIMARY KEY (id),
    CONSTRAINT people_email_key UNIQUE (email)
);

-- Everyone who is already a member becomes a person (without a password: an operator's
-- `tern admin member reset` gives them a link).
INSERT INTO people (id, email, created_at, updated_at)
SELECT randomblob(16), email, MIN(created_at), MIN(created_at) FROM members GROUP BY email;

ALTER TABLE organisations ADD COLUMN two_factor_required BOOLEAN NOT NULL DEFAULT FALSE;

-- A removed member keeps its row (its API keys reference it); removed rows give no rights.
ALTER TABLE members ADD COLUMN removed_at INTEGER;

CREATE TABLE person_links (
    token_hash BLOB    NOT NULL, -- SHA-256 of the link's token
    person_id  BLOB    NOT NULL REFERENCES people (id),
    purpose    TEXT    NOT NULL, -- invite | reset | sign_in
    org_id     BLOB    REFERENCES organisations (id),
    created_at INTEGER NOT NULL,
    expires_at INTEGER NOT NULL,
    used_at    INTEGER,
    CONSTRAINT person_links_pkey PRIMARY KEY (token_hash)
);
CREATE INDEX person_links_person_id_idx ON person_links (person_id);

CREATE TABLE recovery_codes (
    person_id BLOB    NOT NULL REFERENCES people (id),
    code_hash BLOB    NOT NULL,
    used_at   INTEGER,
    CONSTRAINT recovery_codes_pkey PRIMARY KEY (person_id, code_hash)
);

CREATE TABLE app_sessions (
    id           BLOB    NOT NULL,
    token_hash   BLOB    NOT NULL, -- SHA-256 of the cookie's token
    person_id    BLOB    NOT NULL REFERENCES people (id),
    org_id       BLOB    REFERENCES organisations (id), -- the organisation being looked at
    created_at   INTEGER NOT NULL,
    last_seen_at INTEGER NOT NULL,
    confirmed_at INTEGER,
    address      TEXT,
    user_agent   TEXT,
    ended_at     INTEGER,
    end_reason   TEXT,
    CONSTRAINT app_sessions_pkey PRIMARY KEY (id),
    CONSTRAINT app_sessions_token_hash_key UNIQUE (token_hash)
);
CREATE INDEX app_sessions_person_id_idx ON app_sessions (person_id);
