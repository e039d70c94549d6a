package agent

import (
	"context"
	"errors"
)

// Backend is an agent that offers providers and models: the model backend
// and the Hermes bridge.
type Backend interface {
	Agent
	Providers() []Provider
	Resolve(Settings) (Provider, ModelInfo)
}

// Switch offers several backends side by side, so each lane may use its
// own: a lane runs on the backend whose provider its /model choice names
// (provider "hermes" is the Hermes bridge), and on the first backend when
// it chose none. /model lists every backend's providers, /status shows the
// lane's.
type Switch struct {
	backends []Backend
}

// NewSwitch combines backends; the first is the default.
func NewSwitch(backends ...Backend) (*Switch, error) {
	if len(backends) == 0 {
		return nil, errors.New("agent: a switch needs a backend")
	}
	return &Switch{backends: backends}, nil
}

// pick is the backend a lane's settings choose.
func (s *Switch) pick(set Settings) Backend {
	if set.Provider != "" {
		for _, b := range s.backends {
			for _, p := range b.Providers() {
				if p.ID == set.Provider {
					return b
				}
			}
		}
	}
	return s.backends[0]
}

// Name implements Agent: the default backend's name.
func (s *Switch) Name() string { return s.backends[0].Name() }

// Providers lists every backend's providers, the default's first.
func (s *Switch) Providers() []Provider {
	var out []Provider
	for _, b := range s.backends {
		out = append(out, b.Providers()...)
	}
	return out
}

// Resolve finds the provider and model of a lane's settings.
func (s *Switch) Resolve(set Settings) (Provider, ModelInfo) { return s.pick(set).Resolve(set) }

// Run implements Agent on the lane's backend.
func (s *Switch) Run(ctx context.Context, t Turn, emit func(Event)) error {
	return s.pick(t.Settings).Run(ctx, t, emit)
}

// Close closes the backends that hold resources.
func (s *Switch) Close() error {
	var errs []error
	for _, b := range s.backends {
		if c, ok := b.(interface{ Close() error }); ok {
			errs = append(errs, c.Close())
		}
	}
	return errors.Join(errs...)
}
