// Package core holds the gateway's domain: lanes, messages, channels and the
// events that flow from commands to devices. It knows nothing of any wire
// format or of SQL; dialects and the store translate to and from these types.
package core

// DefaultChatID is the chat id of the channel that always exists.
const DefaultChatID = "default"

// Lane is one conversation with the agent: a channel's flat lane (ThreadID
// empty) or one thread inside it.
type Lane struct {
	ChatID   string
	ThreadID string
}

func (l Lane) String() string {
	if l.ThreadID == "" {
		return l.ChatID
	}
	return l.ChatID + "/" + l.ThreadID
}

// Roles of a message.
const (
	RoleUser      = "user"
	RoleAssistant = "assistant"
	RoleSystem    = "system"
	RoleCron      = "cron"
)

// Message is one entry of a lane's history.
type Message struct {
	ID        string
	Lane      Lane
	Role      string
	Text      string
	Reasoning string
	Media     []Media
	ReplyTo   string
	Model     string
	Tokens    int
	Runtime   *Runtime
	TS        int64 // epoch milliseconds
	// Stopped marks a reply cut short by agent.stop, a shutdown or a crash.
	Stopped bool
}

// Runtime is the footer of a final assistant message. Nil pointers are
// "unknown" and are left out on the wire.
type Runtime struct {
	Model      string
	ContextPct *int
	Cwd        string
	Latency    *float64
	Cost       *float64
}

// Media describes a stored file.
type Media struct {
	ID        string
	Kind      string // image | audio | video | document | voice
	Mime      string
	Size      int64
	Filename  string
	MessageID string
	// SHA256 (lowercase hex) names the file in the content store.
	SHA256 string `json:",omitempty"`
	// Path is where the bytes are on this machine, set for the agent; it
	// is never stored, the data directory may move.
	Path string `json:"-"`
}

// Channel kinds.
const (
	KindDefault = "default"
	KindChannel = "channel"
	KindThread  = "thread"
)

// Channel is an entry of the channel directory. Threads are entries of kind
// thread whose ParentChatID is their channel.
type Channel struct {
	ChatID       string
	Name         string
	Kind         string
	ParentChatID string
	IsDefault    bool
	Auto         bool
	Favorite     bool
	Icon         string // base64 image, empty for none
	Color        string // #RRGGBB, empty for none
	Automation   bool
}

// Lane returns the lane a channel entry stands for.
func (c Channel) Lane() Lane {
	if c.Kind == KindThread {
		return Lane{ChatID: c.ParentChatID, ThreadID: c.ChatID}
	}
	return Lane{ChatID: c.ChatID}
}

// Todo is one item of the agent's todo list.
type Todo struct {
	ID      string
	Content string
	Status  string // pending | in_progress | completed | cancelled
}

// Notification is an in-app banner, mirrored to push for absent devices.
type Notification struct {
	Kind  string // channel_renamed | channel_created | channel_deleted | cron | approval | clarify | generic
	Title string
	Body  string
	TS    int64
}

// Tool is a tool event of a running turn.
type Tool struct {
	Index    int
	Name     string
	Preview  string
	Args     map[string]any
	Emoji    string
	Note     string
	OK       bool
	Duration float64
	Output   string
}
