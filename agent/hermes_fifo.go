package agent

import (
	"slices"

	"github.com/irisgate/irisgate/core"
)

// bareQueue follows the approvals an older Hermes, one that puts no
// request id on them, keeps pending for a run. Hermes queues them per
// session (tools/approval.py, _gateway_queues), and a bare answer resolves
// the oldest. Several are pending at once when tools run in parallel
// (delegate_task's batch runs its children in threads of their own, and
// each may ask), and Hermes's own approval timeout denies one without a
// word on the stream. The bridge shows only the newest request; a bare
// "once" for it while an older one is pending would approve the older
// command, which the person was told was never approved.
//
// A request counts as settled on evidence only: Hermes's approval.responded
// (resolved says how many, oldest first), an answer of irisgate's that
// Hermes took, or every tool that was running when it was asked having
// finished (the tool that asked cannot end while it waits).
type bareQueue struct {
	reqs []*bareReq
	// own is how many resolutions of irisgate's own answers approval.
	// responded is still to announce: those settle nothing more.
	own int
	// overflow counts unsettled requests dropped past maxBare: they are
	// taken as pending for the rest of the run.
	overflow int
}

type bareReq struct {
	a *hermesApproval
	// toolsDone says the tools that were running when it was asked have
	// all finished: it is settled, though whether by an answer elsewhere
	// (whose approval.responded may still come) or by the timeout's
	// denial (which sends none) is not known.
	toolsDone bool
}

// maxBare bounds the requests kept for one run.
const maxBare = 64

func (q *bareQueue) asked(a *hermesApproval) {
	if len(q.reqs) >= maxBare {
		i := slices.IndexFunc(q.reqs, func(r *bareReq) bool { return r.toolsDone })
		if i < 0 {
			i = 0
			q.overflow++
		}
		q.reqs = slices.Delete(q.reqs, i, i+1)
	}
	q.reqs = append(q.reqs, &bareReq{a: a})
}

// olderThan counts the requests before a that may still be pending.
func (q *bareQueue) olderThan(a *hermesApproval) int {
	n := q.overflow
	for _, r := range q.reqs {
		if r.a == a {
			break
		}
		if !r.toolsDone {
			n++
		}
	}
	return n
}

// answered records that Hermes took irisgate's answer to a, the newest
// request, resolving n (0: Hermes did not say; one): every request up to a
// is settled.
func (q *bareQueue) answered(a *hermesApproval, n int) {
	if i := slices.IndexFunc(q.reqs, func(r *bareReq) bool { return r.a == a }); i >= 0 {
		q.reqs = q.reqs[i+1:]
	}
	q.own += max(n, 1)
}

// responded applies an approval.responded of n resolutions (0: one) and
// reports whether any was not irisgate's own answer, which were applied
// already. Each other one
// settles the oldest request, one whose tools finished first: an answer
// elsewhere may be announced only after its tool finished, and taking a
// pending request for it instead would make an answer look safe that is
// not.
func (q *bareQueue) responded(n int) (elsewhere bool) {
	n = max(n, 1)
	mine := min(n, q.own)
	q.own -= mine
	elsewhere = n > mine
	for n -= mine; n > 0 && len(q.reqs) > 0; n-- {
		i := slices.IndexFunc(q.reqs, func(r *bareReq) bool { return r.toolsDone })
		if i < 0 {
			i = 0
		}
		q.reqs = slices.Delete(q.reqs, i, i+1)
	}
	return elsewhere
}

// toolsRunning marks settled the requests none of whose tools still run.
func (q *bareQueue) toolsRunning(running []*core.Tool) {
	for _, r := range q.reqs {
		if r.toolsDone || len(r.a.tools) == 0 {
			continue
		}
		r.toolsDone = !slices.ContainsFunc(running, func(t *core.Tool) bool { return slices.Contains(r.a.tools, t.Index) })
	}
}
