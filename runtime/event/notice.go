package event

// Notices: events that report what a run's environment did not do as
// asked, rather than a decision of the run. Re-execution steps over them
// (they are not replayed as decisions), and a run records those pending
// before its next event.
const (
	// ConfigWarning: a setting of the repository (a Claude Code
	// permissions rule agentos cannot enforce, allow rules it does not
	// honour, additionalDirectories it refuses) and what agentos does
	// instead.
	ConfigWarning = "config.warning"
	// MCPServerFailed: an MCP server of .mcp.json or the profile did not
	// start or list its tools, with the end of its stderr and what to do.
	MCPServerFailed = "mcp.server_failed"
)

// IsNotice reports whether an event type is a notice.
func IsNotice(typ string) bool { return typ == ConfigWarning || typ == MCPServerFailed }
