package irisschema

import "testing"

func TestLoad(t *testing.T) {
	p, err := Locate()
	if err != nil {
		t.Fatal(err)
	}
	v, err := Load(p)
	if err != nil {
		t.Fatal(err)
	}
	good := `{"v":1,"type":"message","chat_id":"default","payload":{"message_id":"m_1","role":"user","text":"hi","ts":1}}`
	if err := v.Server([]byte(good)); err != nil {
		t.Fatal(err)
	}
	bad := `{"v":1,"type":"message","chat_id":"default","thread_id":null,"payload":{"message_id":"m_1","role":"bot","text":"hi","ts":1}}`
	if err := v.Server([]byte(bad)); err == nil {
		t.Fatal("bad accepted")
	} else {
		t.Log(err)
	}
	if err := v.Server([]byte(`{"v":1,"type":"channel.created","payload":{"chat_id":"x","kind":"nope"}}`)); err == nil {
		t.Fatal("bad channel accepted")
	}
	if err := v.Server([]byte(`{"v":1,"type":"agent.idle","payload":{}}`)); err != nil {
		t.Fatal(err)
	}
	if err := v.Server([]byte(`{"v":1,"type":"agent.idel","payload":{}}`)); err == nil {
		t.Fatal("typo accepted")
	}
}
