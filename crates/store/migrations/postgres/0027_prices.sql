-- Prices before and after sending (PostgreSQL). Must stay column-for-column identical to
-- migrations/sqlite/0027_prices.sql.
--
-- The network's pricing object of a message's latest status report that carried one
-- (billable, pricing_model, category, type); NULL until one arrives. Written by the status
-- writer's existing update, never by a statement of its own.
ALTER TABLE messages ADD COLUMN pricing JSONB;
-- What a campaign's recipients not skipped cost at the organisation's price for the
-- template's category, reckoned at resolve (minor units of the wallet's currency; 0 when
-- billing is off; NULL before resolve).
ALTER TABLE campaigns ADD COLUMN estimated_cost_minor BIGINT;
