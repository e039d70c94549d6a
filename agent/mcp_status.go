package agent

// ToolsInfo is what /tools shows: the tools offered now and the MCP
// servers behind some of them.
type ToolsInfo struct {
	Builtin []string // the gateway's own tools, by name
	MCP     []MCPStatus
}

// Info describes the tools.
func (ts *Tools) Info() ToolsInfo {
	var ti ToolsInfo
	for _, t := range ts.List {
		ti.Builtin = append(ti.Builtin, t.Name)
	}
	for _, s := range ts.Sets {
		if m, ok := s.(*MCP); ok {
			ti.MCP = append(ti.MCP, m.Status()...)
		}
	}
	return ti
}

// ToolsInfo describes the model backend's tools.
func (m *Model) ToolsInfo() (ToolsInfo, bool) { return m.cfg.Tools.Info(), true }

// ToolsInfo describes the tools of the first backend that has them (the
// model backend beside Hermes); ok is false when none has.
func (s *Switch) ToolsInfo() (ToolsInfo, bool) {
	for _, b := range s.backends {
		if m, ok := b.(*Model); ok {
			return m.ToolsInfo()
		}
	}
	return ToolsInfo{}, false
}
