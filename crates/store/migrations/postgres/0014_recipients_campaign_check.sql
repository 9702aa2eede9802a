-- Resolve writes a campaign's whole audience in one transaction (100,000 rows in the
-- benchmark). The foreign key to campaigns cost a trigger call and a row lock check per row:
-- about 460 of the 1,450 ms of such an insert, for nothing, since resolve holds the campaign
-- row locked (FOR UPDATE) while it writes and campaigns are never deleted (their recipients
-- would be kept as the record anyway). The key to contacts stays: an identity merge moves or
-- deletes a contact's rows, and the key guards that race.
ALTER TABLE campaign_recipients DROP CONSTRAINT campaign_recipients_campaign_id_fkey;
