package fakegithub

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v4"
)

// InstallationTokenLifetime is how long an installation access token
// lives on GitHub.
const InstallationTokenLifetime = time.Hour

// identity is who a request's credentials stand for.
type identity struct {
	user         *User // a user token (personal access token)
	installation int64 // an installation token
	expires      time.Time
	app          *App // an app's JWT
}

// authKind says which credentials an endpoint takes, as GitHub enforces
// it: the app's JWT only on the /app endpoints, a user or installation
// token everywhere else.
type authKind int

const (
	authToken authKind = iota // a user or installation token (the default)
	authJWT                   // the app's JWT only
)

// route is one endpoint of the fake.
type route struct {
	h    handler
	auth authKind
}

// admits answers whether credentials of id may call an endpoint of kind
// k: 0 when they may, else the status and message GitHub answers.
func (k authKind) admits(id *identity) (int, string) {
	switch k {
	case authJWT:
		if id.app == nil {
			return http.StatusUnauthorized, "A JSON web token could not be decoded"
		}
	default:
		if id.app != nil {
			return http.StatusUnauthorized, "A JSON web token can only be used on GitHub App endpoints (/app, /app/installations/...); use an installation access token"
		}
	}
	return 0, ""
}

// authenticate resolves the Authorization header: "token X" / "Bearer X"
// for tokens, "Bearer <JWT>" for an app. An expired installation token is
// 401 Bad credentials, as on GitHub.
func (f *Fake) authenticate(r *http.Request) (*identity, int, string) {
	h := r.Header.Get("Authorization")
	if h == "" {
		return nil, http.StatusUnauthorized, "Requires authentication"
	}
	scheme, cred, ok := strings.Cut(h, " ")
	if !ok || (!strings.EqualFold(scheme, "token") && !strings.EqualFold(scheme, "bearer")) {
		return nil, http.StatusUnauthorized, "Bad credentials"
	}
	return f.identify(cred, strings.EqualFold(scheme, "bearer"))
}

// identify resolves a credential: a token the fake knows, or (bearer
// only) an app's JWT.
func (f *Fake) identify(cred string, bearer bool) (*identity, int, string) {
	if id, ok := f.tokens[cred]; ok {
		if !id.expires.IsZero() && !f.now().Before(id.expires) {
			return nil, http.StatusUnauthorized, "Bad credentials"
		}
		return id, 0, ""
	}
	if bearer && strings.Count(cred, ".") == 2 {
		app, err := f.verifyJWT(cred)
		if err != nil {
			return nil, http.StatusUnauthorized, "A JSON web token could not be decoded: " + err.Error()
		}
		return &identity{app: app}, 0, ""
	}
	return nil, http.StatusUnauthorized, "Bad credentials"
}

func (f *Fake) verifyJWT(s string) (*App, error) {
	var claims jwt.RegisteredClaims
	var app *App
	_, err := jwt.ParseWithClaims(s, &claims, func(t *jwt.Token) (any, error) {
		if t.Method.Alg() != "RS256" {
			return nil, fmt.Errorf("alg %s, want RS256", t.Method.Alg())
		}
		c, _ := t.Claims.(*jwt.RegisteredClaims)
		id, err := strconv.ParseInt(c.Issuer, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("iss %q is not an app id", c.Issuer)
		}
		a, ok := f.apps[id]
		if !ok {
			return nil, fmt.Errorf("unknown app %d", id)
		}
		app = a
		return a.PublicKey, nil
	})
	if err != nil {
		return nil, err
	}
	if claims.ExpiresAt == nil || claims.IssuedAt == nil || claims.ExpiresAt.Sub(claims.IssuedAt.Time) > 10*time.Minute+time.Minute {
		return nil, fmt.Errorf("exp must be set and at most 10 minutes after iat")
	}
	return app, nil
}

// installationLogin is the bot account an installation acts as.
func (f *Fake) installationLogin(inst int64) string {
	if a := f.apps[f.installs[inst]]; a != nil {
		return a.Slug + "[bot]"
	}
	return ""
}
