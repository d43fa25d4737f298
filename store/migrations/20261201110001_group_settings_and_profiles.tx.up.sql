-- Who may send and who may edit a group's info ('all' or 'admins'; NULL: the network has not said), and the group's
-- picture as last fetched or set, kept like a contact's (media file, the network's ID of it, when it was asked).
ALTER TABLE chat_groups ADD COLUMN settings_send TEXT;

--bun:split

ALTER TABLE chat_groups ADD COLUMN settings_edit_info TEXT;

--bun:split

ALTER TABLE chat_groups ADD COLUMN picture_media_id TEXT;

--bun:split

ALTER TABLE chat_groups ADD COLUMN picture_id TEXT;

--bun:split

ALTER TABLE chat_groups ADD COLUMN picture_fetched_at TIMESTAMPTZ;

--bun:split

-- The instance's own profile picture as last read from the network: the media file and the network's ID of it, so an
-- unchanged picture is not stored again on every read of the profile.
ALTER TABLE instances ADD COLUMN profile_picture_media_id TEXT;

--bun:split

ALTER TABLE instances ADD COLUMN profile_picture_id TEXT;

--bun:split

-- The sandbox network's group settings (its groups so far let only admins edit their info, and everyone send) and
-- pictures, and its accounts' about text and pictures: images kept base64-encoded with their media type, so the
-- column is plain text on both databases.
ALTER TABLE sandbox_groups ADD COLUMN admins_only_send BOOLEAN NOT NULL DEFAULT FALSE;

--bun:split

ALTER TABLE sandbox_groups ADD COLUMN admins_only_edit BOOLEAN NOT NULL DEFAULT TRUE;

--bun:split

ALTER TABLE sandbox_groups ADD COLUMN picture TEXT;

--bun:split

ALTER TABLE sandbox_groups ADD COLUMN picture_type TEXT;

--bun:split

ALTER TABLE sandbox_accounts ADD COLUMN about TEXT;

--bun:split

ALTER TABLE sandbox_accounts ADD COLUMN picture TEXT;

--bun:split

ALTER TABLE sandbox_accounts ADD COLUMN picture_type TEXT;
