-- Keys for pages: a key may list the origins whose pages may use it, and a key may be a browser key ("sb_pk_…"),
-- whose secret may be public: it holds one browser scope (scopes), aimed at one target where the scope needs one
-- (the custom event type it publishes, the instance it sends into), with a daily quota of links where it creates
-- them. Existing keys are secret keys with no origins of their own.
ALTER TABLE api_keys ADD COLUMN kind TEXT NOT NULL DEFAULT 'secret';

--bun:split

ALTER TABLE api_keys ADD COLUMN origins {{if eq .Dialect "pg"}}JSONB{{else}}TEXT{{end}} NOT NULL DEFAULT '[]';

--bun:split

ALTER TABLE api_keys ADD COLUMN scope_target TEXT NOT NULL DEFAULT '';

--bun:split

ALTER TABLE api_keys ADD COLUMN daily_quota INTEGER NOT NULL DEFAULT 0;
