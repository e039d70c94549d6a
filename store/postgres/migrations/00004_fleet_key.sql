-- The fleet's key (issue 18): replicas sign the messages they exchange
-- through NATS with it (package fleet), so that a NATS peer without access
-- to this database can neither forge nor alter them. One row, made by the
-- first replica that asks (Store.FleetKey); whoever can read this table
-- can speak for the fleet, as whoever can write the database can do
-- anything anyway.

-- +goose Up
CREATE TABLE fleet_key (
	one boolean PRIMARY KEY DEFAULT true CHECK (one),
	key bytea NOT NULL CHECK (octet_length(key) = 32)
);
