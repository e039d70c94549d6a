package bench

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"

	"github.com/irisgate/irisgate/internal/pgtest"
)

// TestReplicasScenario runs the replicas scenario on a PostgreSQL server
// of its own (durable: PostgreSQL's defaults) and a NATS server in this
// process, at quick sizes unless IRISGATE_BENCH_FULL is set; with -v the
// report is printed (docs/replicas.md's figures come from it):
//
//	IRISGATE_BENCH_FULL=1 go test -run TestReplicasScenario -v -timeout 20m ./bench/
func TestReplicasScenario(t *testing.T) {
	pg, err := pgtest.Start()
	if err != nil {
		pgtest.Skip(t, err)
	}
	defer pg.Close()
	ctx, cancel := context.WithTimeout(context.Background(), pgtest.Wait)
	defer cancel()
	_, url, err := pg.CreateDB(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ns, err := natsserver.NewServer(&natsserver.Options{Host: "127.0.0.1", Port: -1, NoLog: true, NoSigs: true})
	if err != nil {
		t.Fatal(err)
	}
	go ns.Start()
	defer ns.Shutdown()
	if !ns.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats-server did not start")
	}
	var out bytes.Buffer
	o := Options{Scenarios: []string{Replicas}, Quick: os.Getenv("IRISGATE_BENCH_FULL") == "", TempDir: t.TempDir(),
		ReplicasStore: url, ReplicasNATS: ns.ClientURL()}
	res, err := Run(context.Background(), o, &out)
	if err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + out.String())
	if len(res) != 1 || res[0].Err != nil {
		t.Fatalf("%+v", res)
	}
	if n := len(res[0].Figures); n != 8 {
		t.Fatalf("%d figures, want 2 for each of 4 modes", n)
	}
	for _, f := range res[0].Figures {
		if strings.HasPrefix(f.Value, "0/s") {
			t.Errorf("%s: %s", f.Label, f.Value)
		}
	}
}
