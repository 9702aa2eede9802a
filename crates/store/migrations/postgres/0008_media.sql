-- The media capability (PostgreSQL). Must stay column-for-column identical to
-- migrations/sqlite/0008_media.sql.
--
-- The `media` table of 0001 was a placeholder that no code ever wrote (sends with media were
-- refused until this capability), so it is replaced rather than altered.
DROP TABLE media;

-- A file an organisation uploaded, imported from a URL, or received from a customer. The
-- bytes live in blob storage under object_key; several rows may share one key (the same
-- bytes uploaded twice by one organisation are stored once), so a blob is deleted only when
-- the last row that names it is.
CREATE TABLE media (
    id         UUID    NOT NULL,
    org_id     UUID    NOT NULL REFERENCES organisations (id),
    sha256     TEXT    NOT NULL, -- lowercase hex of the bytes
    mime_type  TEXT    NOT NULL,
    size_bytes BIGINT  NOT NULL,
    filename   TEXT,
    object_key TEXT    NOT NULL,
    animated   BOOLEAN NOT NULL DEFAULT FALSE, -- an animated WebP sticker
    source     TEXT    NOT NULL, -- upload | import | inbound
    created_at BIGINT  NOT NULL,
    expires_at BIGINT  NOT NULL,
    CONSTRAINT media_pkey PRIMARY KEY (id)
);
-- Deduplication of uploads: a live row of the organisation with the same bytes.
CREATE INDEX media_org_id_sha256_idx ON media (org_id, sha256);
-- The sweeper deletes expired rows, earliest first.
CREATE INDEX media_expires_at_idx ON media (expires_at);
-- Whether a blob is still referenced after a row is deleted.
CREATE INDEX media_object_key_idx ON media (object_key);

-- The network's media id of a Tern media for one sending number (the network scopes media
-- ids to the number that uploaded them, and forgets them after a while: expires_at).
CREATE TABLE media_network (
    media_id         UUID   NOT NULL REFERENCES media (id) ON DELETE CASCADE,
    phone_number_id  TEXT   COLLATE "C" NOT NULL,
    network_media_id TEXT   NOT NULL,
    expires_at       BIGINT NOT NULL,
    CONSTRAINT media_network_pkey PRIMARY KEY (media_id, phone_number_id)
);

-- At most N URL imports per organisation at once, across every process sharing the
-- database: an import holds one of the slots 0..N until it releases it or its lease ends.
CREATE TABLE media_import_slots (
    org_id      UUID   NOT NULL REFERENCES organisations (id),
    slot        BIGINT NOT NULL,
    holder      TEXT   NOT NULL,
    lease_until BIGINT NOT NULL,
    CONSTRAINT media_import_slots_pkey PRIMARY KEY (org_id, slot)
);

-- Downloads of media that customers sent: a job queue. A job is open until done_at or
-- failed_at is set; an open job is due at next_attempt_at (a claim moves it to the end of
-- its lease, so a crashed worker's job comes back then).
CREATE TABLE inbound_media (
    org_id           UUID   NOT NULL REFERENCES organisations (id),
    wamid            TEXT   NOT NULL, -- the inbound message's network id
    phone_number_id  TEXT   COLLATE "C" NOT NULL, -- whose token downloads it
    network_media_id TEXT   NOT NULL,
    mime_type        TEXT,
    sha256           TEXT, -- as the network gave it (may be base64)
    filename         TEXT,
    created_at       BIGINT NOT NULL,
    attempts         BIGINT NOT NULL DEFAULT 0,
    next_attempt_at  BIGINT NOT NULL,
    locked_until     BIGINT,
    lease_owner      TEXT,
    last_error       TEXT,
    media_id         UUID, -- no FK: media rows expire before the job's record does
    done_at          BIGINT,
    failed_at        BIGINT,
    CONSTRAINT inbound_media_pkey PRIMARY KEY (org_id, wamid)
);
-- Due jobs, earliest first, and the earliest due time; only open jobs are indexed.
CREATE INDEX inbound_media_due_idx ON inbound_media (next_attempt_at, org_id, wamid)
    WHERE done_at IS NULL AND failed_at IS NULL;
