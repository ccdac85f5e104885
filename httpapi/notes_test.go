package httpapi_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd/internal/test/apptest"
)

// noteBody is the documented shape of every note answer, with pointers so
// that a missing field fails the test.
type noteBody struct {
	NoteID *string `json:"note_id"`
	Views  *int64  `json:"views"`
	Waters *int64  `json:"waters"`
}

func requireNoteStats(t *testing.T, r apptest.Response, id string, views, waters int64) {
	t.Helper()
	require.Equal(t, http.StatusOK, r.Status, "body: %s", r.Body)
	require.Equal(t, "application/json; charset=utf-8", r.Header.Get("Content-Type"))
	var b noteBody
	dec := json.NewDecoder(bytes.NewReader(r.Body))
	dec.DisallowUnknownFields()
	require.NoError(t, dec.Decode(&b), "body: %s", r.Body)
	require.NotNil(t, b.NoteID, "body: %s", r.Body)
	require.NotNil(t, b.Views, "body: %s", r.Body)
	require.NotNil(t, b.Waters, "body: %s", r.Body)
	require.Equal(t, id, *b.NoteID)
	require.Equal(t, views, *b.Views, "views")
	require.Equal(t, waters, *b.Waters, "waters")
}

func TestNoteRoutesFollowTheContract(t *testing.T) {
	t.Parallel()
	inst := apptest.Start(t, apptest.Options{NoRedis: true})
	id := "Note_1-" + strings.Repeat("x", 121) // 128 characters: the longest id

	requireNoteStats(t, inst.MustDo(t, http.MethodGet, "/v1/notes/"+id+"/stats", "", nil), id, 0, 0)
	requireNoteStats(t, inst.MustDo(t, http.MethodPost, "/v1/notes/"+id+"/views", "", nil), id, 1, 0)
	requireNoteStats(t, inst.MustDo(t, http.MethodPost, "/v1/notes/"+id+"/views", "", "{}"), id, 2, 0)
	requireNoteStats(t, inst.MustDo(t, http.MethodPost, "/v1/notes/"+id+"/waters", "", nil), id, 2, 1)
	requireNoteStats(t, inst.MustDo(t, http.MethodGet, "/v1/notes/"+id+"/stats", "", nil), id, 2, 1)
	// Public routes: a token (even a bad one) is neither needed nor checked.
	requireNoteStats(t, inst.MustDo(t, http.MethodPost, "/v1/notes/"+id+"/waters", inst.Token(t, "u", false), nil), id, 2, 2)
	// A percent-encoded valid character names the same note.
	requireNoteStats(t, inst.MustDo(t, http.MethodGet, "/v1/notes/"+strings.Replace(id, "N", "%4E", 1)+"/stats", "", nil), id, 2, 2)
	// Ids are case-sensitive: another note.
	requireNoteStats(t, inst.MustDo(t, http.MethodGet, "/v1/notes/NOTE/stats", "", nil), "NOTE", 0, 0)

	// Bad bodies count nothing.
	for _, body := range []string{`{"views":1}`, `[]`, `{`, `1`, `{} {}`} {
		r := inst.MustDo(t, http.MethodPost, "/v1/notes/"+id+"/views", "", body)
		requireErrorShape(t, r, http.StatusBadRequest, "invalid_request")
	}
	r := inst.MustDo(t, http.MethodPost, "/v1/notes/"+id+"/views", "", strings.Repeat(" ", 70_000))
	requireErrorShape(t, r, http.StatusRequestEntityTooLarge, "payload_too_large")
	requireNoteStats(t, inst.MustDo(t, http.MethodGet, "/v1/notes/"+id+"/stats", "", nil), id, 2, 2)

	r = inst.MustDo(t, http.MethodDelete, "/v1/notes/"+id+"/views", "", nil)
	require.Equal(t, http.StatusMethodNotAllowed, r.Status, "%s", r.Body)
}

func TestBadNoteIDsAre400(t *testing.T) {
	t.Parallel()
	inst := apptest.Start(t, apptest.Options{NoRedis: true})
	bad := []string{
		"",                       // empty
		strings.Repeat("a", 129), // too long
		strings.Repeat("%41", 129),
		"a.b", "a+b", "a~b", "a:b", "a@b", "a!b", "a$b", "a'b", "a(b)", "a*b", "a,b", "a;b", "a=b",
		"%20", "a%20b", "%00", "a%00", "%2F", "a%2Fb", "%2e%2e", "..", "%25", "%C3%A9", "caf%C3%A9", "%FF%FE",
		"%0A", "%0D%0A", "a%7Fb", "%3Cscript%3E", "%22", "%5C", "%E2%80%8B", "%3F", "a%3Fb=1", "%23",
	}
	for _, id := range bad {
		for _, rt := range []struct{ method, suffix string }{
			{http.MethodPost, "/views"}, {http.MethodPost, "/waters"}, {http.MethodGet, "/stats"},
		} {
			t.Run(rt.method+" "+id+rt.suffix, func(t *testing.T) {
				r := inst.MustDo(t, rt.method, "/v1/notes/"+id+rt.suffix, "", nil)
				requireErrorShape(t, r, http.StatusBadRequest, "invalid_request")
			})
		}
	}
	// Nothing was written by any of them.
	var n int
	require.NoError(t, inst.App.Pool.QueryRow(t.Context(), `SELECT count(*) FROM note_stats`).Scan(&n))
	require.Zero(t, n)
}

// TestRawBytesInNoteIDs sends what no HTTP client would (raw control and
// invalid UTF-8 bytes, and escapes that do not decode) straight to the
// handler.
func TestRawBytesInNoteIDs(t *testing.T) {
	t.Parallel()
	inst := apptest.Start(t, apptest.Options{NoRedis: true})
	h := inst.App.Server.Handler()
	for _, raw := range []string{"a\x00b", "\xff\xfe", "\xc3\x28", "a\r\nb", "a\tb", "%zz", "%", "a%4", "%%41"} {
		for _, rt := range []struct{ method, suffix string }{
			{http.MethodPost, "/views"}, {http.MethodPost, "/waters"}, {http.MethodGet, "/stats"},
		} {
			path := "/v1/notes/" + raw + rt.suffix
			u := &url.URL{Path: path}
			if strings.Contains(raw, "%") {
				u.RawPath = path
			}
			req := &http.Request{
				Method: rt.method, URL: u, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
				Header: http.Header{}, Body: io.NopCloser(strings.NewReader("")),
				Host: "capacityd.test", RemoteAddr: "192.0.2.1:1234", RequestURI: path,
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			t.Run(strings.ToValidUTF8(rt.method+" "+path, "?"), func(t *testing.T) {
				requireErrorShape(t, apptest.Response{Status: rec.Code, Header: rec.Header(), Body: rec.Body.Bytes()},
					http.StatusBadRequest, "invalid_request")
			})
		}
	}
}
