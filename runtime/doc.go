// Package runtime is the engine between a prompt and the kernel: the event
// envelope and Store backends, replay and verify, the RunManager, providers,
// Plan-Work-Review roles, hooks, skills, context assembly and the workflow
// plane. It imports the kernel and schemas, never the bot.
package runtime
