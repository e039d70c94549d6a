-- Replicas sharing a media directory (issue 18): a blob's claims count the
-- installs under way of its file (put in place or reused, the rows that
-- will use it not yet committed), on any replica. No replica removes a
-- file whose row has claims, unless the latest claim is older than the
-- grace (Store.ClaimGrace): its replica crashed mid-install. claimed is
-- the database's clock, so replicas' clocks never have to agree.

-- +goose Up
ALTER TABLE blobs ADD COLUMN claims bigint NOT NULL DEFAULT 0;
ALTER TABLE blobs ADD COLUMN claimed timestamptz NOT NULL DEFAULT '-infinity';
