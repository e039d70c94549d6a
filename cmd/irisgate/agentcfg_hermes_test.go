package main

import (
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/irisgate/irisgate/agent"
)

func TestHermesFlags(t *testing.T) {
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	t.Setenv("API_SERVER_KEY", "from-hermes-env")
	s := parse(t, "serve", "--hermes-url", "http://127.0.0.1:8642/v1").Serve
	if s.HermesURL != "http://127.0.0.1:8642/v1" || s.HermesKey != "from-hermes-env" || s.HermesTimeout != 30*time.Minute {
		t.Fatalf("flags %+v", s.HermesFlags)
	}
	ag, err := s.AgentFlags.build(quiet)
	if err != nil {
		t.Fatal(err)
	}
	h, ok := ag.(*agent.Hermes)
	if !ok || h.URL() != "http://127.0.0.1:8642" {
		t.Fatalf("backend %T", ag)
	}

	t.Setenv("IRISGATE_HERMES_KEY", "from-irisgate-env")
	t.Setenv("IRISGATE_HERMES_TIMEOUT", "5m")
	s = parse(t, "serve", "--hermes-url", "http://hermes:8642", "--model", "gpt-4.1-mini").Serve
	if s.HermesKey != "from-irisgate-env" || s.HermesTimeout != 5*time.Minute {
		t.Fatalf("environment: %+v", s.HermesFlags)
	}
	ag, err = s.AgentFlags.build(quiet)
	if err != nil {
		t.Fatal(err)
	}
	sw, ok := ag.(*agent.Switch)
	if !ok || len(sw.Providers()) != 2 || sw.Providers()[0].ID != agent.HermesProviderID || sw.Name() != agent.HermesModelID {
		t.Fatalf("backend %T %+v", ag, ag)
	}

	if _, err := (&AgentFlags{HermesFlags: HermesFlags{HermesURL: "hermes:8642"}}).build(quiet); err == nil {
		t.Fatal("a URL without a scheme was accepted")
	}
	if ag, err := (&AgentFlags{}).build(quiet); err != nil || ag.Name() != agent.EchoModel {
		t.Fatalf("without Hermes or a model: %T %v", ag, err)
	}
}
