-- Keys limited to instances: a secret key may list the messaging instances it reaches (empty: every instance of its
-- workspace). Requests for another instance answer as for another workspace's; existing keys reach every instance.
ALTER TABLE api_keys ADD COLUMN instance_ids {{if eq .Dialect "pg"}}JSONB{{else}}TEXT{{end}} NOT NULL DEFAULT '[]';
