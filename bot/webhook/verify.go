package webhook

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/google/go-github/v62/github"
)

// SignatureHeader carries "sha256=" + hex HMAC-SHA256 of the raw body.
const SignatureHeader = "X-Hub-Signature-256"

// Errors of Verify; callers branch with errors.Is.
var (
	ErrNoSignature        = errors.New("webhook: missing " + SignatureHeader)
	ErrMalformedSignature = errors.New("webhook: malformed " + SignatureHeader)
	ErrSignatureMismatch  = errors.New("webhook: signature does not match")
	ErrNoSecret           = errors.New("webhook: no webhook secret configured")
)

const sigPrefix = "sha256="

// Verify checks header (the X-Hub-Signature-256 value) against body with
// each non-empty secret in turn (two during a rotation), with go-github's
// ValidateSignature (constant-time). Only SHA-256 is accepted: the
// header's form is checked first, so a "sha1=" value never reaches the
// library, which would accept it. It fails closed: no usable secret is an
// error.
func Verify(secrets [][]byte, body []byte, header string) error {
	usable := false
	for _, s := range secrets {
		if len(s) > 0 {
			usable = true
			break
		}
	}
	if !usable {
		return ErrNoSecret
	}
	if header == "" {
		return ErrNoSignature
	}
	if len(header) != len(sigPrefix)+sha256.Size*2 || header[:len(sigPrefix)] != sigPrefix {
		return fmt.Errorf("%w: want %q followed by %d hex digits", ErrMalformedSignature, sigPrefix, sha256.Size*2)
	}
	if _, err := hex.DecodeString(header[len(sigPrefix):]); err != nil {
		return fmt.Errorf("%w: %v", ErrMalformedSignature, err)
	}
	for _, s := range secrets {
		if len(s) > 0 && github.ValidateSignature(header, body, s) == nil {
			return nil
		}
	}
	return ErrSignatureMismatch
}

// Sign returns the X-Hub-Signature-256 value GitHub sends for body.
func Sign(secret, body []byte) string {
	m := hmac.New(sha256.New, secret)
	m.Write(body)
	return sigPrefix + hex.EncodeToString(m.Sum(nil))
}
