package turn

import (
	"reflect"
	"testing"

	"github.com/irisgate/irisgate/agent"
	"github.com/irisgate/irisgate/internal/fill"
	"github.com/irisgate/irisgate/store/record"
)

// The store keeps the agent's conversation as records it owns; they must
// mirror agent.Msg, whose fields the backends add to. A field of agent.Msg
// (or ToolCall, Attachment) without its twin in the record, or not carried
// by the conversion, fails here.
func TestConversationEntryMirrorsAgentMsg(t *testing.T) {
	for _, pair := range []struct{ agent, rec reflect.Type }{
		{reflect.TypeFor[agent.Msg](), reflect.TypeFor[record.ConversationEntry]()},
		{reflect.TypeFor[agent.ToolCall](), reflect.TypeFor[record.ToolCall]()},
		{reflect.TypeFor[agent.Attachment](), reflect.TypeFor[record.Attachment]()},
	} {
		for i := range pair.agent.NumField() {
			f := pair.agent.Field(i)
			if !f.IsExported() {
				continue
			}
			if _, ok := pair.rec.FieldByName(f.Name); !ok {
				t.Errorf("%s.%s has no field in %s: the conversation would lose it", pair.agent, f.Name, pair.rec)
			}
		}
	}
	var m agent.Msg
	if err := fill.Fill(&m); err != nil {
		t.Fatal(err)
	}
	e := entryOf(m)
	if e.V != record.Version {
		t.Errorf("entry version %d", e.V)
	}
	b, err := record.EncodeConversation(e)
	if err != nil {
		t.Fatal(err)
	}
	back, err := record.DecodeConversation(b)
	if err != nil {
		t.Fatal(err)
	}
	if got := msgOf(back); !reflect.DeepEqual(got, m) {
		t.Fatalf("agent.Msg through the store:\n got %+v\nwant %+v", got, m)
	}
}
