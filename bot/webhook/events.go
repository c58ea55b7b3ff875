package webhook

import "slices"

// Events are the webhook events, and their actions, the bot acts on:
// event → actions, an empty list meaning any action. They are not listed
// here: the dispatcher's route table derives them (dispatch.Events), so a
// new trigger is one edit of that table. The handler answers other events
// 400 "unsupported event" (ping is always answered), and bot/worker's
// Processor drops other actions as "ignored" before decoding them.
type Events map[string][]string

// Has reports whether the bot acts on some action of event.
func (e Events) Has(event string) bool {
	_, ok := e[event]
	return ok
}

// Accepts reports whether the bot acts on event with action.
func (e Events) Accepts(event, action string) bool {
	acts, ok := e[event]
	return ok && (len(acts) == 0 || slices.Contains(acts, action))
}

// Label is the metrics label of event: the event if the bot handles it,
// "other" otherwise (the header is the sender's; labels stay bounded).
func (e Events) Label(event string) string {
	if event == "ping" || e.Has(event) {
		return event
	}
	return "other"
}
