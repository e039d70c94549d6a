package agent

// The backend switch: each lane's turns go to the backend its settings
// name.

import (
	"context"
	"fmt"
	"testing"
)

// stubBackend is a backend with one provider that records its turns.
type stubBackend struct {
	id  string
	ran []string
}

func (s *stubBackend) Name() string { return s.id + "-model" }

func (s *stubBackend) Providers() []Provider {
	return []Provider{{ID: s.id, Models: []ModelInfo{{ID: s.id + "-model"}}}}
}

func (s *stubBackend) Resolve(Settings) (Provider, ModelInfo) {
	return s.Providers()[0], s.Providers()[0].Models[0]
}

func (s *stubBackend) Run(_ context.Context, t Turn, _ func(Event)) error {
	s.ran = append(s.ran, t.Input)
	return nil
}

func TestSwitchRoutesLanesByProvider(t *testing.T) {
	a, b := &stubBackend{id: "hermes"}, &stubBackend{id: "openai"}
	s, err := NewSwitch(a, b)
	if err != nil {
		t.Fatal(err)
	}
	if s.Name() != "hermes-model" || len(s.Providers()) != 2 || s.Providers()[1].ID != "openai" {
		t.Fatalf("switch %s %+v", s.Name(), s.Providers())
	}
	for _, tc := range []struct{ provider, want string }{{"", "hermes"}, {"openai", "openai"}, {"hermes", "hermes"}, {"gone", "hermes"}} {
		s.Run(context.Background(), Turn{Input: tc.provider, Settings: Settings{Provider: tc.provider}}, nil)
		if p, _ := s.Resolve(Settings{Provider: tc.provider}); p.ID != tc.want {
			t.Errorf("provider %q resolves to %s", tc.provider, p.ID)
		}
	}
	if fmt.Sprint(a.ran) != "[ hermes gone]" || fmt.Sprint(b.ran) != "[openai]" {
		t.Fatalf("ran a=%q b=%q", a.ran, b.ran)
	}
}
