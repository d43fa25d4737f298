-- Short links, their clicks and the rollups that answer statistics without scanning clicks.
CREATE TABLE links (
    id                     TEXT PRIMARY KEY,
    workspace_id           TEXT NOT NULL REFERENCES workspaces (id) ON DELETE CASCADE,
    -- the short domain (host[:port]) the link answers on
    domain                 TEXT NOT NULL,
    -- the slug as it was given, and lower(slug): slugs are unique per domain regardless of case
    slug                   TEXT NOT NULL,
    slug_key               TEXT NOT NULL,
    destination_url        TEXT NOT NULL,
    title                  TEXT,
    -- JSON array of tags (also in link_tags, for filtering)
    tags                   {{if eq .Dialect "pg"}}JSONB{{else}}TEXT{{end}} NOT NULL,
    external_id            TEXT,
    -- JSON object of UTM parameters ({} when none)
    utm                    {{if eq .Dialect "pg"}}JSONB{{else}}TEXT{{end}} NOT NULL,
    expires_at             TIMESTAMPTZ,
    expired_url            TEXT,
    max_clicks             BIGINT,
    redirect_type          INTEGER NOT NULL,
    forward_query          BOOLEAN NOT NULL,
    metadata               {{if eq .Dialect "pg"}}JSONB{{else}}TEXT{{end}} NOT NULL,
    archived               BOOLEAN NOT NULL,
    -- human and other clicks persisted so far (maintained by the click batches)
    clicks                 BIGINT NOT NULL DEFAULT 0,
    bot_clicks             BIGINT NOT NULL DEFAULT 0,
    -- human clicks admitted against max_clicks at redirect time (only counted for links with max_clicks): the
    -- atomic counter that makes the cap exact under concurrency
    admitted_clicks        BIGINT NOT NULL DEFAULT 0,
    last_clicked_at        TIMESTAMPTZ,
    -- when link.expired and link.max_clicks_reached were emitted (each once; reset when the limit is lifted)
    expired_event_at       TIMESTAMPTZ,
    max_clicks_event_at    TIMESTAMPTZ,
    created_at             TIMESTAMPTZ NOT NULL,
    updated_at             TIMESTAMPTZ NOT NULL
);

--bun:split

CREATE UNIQUE INDEX links_domain_slug ON links (domain, slug_key);

--bun:split

CREATE UNIQUE INDEX links_workspace_external_id ON links (workspace_id, external_id) WHERE external_id IS NOT NULL;

--bun:split

CREATE INDEX links_workspace ON links (workspace_id, id);

--bun:split

-- the expiry notifier looks for links that expired and were not announced yet
CREATE INDEX links_expiring ON links (expires_at) WHERE expires_at IS NOT NULL AND expired_event_at IS NULL;

--bun:split

CREATE TABLE link_tags (
    link_id      TEXT NOT NULL REFERENCES links (id) ON DELETE CASCADE,
    workspace_id TEXT NOT NULL,
    tag          TEXT NOT NULL,
    PRIMARY KEY (link_id, tag)
);

--bun:split

CREATE INDEX link_tags_workspace_tag ON link_tags (workspace_id, tag, link_id);

--bun:split

-- A deleted (or re-slugged) link's slug stays reserved to its workspace until "until", so nobody else can catch
-- the traffic of links already shared.
CREATE TABLE slug_tombstones (
    domain       TEXT NOT NULL,
    slug_key     TEXT NOT NULL,
    workspace_id TEXT NOT NULL,
    until        TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (domain, slug_key)
);

--bun:split

-- One row per recorded visit. No foreign key to links: a link is deleted at once and its clicks are purged in
-- batches in the background (see link_purges), so deleting a link with millions of clicks stays fast.
CREATE TABLE clicks (
    id            TEXT PRIMARY KEY,
    link_id       TEXT NOT NULL,
    workspace_id  TEXT NOT NULL,
    clicked_at    TIMESTAMPTZ NOT NULL,
    -- human | bot | preview | head | monitor
    class         TEXT NOT NULL,
    referrer_host TEXT,
    country       TEXT,
    device        TEXT NOT NULL,
    os            TEXT NOT NULL,
    browser       TEXT NOT NULL,
    user_agent    TEXT NOT NULL,
    -- the visitor's address truncated to its /24 (IPv4) or /48 (IPv6), for abuse handling; never returned by the API
    ip_prefix     TEXT,
    -- hex HMAC of the full address and user agent under the day's salt: unique counts without identifying anyone
    visitor_hash  TEXT
);

--bun:split

CREATE INDEX clicks_link ON clicks (link_id, id);

--bun:split

-- Clicks per link and UTC hour: statistics read these, never the clicks.
CREATE TABLE click_rollups (
    link_id       TEXT NOT NULL,
    bucket        TIMESTAMPTZ NOT NULL,
    humans        BIGINT NOT NULL,
    bots          BIGINT NOT NULL,
    -- human visitors whose first click of their (UTC) day fell in this hour
    unique_humans BIGINT NOT NULL,
    PRIMARY KEY (link_id, bucket)
);

--bun:split

-- Clicks per link, UTC hour, dimension (countries, referrers, devices, browsers, operating_systems) and value.
CREATE TABLE click_dimension_rollups (
    link_id   TEXT NOT NULL,
    dimension TEXT NOT NULL,
    bucket    TIMESTAMPTZ NOT NULL,
    value     TEXT NOT NULL,
    humans    BIGINT NOT NULL,
    bots      BIGINT NOT NULL,
    PRIMARY KEY (link_id, dimension, bucket, value)
);

--bun:split

-- The visitors seen per link and day (their hash already includes the day's salt); rows older than two days are
-- pruned with the salts.
CREATE TABLE click_visitors (
    link_id      TEXT NOT NULL,
    day          TEXT NOT NULL,
    visitor_hash TEXT NOT NULL,
    PRIMARY KEY (link_id, visitor_hash)
);

--bun:split

CREATE INDEX click_visitors_day ON click_visitors (day);

--bun:split

-- The random salt of each UTC day; deleted after two days, so old visitor hashes can never be recomputed.
CREATE TABLE click_salts (
    day  TEXT PRIMARY KEY,
    salt TEXT NOT NULL
);

--bun:split

-- Links deleted whose clicks and rollups are still being purged in the background.
CREATE TABLE link_purges (
    link_id    TEXT PRIMARY KEY,
    deleted_at TIMESTAMPTZ NOT NULL
);
