// Package bot is the GitHub side of agentos: webhook intake (gin), the
// GitHub Action entrypoint, the comment command parser, permission checks,
// the GitHub client (go-github, ghinstallation), approvals as PR reviews, the
// tracking comment, session branch and PR publishing, and the HTTP/SSE API.
// It is the only package that imports go-github, ghinstallation or gin.
package bot
