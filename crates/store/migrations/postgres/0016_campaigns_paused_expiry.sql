-- The campaign worker also lists paused campaigns whose expires_at passed (their queued
-- messages and pending recipients end `expired`): an index for that branch, so the list
-- stays index scans (with campaigns_active_idx) however many campaigns ended.
CREATE INDEX campaigns_paused_expiry_idx ON campaigns (expires_at) WHERE status = 'paused';
