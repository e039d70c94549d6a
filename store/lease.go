package store

import "github.com/irisgate/irisgate/core"

// LaneLease is what a replica learns when it takes (or keeps) a lane's
// lease (issue 18: several gateways on one PostgreSQL database). The lease
// says which replica runs the lane's turns; the turns table stays the
// lane's queue, across replicas, so taking the lease and reading the queue
// is one statement (postgres.Store.TakeLane).
type LaneLease struct {
	// Held is false when another replica holds a live lease: this one
	// only queues.
	Held bool
	// Stops counts the stops asked for the lane through other replicas
	// (StopLane) since the lease row was made: the holder stops its
	// running turn when it grows.
	Stops int64
	// TakenOver is true when the lease was taken from another replica
	// whose lease had expired (it died, or lost the database).
	TakenOver bool
	// Turns is the lane's queue, oldest first (only when Held). A Running
	// one was cut off on the replica that held the lane before.
	Turns []QueuedTurn
}

// HeldLane is a lease a replica still holds after renewing its leases,
// with the stops asked for the lane so far (LaneLease.Stops).
type HeldLane struct {
	Lane  core.Lane
	Stops int64
}
