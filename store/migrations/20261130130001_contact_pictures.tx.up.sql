-- A contact's profile picture as last fetched from the network: the media file (NULL: none shared), the network's ID
-- of the picture (a picture that did not change is not stored again) and when the network was asked (NULL: never).
ALTER TABLE contacts ADD COLUMN picture_media_id TEXT;

--bun:split

ALTER TABLE contacts ADD COLUMN picture_id TEXT;

--bun:split

ALTER TABLE contacts ADD COLUMN picture_fetched_at TIMESTAMPTZ;
