-- Replicas (issue 18). lane_leases: which replica runs each lane's turns
-- (the turns table stays the lane's queue); expires is the database's
-- clock, so replicas' clocks never have to agree. A lane whose turns are
-- all run has no row (the holder deletes it). stops counts the stops asked
-- through replicas that do not run the lane's turn.
-- push_queue.claimed_until: a push being sent by one replica (package
-- store's pushClaimSchema).

-- +goose Up
CREATE TABLE lane_leases (
	chat_id   text NOT NULL,
	thread_id text NOT NULL DEFAULT '',
	holder    text NOT NULL,
	expires   timestamptz NOT NULL,
	stops     bigint NOT NULL DEFAULT 0,
	PRIMARY KEY (chat_id, thread_id)
);
CREATE INDEX lane_leases_holder ON lane_leases (holder);
-- When a turn was queued: a lane is taken up by a replica's sweep only
-- once its turns have waited a while, so the replica a message came
-- through (whose device is connected to it) takes the lease first.
ALTER TABLE turns ADD COLUMN queued_at timestamptz NOT NULL DEFAULT clock_timestamp();
ALTER TABLE push_queue ADD COLUMN claimed_until bigint NOT NULL DEFAULT 0;
