-- A poll message's question, options and each voter's current choice (JSON; NULL for other messages): the votes are
-- few per poll and always read with it, so they live on the message rather than in a table of their own.
ALTER TABLE messages ADD COLUMN poll {{if eq .Dialect "pg"}}JSONB{{else}}TEXT{{end}};
