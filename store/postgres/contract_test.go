package postgres

import (
	"context"
	"fmt"
	"testing"

	"github.com/irisgate/irisgate/cron"
	"github.com/irisgate/irisgate/gateway"
	"github.com/irisgate/irisgate/media"
	"github.com/irisgate/irisgate/push"
	"github.com/irisgate/irisgate/store/storetest"
)

// The contract's Store is the union of what gateway, cron, push, media and
// the hub ask of a store (their tests assert it covers their interfaces);
// each consumer's seam is asserted here too, as server/app.go does for
// SQLite's, so a method the gateway gains cannot go missing here.
var (
	_ storetest.Store     = (*Store)(nil)
	_ storetest.Corrupter = harness{}
	_ gateway.Store       = (*Store)(nil)
	_ cron.Store          = (*Store)(nil)
	_ push.Store          = (*Store)(nil)
	_ media.Index         = (*Store)(nil)
)

// TestContract runs the contract every store keeps (store/storetest)
// against PostgreSQL, a fresh database for each of its tests: the same
// suite SQLite's store runs.
func TestContract(t *testing.T) {
	storetest.Run(t, func(t *testing.T) storetest.Store { return harness{open(t)} })
}

// harness looks behind the interface, as the suite asks a store's tests to.
type harness struct{ *Store }

// naming is each table's column that names a message.
var naming = map[string]string{"messages": "id", "reads": "message_id", "outbox": "message_id",
	"conversation": "message_id", "turns": "message_id", "media": "message_id"}

func (h harness) Residue(ctx context.Context, messageID string) (map[string]int, error) {
	out := map[string]int{}
	for table, col := range naming {
		var n int
		if err := h.pool.QueryRow(ctx, `SELECT count(*) FROM `+table+` WHERE `+col+` = $1`, messageID).Scan(&n); err != nil {
			return nil, err
		}
		out[table] = n
	}
	return out, nil
}

// CorruptEvent overwrites the frame's body with bytes that are no record,
// as a bad disk or a hand edit would leave it.
func (h harness) CorruptEvent(ctx context.Context, cursor int64) error {
	tag, err := h.pool.Exec(ctx, `UPDATE outbox SET body = $1 WHERE cursor = $2`, []byte(`{"v":1,"type":`), cursor)
	if err == nil && tag.RowsAffected() != 1 {
		err = fmt.Errorf("no frame at cursor %d to damage", cursor)
	}
	return err
}

var _ storetest.Leaser = (*Store)(nil)

// TestLeases runs the lane lease cases against PostgreSQL: replicas share
// its database (SQLite's store serves one gateway and has no leases).
func TestLeases(t *testing.T) {
	storetest.RunLeases(t, func(t *testing.T) storetest.Leaser { return open(t) })
}
