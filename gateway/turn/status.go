package turn

import (
	"context"

	"github.com/irisgate/irisgate/core"
)

// Status says whether a turn runs in lk and how many wait.
func (r *Runner) Status(lk core.Lane) (running bool, queued int) {
	r.mu.Lock()
	l := r.lanes[lk]
	if r.fl == nil || (l != nil && l.leased) {
		defer r.mu.Unlock()
		if l != nil {
			return l.running != nil, len(l.pending)
		}
		return false, 0
	}
	r.mu.Unlock()
	// A replica that does not hold the lane knows its queue from the
	// store: the holder runs it elsewhere.
	ctx, cancel := context.WithTimeout(r.ctx, r.fl.leaseWait())
	defer cancel()
	owed, err := r.fl.Store.Turns(ctx)
	if err != nil {
		r.log.Warn("turn: reading a lane's queue", "lane", lk.String(), "err", err)
		return false, 0
	}
	for _, q := range owed {
		switch {
		case q.Lane != lk:
		case q.Running:
			running = true
		case q.CronJob == "":
			queued++
		}
	}
	return running, queued
}
