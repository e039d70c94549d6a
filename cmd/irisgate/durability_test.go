package main

import (
	"testing"

	"github.com/alecthomas/kong"

	"github.com/irisgate/irisgate/store"
)

// --durability reaches the store through the gateway's config: normal
// unless full is asked for, and nothing else is accepted.
func TestDurabilityFlag(t *testing.T) {
	if d := parse(t, "serve").Serve.appConfig(nil, nil).Durability; d != store.DurabilityNormal {
		t.Fatalf("default durability %q", d)
	}
	if d := parse(t, "serve", "--durability", "full").Serve.appConfig(nil, nil).Durability; d != store.DurabilityFull {
		t.Fatalf("--durability full gave %q", d)
	}
	var cli CLI
	p, err := kong.New(&cli, defaults(), kong.Exit(func(int) {}))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Parse([]string{"serve", "--durability", "fsync"}); err == nil {
		t.Fatal("--durability fsync was accepted")
	}
}
