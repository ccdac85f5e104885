package console

import (
	"crypto/sha512"
	"encoding/base64"
	"encoding/json"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestVendoredJSQRIsTheOneTheDoorLoads: the QR decoder embedded is the
// one whose integrity the door's script element carries (and its notes
// name), with its licence.
func TestVendoredJSQRIsTheOneTheDoorLoads(t *testing.T) {
	t.Parallel()
	js, err := fs.ReadFile(staticFiles, "static/"+doorJSQR)
	require.NoError(t, err)
	sum := sha512.Sum384(js)
	integrity := "sha384-" + base64.StdEncoding.EncodeToString(sum[:])
	require.Equal(t, doorJSQRIntegrity, integrity)
	notes, err := fs.ReadFile(staticFiles, "static/door/vendor/jsqr-1.4.0/README.md")
	require.NoError(t, err)
	require.Contains(t, string(notes), "`jsqr@1.4.0`")
	require.Contains(t, string(notes), base64.StdEncoding.EncodeToString(sum[:]))
	lic, err := fs.ReadFile(staticFiles, "static/door/vendor/jsqr-1.4.0/LICENSE")
	require.NoError(t, err)
	require.Contains(t, string(lic), "Apache License")
}

// TestTheDoorWorkerIsServed: the service worker is served without a
// session, as a script no cache keeps, with the version of the static
// files and the door's own files put in.
func TestTheDoorWorkerIsServed(t *testing.T) {
	t.Parallel()
	h, err := New(Config{})
	require.NoError(t, err)
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, Prefix+"/doors/sw.js", nil))
	require.Equal(t, http.StatusOK, w.Code)
	require.Equal(t, "text/javascript; charset=utf-8", w.Header().Get("Content-Type"))
	require.Equal(t, "no-cache", w.Header().Get("Cache-Control"))
	body := w.Body.String()
	require.NotContains(t, body, "__DOOR_")
	require.Regexp(t, `const VERSION = "[0-9a-f]{16}";`, body)
	m := regexp.MustCompile(`const ASSETS = (\[.*\]);`).FindStringSubmatch(body)
	require.NotNil(t, m)
	var assets []string
	require.NoError(t, json.Unmarshal([]byte(m[1]), &assets))
	require.Equal(t, []string{"/console/static/door/door.css", "/console/static/door/door.js", "/console/static/" + doorJSQR}, assets)
	for _, a := range assets {
		r := httptest.NewRecorder()
		h.ServeHTTP(r, httptest.NewRequest(http.MethodGet, a, nil))
		require.Equal(t, http.StatusOK, r.Code, a)
	}
}
