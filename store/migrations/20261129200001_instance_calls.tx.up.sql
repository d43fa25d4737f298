-- What an instance does with incoming calls (NULL: never set, calls ring on the account's other devices): decline
-- each at once, and the text sent to the caller afterwards (NULL: none).
ALTER TABLE instances ADD COLUMN calls_reject BOOLEAN;

--bun:split

ALTER TABLE instances ADD COLUMN calls_message TEXT;
