package main

import (
	"strconv"
	"strings"
	"time"

	"github.com/alecthomas/kong"

	"github.com/irisgate/irisgate/agent"
	"github.com/irisgate/irisgate/gateway"
	"github.com/irisgate/irisgate/media"
	"github.com/irisgate/irisgate/push"
	"github.com/irisgate/irisgate/server"
	"github.com/irisgate/irisgate/wire/mobile"
)

// defaults are the flags' defaults that a package owns: a flag's
// default:"${name}" reads it from the package's Default… constant, so a
// default is written once (TestServeDefaultsAreThePackages).
func defaults() kong.Vars {
	return kong.Vars{
		"outbox_keep":         strconv.FormatInt(gateway.DefaultOutboxKeep, 10),
		"outbox_max_age":      duration(gateway.DefaultOutboxMaxAge),
		"ask_timeout":         duration(gateway.DefaultAskTimeout),
		"max_frame":           strconv.Itoa(server.DefaultMaxFrame),
		"hello_timeout":       duration(server.DefaultHelloTimeout),
		"ping_interval":       duration(server.DefaultPingInterval),
		"shutdown_wait":       duration(server.DefaultShutdownWait),
		"deflate":             strconv.FormatBool(server.DefaultDeflate),
		"max_conns_per_token": strconv.Itoa(gateway.DefaultConnsPerToken),
		"max_media":           strconv.Itoa(media.DefaultMaxSize),
		"mobile_prompt_ttl":   duration(mobile.DefaultPromptTTL),
		"push_hold":           duration(push.DefaultHold),
		"push_timeout":        duration(push.DefaultTimeout),
		"context_length":      strconv.Itoa(agent.DefaultContextLength),
	}
}

// duration writes d as --help shows it: 720h, not 720h0m0s.
func duration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
