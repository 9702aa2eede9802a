-- The units the last add to a counter granted (an add is capped at the allowance): lets one
-- upsert both count and say how much it counted, without a transaction around a read.
ALTER TABLE usage_counters ADD COLUMN last_grant BIGINT NOT NULL DEFAULT 0;
