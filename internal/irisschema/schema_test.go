package irisschema

import "testing"

func TestOwnSchema(t *testing.T) {
	v, err := Own()
	if err != nil {
		t.Fatal(err)
	}
	for _, good := range []string{
		`{"v":1,"type":"message","chat_id":"default","payload":{"message_id":"m_1","role":"user","text":"hi","ts":1}}`,
		`{"v":1,"type":"agent.idle","payload":{}}`,
		`{"v":1,"type":"agent.busy","chat_id":"default","payload":{"reason":"cron"}}`,
		`{"v":1,"type":"picker.approval","chat_id":"default","payload":{"picker_id":"pa_1","command":"rm -rf build","choices":[{"value":"once","label":"Allow once"}]}}`,
		`{"v":1,"id":3,"type":"media.pull","payload":{"media_id":"md_1","kind":"image","mime":"image/png","size":3,"filename":"a.png","sha256":"ab"}}`,
		`{"v":1,"id":4,"type":"sync.done","payload":{"cursor":9,"truncated":true}}`,
	} {
		if err := v.Server([]byte(good)); err != nil {
			t.Errorf("refused %s: %v", good, err)
		}
	}
	for what, bad := range map[string]string{
		"a role outside the enum":  `{"v":1,"type":"message","chat_id":"default","payload":{"message_id":"m_1","role":"bot","text":"hi","ts":1}}`,
		"null thread_id":           `{"v":1,"type":"message","chat_id":"default","thread_id":null,"payload":{"message_id":"m_1","role":"user","text":"hi","ts":1}}`,
		"a bad channel kind":       `{"v":1,"type":"channel.created","payload":{"chat_id":"x","name":"x","is_default":false,"kind":"nope"}}`,
		"a misspelt type":          `{"v":1,"type":"agent.idel","payload":{}}`,
		"an undocumented member":   `{"v":1,"type":"typing","chat_id":"default","payload":{"on":true,"who":"x"}}`,
		"a missing required field": `{"v":1,"type":"message.update","chat_id":"default","payload":{"text":"x"}}`,
		"no payload":               `{"v":1,"type":"pong"}`,
	} {
		if err := v.Server([]byte(bad)); err == nil {
			t.Errorf("accepted %s: %s", what, bad)
		}
	}
}
