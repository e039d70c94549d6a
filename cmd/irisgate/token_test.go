package main

import (
	"context"
	"crypto/sha256"
	"testing"

	"github.com/irisgate/irisgate/gateway"
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

func TestAuthWithStoredTokens(t *testing.T) {
	st, err := dataFlag{Data: t.TempDir()}.open()
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ctx := context.Background()
	tok, rec, err := gateway.CreateToken(ctx, st, "bound", "dev1")
	if err != nil {
		t.Fatal(err)
	}
	a := gateway.NewAuth(st, "")
	if id, err := a.Check(ctx, "1.2.3.4", tok, "dev1"); err != nil || id != rec.ID {
		t.Fatalf("bound token on its device: %q, %v", id, err)
	}
	if _, err := a.Check(ctx, "1.2.3.4", tok, "dev2"); err == nil {
		t.Fatal("bound token accepted for another device")
	}
	if _, err := a.Check(ctx, "1.2.3.4", tok+"x", "dev1"); err == nil {
		t.Fatal("wrong token accepted")
	}
	for i := 0; i < 20; i++ {
		a.Check(ctx, "5.6.7.8", "nope", "d")
	}
	if _, err := a.Check(ctx, "5.6.7.8", tok, "dev1"); err == nil {
		t.Fatal("an address past the failure limit was let in")
	}
	if _, err := a.Check(ctx, "1.2.3.5", tok, "dev1"); err != nil {
		t.Fatalf("another address is not limited: %v", err)
	}
}
