package main

import (
	"context"
	"crypto/sha256"
	"testing"
)

func TestTokenCommands(t *testing.T) {
	dir := t.TempDir()
	create := &TokenCreateCmd{dataFlag: dataFlag{Data: dir}, Name: "phone", Device: "dev1"}
	if err := create.Run(); err != nil {
		t.Fatal(err)
	}
	st, err := dataFlag{Data: dir}.open()
	if err != nil {
		t.Fatal(err)
	}
	toks, err := st.Tokens(context.Background())
	st.Close()
	if err != nil || len(toks) != 1 || toks[0].Name != "phone" || toks[0].DeviceID != "dev1" {
		t.Fatalf("tokens = %+v, %v", toks, err)
	}
	if len(toks[0].Hash) != sha256.Size {
		t.Fatalf("stored hash is %d bytes", len(toks[0].Hash))
	}
	if err := (&TokenListCmd{dataFlag{Data: dir}}).Run(); err != nil {
		t.Fatal(err)
	}
	if err := (&TokenRevokeCmd{dataFlag: dataFlag{Data: dir}, ID: toks[0].ID}).Run(); err != nil {
		t.Fatal(err)
	}
	if err := (&TokenRevokeCmd{dataFlag: dataFlag{Data: dir}, ID: toks[0].ID}).Run(); err == nil {
		t.Fatal("revoking twice should fail")
	}
}

