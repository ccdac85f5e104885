package deploy

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// errorFile is the line of the http-errors section that names a file.
var errorFile = regexp.MustCompile(`(?m)^\s*errorfile (\d{3}) \$\{HAPROXY_ERRORS_DIR\}/(\S+)$`)

// TestHAProxyErrorFilesAreTheAPIsErrorShape reads each answer the proxy
// gives itself: a complete HTTP response of the status its name says,
// with the exact Content-Length, JSON in the API's error shape (code and
// message, nothing else), and Retry-After on every 5xx, whose code is
// unavailable as the API's 503. The http-errors section of haproxy.cfg
// names each file once.
func TestHAProxyErrorFilesAreTheAPIsErrorShape(t *testing.T) {
	t.Parallel()
	cfg, err := os.ReadFile("haproxy/haproxy.cfg")
	require.NoError(t, err)
	var named []string
	for _, m := range errorFile.FindAllStringSubmatch(string(cfg), -1) {
		require.Equal(t, m[1]+".http", m[2])
		named = append(named, m[2])
	}
	files, err := filepath.Glob("haproxy/errors/*.http")
	require.NoError(t, err)
	var onDisk []string
	for _, f := range files {
		onDisk = append(onDisk, filepath.Base(f))
	}
	require.Equal(t, onDisk, slices.Sorted(slices.Values(named)), "haproxy.cfg names every error file, once")
	for _, must := range []string{"502.http", "503.http", "504.http", "404.http"} {
		require.Contains(t, onDisk, must)
	}

	for _, name := range onDisk {
		raw, err := os.ReadFile(filepath.Join("haproxy/errors", name))
		require.NoError(t, err)
		require.NotContains(t, strings.ReplaceAll(string(raw), "\r\n", ""), "\n", "%s: CRLF line ends", name)
		resp, err := http.ReadResponse(bufio.NewReader(bytes.NewReader(raw)), nil)
		require.NoError(t, err, name)
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err, name)
		status, _ := strconv.Atoi(strings.TrimSuffix(name, ".http"))
		require.Equal(t, status, resp.StatusCode, name)
		require.EqualValues(t, len(body), resp.ContentLength, "%s: Content-Length", name)
		require.Equal(t, "application/json; charset=utf-8", resp.Header.Get("Content-Type"), name)
		require.Equal(t, "nosniff", resp.Header.Get("X-Content-Type-Options"), name)

		var shape struct {
			Error struct{ Code, Message string } `json:"error"`
		}
		dec := json.NewDecoder(bytes.NewReader(body))
		dec.DisallowUnknownFields()
		require.NoError(t, dec.Decode(&shape), "%s: %s", name, body)
		require.NotEmpty(t, shape.Error.Message, name)
		if status > 500 {
			require.Equal(t, "unavailable", shape.Error.Code, name)
			require.Equal(t, "1", resp.Header.Get("Retry-After"), name)
		}
	}
}

// TestDeployDocShowsTheFilesAsTheyAre checks that docs/deploy.md shows
// the configuration files of deploy/ whole and unchanged, so that what an
// operator copies is what the tests run.
func TestDeployDocShowsTheFilesAsTheyAre(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("../docs/deploy.md")
	require.NoError(t, err)
	for _, f := range []string{"haproxy/haproxy.cfg", "pgbouncer/pgbouncer.ini", "pgbouncer/userlist.txt"} {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		require.Contains(t, string(doc), "\n"+string(b)+"```\n", "docs/deploy.md shows deploy/%s as it is, in a code block", f)
	}
}
