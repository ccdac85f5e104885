package main

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/physiciansnet/capacityd/console"
)

// consoleSettings configure the organisers' console.
var consoleSettings = []setting{
	{"CONSOLE_BASE_URL", "", "the service's public URL (e.g. https://capacity.example.org): the console's OpenID Connect redirect is made from it, and its cookies are Secure when it is https; empty: the redirect is made from each request's host, and console-link prints http://localhost on LISTEN_ADDR's port", func(c *config, v string) error {
		if v != "" {
			u, err := url.Parse(v)
			if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || (u.Path != "" && u.Path != "/") {
				return fmt.Errorf("want a scheme and host such as https://capacity.example.org, got %q", v)
			}
		}
		c.App.Console.BaseURL = strings.TrimSuffix(v, "/")
		return nil
	}},
	{"CONSOLE_OIDC_ISSUER", "", "OpenID Connect issuer URL organisers sign in to the console with (discovery at ISSUER/.well-known/openid-configuration); its ID tokens carry roles as API tokens do. Empty: sign-in by capacityd console-link only", func(c *config, v string) error {
		if v != "" {
			if u, err := url.Parse(v); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
				return fmt.Errorf("want an http(s) URL such as https://idp.example.org/realms/staff, got %q", v)
			}
		}
		c.App.Console.OIDC.Issuer = v
		return nil
	}},
	{"CONSOLE_OIDC_CLIENT_ID", "", "the console's client id at the OpenID provider (required with CONSOLE_OIDC_ISSUER)", func(c *config, v string) error {
		c.App.Console.OIDC.ClientID = v
		return nil
	}},
	{"CONSOLE_OIDC_CLIENT_SECRET", "", "the console's client secret at the OpenID provider (empty: a public client, PKCE alone)", func(c *config, v string) error {
		c.App.Console.OIDC.ClientSecret = v
		return nil
	}},
	durationSetting("CONSOLE_SESSION_TTL", console.DefaultSessionTTL.String(), "lifetime of a console session (signing out ends it sooner)",
		func(c *config) *time.Duration { return &c.App.Console.SessionTTL }),
	{"CONSOLE_TIME_ZONE", "UTC", "time zone of the console's dates until an organiser's browser says its own (an IANA name such as Asia/Taipei)", func(c *config, v string) error {
		loc, err := time.LoadLocation(v)
		if err != nil {
			return fmt.Errorf("want an IANA time zone such as Asia/Taipei, got %q", v)
		}
		c.App.Console.TimeZone = loc
		return nil
	}},
}

// validateConsole checks the console's settings together: an OpenID
// provider needs the console's client id.
func (c *config) validateConsole() error {
	if con := c.App.Console; con.OIDC.Issuer != "" && con.OIDC.ClientID == "" {
		return errors.New("CONSOLE_OIDC_CLIENT_ID (--console-oidc-client-id): is required with CONSOLE_OIDC_ISSUER")
	}
	return nil
}
