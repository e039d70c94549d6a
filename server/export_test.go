package server

import "github.com/irisgate/irisgate/gateway"

// ServingFrom is how many HTTP requests of a client address are being
// served (httpBounds), for tests that must know a request is held before
// they probe the bound.
func (s *Server) ServingFrom(addr string) int { return s.active.serving(gateway.AddrKey(addr)) }
