package push

import (
	"fmt"
	"slices"
)

// MaxFCMToken bounds a registration token (FCM's are about 160 bytes).
const MaxFCMToken = 4096

// ntfyDisallowed are the topic names ntfy refuses by default because its
// own pages use them: server/config.go DefaultDisallowedTopics, answered
// 400 with code 40010 "invalid request: topic name is not allowed".
var ntfyDisallowed = []string{"docs", "static", "file", "app", "metrics", "account", "settings", "signup", "login", "v1"}

// ValidNtfyTopic checks a topic the way an ntfy server does before it
// takes a publish (server/server.go topicRegex `^[-_A-Za-z0-9]{1,64}$`,
// and the default disallowed names), so a device learns at registration
// that a topic can never work instead of its pushes failing later. A name
// the server's own disallowed-topics adds is only known when it answers.
func ValidNtfyTopic(topic string) error {
	if len(topic) == 0 || len(topic) > 64 {
		return fmt.Errorf("ntfy_topic must be 1–64 characters, not %d", len(topic))
	}
	for i := 0; i < len(topic); i++ {
		c := topic[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return fmt.Errorf("ntfy_topic %q is not a topic ntfy accepts: use only letters, digits, '-' and '_'", topic)
		}
	}
	if slices.Contains(ntfyDisallowed, topic) {
		return fmt.Errorf("ntfy_topic %q is a name ntfy reserves for its own pages: pick another", topic)
	}
	return nil
}

// ValidFCMToken bounds an FCM registration token and keeps it printable:
// it travels in JSON to FCM and in logs.
func ValidFCMToken(tok string) error {
	if len(tok) > MaxFCMToken {
		return fmt.Errorf("fcm_token is %d bytes, the limit is %d", len(tok), MaxFCMToken)
	}
	for i := 0; i < len(tok); i++ {
		if tok[i] <= ' ' || tok[i] >= 0x7f {
			return fmt.Errorf("fcm_token has a character an FCM registration token never has (at byte %d)", i)
		}
	}
	return nil
}
