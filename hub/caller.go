package hub

import "github.com/irisgate/irisgate/core"

// Caller is the connection and request a command comes from: whoever
// answers it addresses the reply to ReqID on Conn.
type Caller struct {
	Conn  *Conn
	ReqID int64
}

// Reply is where the command's answer goes: nil when nothing waits for
// one (no connection, or a request without an id).
func (c Caller) Reply() *core.ReplyAddr {
	if c.Conn == nil || c.ReqID == 0 {
		return nil
	}
	return &core.ReplyAddr{ConnID: c.Conn.ID, ReqID: c.ReqID}
}

// DeviceID is the calling device ("" without a connection).
func (c Caller) DeviceID() string {
	if c.Conn == nil {
		return ""
	}
	return c.Conn.DeviceID
}

// Token is the token the calling connection said hello with ("": none):
// what the bounds per token count against.
func (c Caller) Token() string {
	if c.Conn == nil {
		return ""
	}
	return c.Conn.Token
}
