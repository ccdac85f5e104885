package console

import (
	"embed"
	"encoding/json"
	"fmt"
	"io/fs"
	"net/http"
	"path"
	"slices"
	"strings"
	"time"

	"golang.org/x/text/language"
)

// Languages are the console's languages, the first the default. zh-TW
// (Traditional Chinese, as written in Taiwan) is the platform's own.
var Languages = []string{"en", "zh-TW", "zh-CN"}

// matcher picks one of Languages for a browser's Accept-Language: zh-Hant,
// zh-HK and zh-MO find zh-TW; zh, zh-Hans and zh-SG find zh-CN.
var matcher = language.NewMatcher([]language.Tag{
	language.English, language.MustParse("zh-TW"), language.MustParse("zh-CN"),
})

// locales holds one message catalogue per language: locales/LANG/*.json,
// each file a flat object of message keys to texts, one file per area of
// the console. Templates hold no text of their own, only keys.
//
//go:embed locales
var locales embed.FS

// catalogue is every language's messages.
type catalogue struct {
	messages map[string]map[string]string
}

// loadCatalogue reads locales/; a key defined twice in one language, or
// missing from a language that another has, is an error.
func loadCatalogue() (*catalogue, error) {
	c := &catalogue{messages: make(map[string]map[string]string)}
	for _, lang := range Languages {
		files, err := fs.Glob(locales, path.Join("locales", lang, "*.json"))
		if err != nil {
			return nil, err
		}
		msgs := make(map[string]string)
		for _, f := range files {
			b, err := locales.ReadFile(f)
			if err != nil {
				return nil, err
			}
			var m map[string]string
			if err := json.Unmarshal(b, &m); err != nil {
				return nil, fmt.Errorf("%s: %w", f, err)
			}
			for k, v := range m {
				if _, dup := msgs[k]; dup {
					return nil, fmt.Errorf("%s: %q is defined twice in %s", f, k, lang)
				}
				msgs[k] = v
			}
		}
		c.messages[lang] = msgs
	}
	for _, lang := range Languages {
		for k := range c.messages[Languages[0]] {
			if _, ok := c.messages[lang][k]; !ok {
				return nil, fmt.Errorf("locales/%s: %q is missing", lang, k)
			}
		}
		for k := range c.messages[lang] {
			if _, ok := c.messages[Languages[0]][k]; !ok {
				return nil, fmt.Errorf("locales/%s: %q is not in %s", lang, k, Languages[0])
			}
		}
	}
	return c, nil
}

// text is the message key in lang, formatted with args; an unknown key
// shows itself in brackets, so that a test finds it.
func (c *catalogue) text(lang, key string, args ...any) string {
	msg, ok := c.messages[lang][key]
	if !ok {
		return "[" + key + "]"
	}
	if len(args) == 0 {
		return msg
	}
	return fmt.Sprintf(msg, args...)
}

// language is the request's language: the one the organiser chose (a
// cookie), else the best match of the browser's Accept-Language.
func (h *Handler) language(r *http.Request) string {
	if c, err := r.Cookie(languageCookie); err == nil && slices.Contains(Languages, c.Value) {
		return c.Value
	}
	tags, _, _ := language.ParseAcceptLanguage(r.Header.Get("Accept-Language"))
	_, i, conf := matcher.Match(tags...)
	if conf == language.No {
		return Languages[0]
	}
	return Languages[i]
}

// timeZone is the organiser's time zone, as their browser said it (a
// cookie the console's script sets), else the configured one.
func (h *Handler) timeZone(r *http.Request) *time.Location {
	if c, err := r.Cookie(timeZoneCookie); err == nil && c.Value != "" && len(c.Value) < 64 && !strings.Contains(c.Value, "..") {
		if loc, err := time.LoadLocation(c.Value); err == nil {
			return loc
		}
	}
	return h.cfg.TimeZone
}

// setLanguage keeps the organiser's choice of language for a year and
// sends them back to the page they chose it on.
func (h *Handler) setLanguage(w http.ResponseWriter, r *http.Request) {
	lang := r.PostFormValue("lang")
	if _, secret, ok, _ := h.session(r); ok && !validCSRF(r, csrfToken(secret)) {
		h.renderError(w, h.openRequest(r), http.StatusForbidden, "error.csrf")
		return
	}
	if !slices.Contains(Languages, lang) {
		h.renderError(w, h.openRequest(r), http.StatusBadRequest, "error.bad_language")
		return
	}
	http.SetCookie(w, &http.Cookie{Name: languageCookie, Value: lang, Path: Prefix, MaxAge: 365 * 24 * 3600,
		HttpOnly: true, Secure: h.secure, SameSite: http.SameSiteLaxMode})
	http.Redirect(w, r, safeBack(r.PostFormValue("back")), http.StatusSeeOther)
}
