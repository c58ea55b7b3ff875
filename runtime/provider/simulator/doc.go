// Package simulator is test support: an OpenAI-compatible HTTP server
// that plays a misbehaving model on the demo task (runtime/demo: fix
// CheckToken in auth.go), one behaviour per model name ("sim-stale-hash"),
// so that the real openai adapter, the engine, the kernel and the bot meet
// the mistakes real models make. The scripted provider stays for exact
// scripts; fakemodel models the happy path.
//
// A loopback server rather than an in-process provider: what a model gets
// wrong arrives as a real Chat Completions answer (a refusal field, empty
// content, a made-up tool name, arguments in a fence), so the adapter's
// parsing, the provider checks and the runtime's repair steps are what is
// tested, and nothing of it is compiled into the agentos binary or needs a
// registry entry: a profile points provider openai at URL() with the
// behaviour's model.
//
// Each answer is decided from the request, as a model decides it: the role
// comes from the system prompt, and the Worker reads its tool results (the
// error code, the suggested tool name, the hash a read returned, a denial)
// and chooses its next call from them. The behaviours, what each does and
// the outcome an honest run has, are in Behaviours; docs/simulator.md
// lists the public reports each one is taken from and the matrix that
// runs them all through `agentos run` and the bot.
package simulator
