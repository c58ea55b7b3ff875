package webhook

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strconv"
)

// PayloadKey is the identity of what a delivery reports, taken from the
// payload's own ids, for the events and actions the bot acts on (see
// normalize): the comment for issue_comment and
// pull_request_review_comment created, the review for pull_request_review
// submitted and dismissed, the pull request with its head and its
// updated_at for pull_request synchronize and closed (the same head may
// come back after a force push; updated_at moves with every push, and with
// every close). "" for anything else: an event the bot ignores, or one
// whose payload lacks the ids.
//
// X-GitHub-Delivery is chosen by the sender and is not covered by the
// signature: whoever holds a signed body (a log, a proxy, the redelivery
// page) can send it again under a new delivery ID. The signed body keeps
// its ids, so a second delivery with the same key is a replay, answered as
// a duplicate and never processed; GitHub's own redelivery keeps both.
func PayloadKey(event, action string, body []byte) string {
	k := payloadKey(event, action, body)
	if len(k) > maxKey { // the payload's strings are the sender's
		sum := sha256.Sum256([]byte(k))
		k = event + "." + action + ":sha256=" + hex.EncodeToString(sum[:])
	}
	return k
}

// maxKey bounds a payload key as stored.
const maxKey = 200

func payloadKey(event, action string, body []byte) string {
	type id struct {
		ID int64 `json:"id"`
	}
	var p struct {
		Comment     *id `json:"comment"`
		Review      *id `json:"review"`
		PullRequest *struct {
			ID        int64  `json:"id"`
			UpdatedAt string `json:"updated_at"`
			ClosedAt  string `json:"closed_at"`
			Head      struct {
				SHA string `json:"sha"`
			} `json:"head"`
		} `json:"pull_request"`
	}
	switch event + "." + action {
	case "issue_comment.created", "pull_request_review_comment.created", "pull_request_review.submitted", "pull_request_review.dismissed", "pull_request.synchronize", "pull_request.closed":
	default:
		return ""
	}
	if json.Unmarshal(body, &p) != nil {
		return ""
	}
	prefix := event + "." + action + ":"
	switch event {
	case "issue_comment", "pull_request_review_comment":
		if p.Comment == nil || p.Comment.ID == 0 {
			return ""
		}
		return prefix + "comment=" + strconv.FormatInt(p.Comment.ID, 10)
	case "pull_request_review":
		if p.Review == nil || p.Review.ID == 0 {
			return ""
		}
		return prefix + "review=" + strconv.FormatInt(p.Review.ID, 10)
	case "pull_request":
		pr := p.PullRequest
		if pr == nil || pr.ID == 0 || pr.UpdatedAt == "" {
			return ""
		}
		k := prefix + "pr=" + strconv.FormatInt(pr.ID, 10) + " head=" + pr.Head.SHA + " updated=" + pr.UpdatedAt
		if action == "closed" {
			k += " closed=" + pr.ClosedAt
		}
		return k
	}
	return ""
}
