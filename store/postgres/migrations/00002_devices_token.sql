-- Each device's token (package store's devicesTokenSchema): revoking a
-- stored token ends the push registrations of the devices that last said
-- hello with it.

-- +goose Up
ALTER TABLE devices ADD COLUMN token_id text NOT NULL DEFAULT '';
CREATE INDEX devices_token ON devices (token_id) WHERE token_id != '';

