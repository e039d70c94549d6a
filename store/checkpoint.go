package store

import (
	"context"
	"database/sql"
	"sync/atomic"
	"time"
)

// SQLite copies the WAL back into the database file (a checkpoint) when
// the WAL passes wal_autocheckpoint pages, and by default the connection
// whose commit crossed the line does it, inside that commit: one send in
// every few thousand waited tens of milliseconds for a checkpoint and its
// fsync (the stalls of issue 17's paced bench). The checkpoints run here
// instead, on a connection of their own beside the writer, in PASSIVE
// mode: they copy what they can without taking the write lock, so commits
// go on while they run. The writer keeps an automatic checkpoint only as a
// backstop far above what these leave (autoCheckpointPages).

const (
	// checkpointEvery spaces the checkpoints while commits go on.
	checkpointEvery = 200 * time.Millisecond
	// autoCheckpointPages is the writer's own threshold (64 MiB of 4 KiB
	// pages): reached only if the checkpointer falls that far behind.
	autoCheckpointPages = 16384
	// restartFrames is the WAL's length (frames of a page) past which the
	// writer finishes a checkpoint so that the WAL starts over
	// (finishCheckpoint).
	restartFrames = 2048
)

type checkpointer struct {
	db     *sql.DB
	finish atomic.Bool // the WAL is long: the writer finishes a checkpoint
	kick   chan struct{}
	stop   chan struct{}
	done   chan struct{}
}

func (s *Store) startCheckpointer(dsn string) error {
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return err
	}
	db.SetMaxOpenConns(1)
	db.SetConnMaxLifetime(0)
	c := &s.ck
	c.db = db
	c.kick = make(chan struct{}, 1)
	c.stop, c.done = make(chan struct{}), make(chan struct{})
	go s.checkpointLoop()
	return nil
}

// committed tells the checkpointer the WAL grew; it never blocks.
func (c *checkpointer) committed() {
	if c.kick == nil {
		return
	}
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

func (s *Store) checkpointLoop() {
	c := &s.ck
	defer close(c.done)
	t := time.NewTimer(checkpointEvery)
	defer t.Stop()
	for {
		select {
		case <-c.stop:
			return
		case <-c.kick:
		}
		// At most one checkpoint per checkpointEvery: the commits of that
		// time are copied together.
		t.Reset(checkpointEvery)
		select {
		case <-c.stop:
			return
		case <-t.C:
		}
		s.checkpoint()
	}
}

// checkpoint copies what it can of the WAL without holding the writer
// off, and has the writer finish the job once the WAL is long.
func (s *Store) checkpoint() {
	c := &s.ck
	var busy, logged, copied int
	err := c.db.QueryRow("PRAGMA wal_checkpoint(PASSIVE)").Scan(&busy, &logged, &copied)
	if err != nil {
		s.log.Warn("store: checkpointing the WAL (the writer's own checkpoint is the backstop)", "err", err)
	} else if logged >= restartFrames {
		c.finish.Store(true)
	}
}

// finishCheckpoint runs on the writer's connection before a transaction,
// once the WAL is long: under steady commits a checkpoint beside the
// writer never catches up with it, and SQLite starts the WAL over only
// when all of it was copied. The writer copies the frames committed since
// the last checkpoint here (a few: the bulk was copied beside it), and the
// transaction it then begins starts the WAL over.
func (s *Store) finishCheckpoint(ctx context.Context) {
	if !s.ck.finish.CompareAndSwap(true, false) {
		return
	}
	if _, err := s.w.ExecContext(ctx, "PRAGMA wal_checkpoint(PASSIVE)"); err != nil {
		s.log.Warn("store: checkpointing the WAL", "err", err)
	}
}

// stopCheckpointer stops the loop and closes its connection. The last
// connection to close checkpoints what is left, as SQLite does.
func (s *Store) stopCheckpointer() error {
	s.stopCheckpointLoop()
	c := &s.ck
	if c.db == nil {
		return nil
	}
	err := c.db.Close()
	c.db = nil
	return err
}

func (s *Store) stopCheckpointLoop() {
	c := &s.ck
	if c.stop == nil {
		return
	}
	close(c.stop)
	<-c.done
	c.stop = nil
}
