package clienttest

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/routers/gorillamux"
	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd/api"
	"github.com/physiciansnet/capacityd/client"
	"github.com/physiciansnet/capacityd/internal/test/apicheck"
)

// contractServer answers every request with the example that
// api/openapi.yaml records for the operation: the first 2xx, or the status
// set with answer. The client talks to it through apicheck, so the
// requests it builds are checked against the description too.
type contractServer struct {
	srv    *httptest.Server
	client *client.Client
	mu     sync.Mutex
	status map[string]int // operationId -> status to answer
	last   *http.Request
}

func newContractServer(t *testing.T) *contractServer {
	t.Helper()
	doc, err := openapi3.NewLoader().LoadFromData(api.OpenAPI)
	require.NoError(t, err)
	router, err := gorillamux.NewRouter(doc)
	require.NoError(t, err)
	cs := &contractServer{status: map[string]int{}}
	cs.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		cs.mu.Lock()
		cs.last = r.Clone(r.Context())
		cs.mu.Unlock()
		route, _, err := router.FindRoute(r)
		if err != nil {
			t.Errorf("contract server: %s %s: %v", r.Method, r.URL, err)
			w.WriteHeader(http.StatusNotFound)
			return
		}
		cs.answer(t, w, route.Operation)
	}))
	t.Cleanup(cs.srv.Close)
	checker, err := apicheck.Default()
	require.NoError(t, err)
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &apicheck.Transport{Checker: checker,
		Report: func(err error) { t.Errorf("apicheck: %v", err) }}}
	cs.client = client.New(cs.srv.URL, "token", hc)
	return cs
}

// answer writes the recorded example of op's response.
func (cs *contractServer) answer(t *testing.T, w http.ResponseWriter, op *openapi3.Operation) {
	cs.mu.Lock()
	status := cs.status[op.OperationID]
	cs.mu.Unlock()
	if status == 0 {
		var codes []string
		for code := range op.Responses.Map() {
			if strings.HasPrefix(code, "2") {
				codes = append(codes, code)
			}
		}
		sort.Strings(codes)
		require.NotEmpty(t, codes, op.OperationID)
		status, _ = strconv.Atoi(codes[0])
	}
	resp := op.Responses.Status(status).Value
	for name, h := range resp.Headers {
		if h.Value.Required {
			w.Header().Set(name, exampleHeader(name))
		}
	}
	if len(resp.Content) == 0 {
		w.WriteHeader(status)
		return
	}
	for ctype, mt := range resp.Content {
		if mt.Example == nil {
			t.Errorf("api/openapi.yaml records no example of %s %d %s", op.OperationID, status, ctype)
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		body, _ := json.Marshal(mt.Example)
		if s, ok := mt.Example.(string); ok {
			body = []byte(s) // CSV, event streams: the text itself
		}
		w.Header().Set("Content-Type", ctype+"; charset=utf-8")
		w.WriteHeader(status)
		_, _ = w.Write(body)
		return
	}
}

func exampleHeader(name string) string {
	switch name {
	case "Retry-After":
		return "1"
	case "Allow":
		return "GET"
	}
	return "/v1/example"
}

// answerWith makes the server answer op with status.
func (cs *contractServer) answerWith(op string, status int) {
	cs.mu.Lock()
	cs.status[op] = status
	cs.mu.Unlock()
}

// lastURL returns the path and query of the last request.
func (cs *contractServer) lastURL() string {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	return cs.last.URL.RequestURI()
}

func TestContractListsAndFeeds(t *testing.T) {
	t.Parallel()
	cs := newContractServer(t)
	c := ctx(t)

	acts, err := cs.client.ListActivities(c, client.ListOptions{Limit: 2, Cursor: "YTE3"})
	require.NoError(t, err)
	require.Equal(t, "/v1/activities?cursor=YTE3&limit=2", cs.lastURL())
	require.Len(t, acts.Items, 1)
	require.True(t, acts.Items[0].Waitlist)
	require.Equal(t, 83, acts.Items[0].Remaining)
	require.Equal(t, "YV8wMUpEUThaQjdRMVczTjhZNlYwSzJINU00Qw", *acts.NextCursor, "the example page of the contract")

	mine, err := cs.client.MyRegistrations(c, client.ListOptions{})
	require.NoError(t, err)
	require.Equal(t, "/v1/me/registrations", cs.lastURL())
	require.Len(t, mine.Items, 1)
	require.Nil(t, mine.NextCursor)
	require.Nil(t, mine.Items[0].WaitlistPosition)
	require.Nil(t, mine.Items[0].ConfirmedAt)
	require.Nil(t, mine.Items[0].CancelReason)

	page, err := cs.client.ListRegistrations(c, "a_1", client.RegistrationListOptions{Status: client.AwaitingPayment, Limit: 50})
	require.NoError(t, err)
	require.Equal(t, "/v1/activities/a_1/registrations?limit=50&status=awaiting_payment", cs.lastURL())
	require.Equal(t, time.Date(2026, 11, 29, 10, 18, 0, 0, time.UTC), page.Items[0].ExpiresAt.UTC())

	feed, err := cs.client.ActivityEvents(c, "a_1", client.EventFeedOptions{After: 411, Limit: 10, WaitSeconds: 30})
	require.NoError(t, err)
	require.Equal(t, "/v1/activities/a_1/events?after=411&limit=10&wait=30", cs.lastURL())
	require.Equal(t, int64(415), feed.NextAfter)
	ev := feed.Items[0]
	require.Equal(t, "registration.promoted", ev.Type)
	require.Equal(t, client.Waitlisted, *ev.From)
	require.Equal(t, client.Pending, ev.To)
	require.Equal(t, "system", ev.Actor)
	require.Nil(t, ev.BlockID)
	blk := feed.Items[1]
	require.Equal(t, "block.deleted", blk.Type, "a block event decodes into Event")
	require.Equal(t, "b_01JDQ8Y4K2M6P8R0T2V4X6Z8B0", *blk.BlockID)
	require.Equal(t, 17, blk.Seats)
	require.Empty(t, blk.RegistrationID)
	door := feed.Items[2]
	require.Equal(t, "registration.checked_in", door.Type, "a check-in event decodes into Event")
	require.Equal(t, "cl_01JDQ9A2B4C6D8E0F2G4H6J8K0", door.ListID)
	require.Equal(t, "hall-a-1", door.Device)
	require.False(t, door.Forced)
	require.Nil(t, door.Conflict)
	require.Empty(t, ev.ListID, "a registration event that is no check-in has no list")
	require.Empty(t, ev.Reason, "only a release has a reason")
	rel := feed.Items[3]
	require.Equal(t, "registration.released", rel.Type)
	require.Equal(t, client.CancelReasonNoShow, rel.Reason)
	require.Equal(t, client.Cancelled, rel.To)
	require.Equal(t, "system", rel.Actor)

	events, err := cs.client.RegistrationEvents(c, "r_1")
	require.NoError(t, err)
	require.Equal(t, "/v1/registrations/r_1/events", cs.lastURL())
	require.Len(t, events, 1)
	require.Nil(t, events[0].From)
	require.Equal(t, "user:bob", events[0].Actor)

	csv, err := cs.client.ExportRegistrations(c, "a_1", client.Pending)
	require.NoError(t, err)
	b, err := io.ReadAll(csv)
	require.NoError(t, err)
	require.NoError(t, csv.Close())
	require.Equal(t, "/v1/activities/a_1/registrations.csv?status=pending", cs.lastURL())
	require.True(t, strings.HasPrefix(string(b), "id,user_id,status,created_at,updated_at,expires_at,metadata,seats,block_id\n"), string(b))
}

func TestContractSignupWaitlisted(t *testing.T) {
	t.Parallel()
	cs := newContractServer(t)
	c := ctx(t)
	cs.answerWith("signup", http.StatusAccepted)
	res, err := cs.client.Signup(c, "a_1", client.SignupOptions{IdempotencyKey: "k-1"})
	require.NoError(t, err)
	require.True(t, res.Waitlisted)
	require.False(t, res.Replayed)
	require.Equal(t, client.Waitlisted, res.Registration.Status)
	require.Equal(t, 3, *res.Registration.WaitlistPosition)

	cs.answerWith("signup", http.StatusConflict)
	_, err = cs.client.Signup(c, "a_1", client.SignupOptions{})
	e := requireCode(t, err, http.StatusConflict, client.CodeAlreadyRegistered)
	require.Equal(t, "r_01JDQ90M2X7C4B9E1T6R3Y8W5Z", e.RegistrationID)

	cs.answerWith("getActivity", http.StatusServiceUnavailable)
	_, err = cs.client.GetActivity(c, "a_1")
	e = requireCode(t, err, http.StatusServiceUnavailable, client.CodeUnavailable)
	require.Equal(t, time.Second, e.RetryAfter)
}

func TestContractWebhooks(t *testing.T) {
	t.Parallel()
	cs := newContractServer(t)
	c := ctx(t)
	w, err := cs.client.CreateWebhook(c, client.NewWebhook{URL: "https://example.org/hooks/capacity", Events: []string{"registration.promoted"}})
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(w.Secret, "whsec_"))
	require.Nil(t, w.ActivityID)

	list, err := cs.client.ListWebhooks(c)
	require.NoError(t, err)
	require.Len(t, list, 1)
	require.Empty(t, list[0].Secret)

	got, err := cs.client.GetWebhook(c, w.ID)
	require.NoError(t, err)
	require.Equal(t, "/v1/webhooks/"+w.ID, cs.lastURL())
	require.Equal(t, []string{"*"}, got.Events)
	require.Equal(t, "a_01JDQ8ZB7Q1W3N8Y6V0K2H5M4C", *got.ActivityID)

	ds, err := cs.client.Deliveries(c, w.ID, 20)
	require.NoError(t, err)
	require.Equal(t, "/v1/webhooks/"+w.ID+"/deliveries?limit=20", cs.lastURL())
	require.Len(t, ds, 2)
	require.Equal(t, "pending", ds[0].State)
	require.Equal(t, 500, *ds[0].LastStatusCode)
	require.Nil(t, ds[0].DeliveredAt)
	require.NotNil(t, ds[1].DeliveredAt)

	as, err := cs.client.DeliveryAttempts(c, w.ID, ds[0].EventID)
	require.NoError(t, err)
	require.Equal(t, "/v1/webhooks/"+w.ID+"/deliveries/"+ds[0].EventID+"/attempts", cs.lastURL())
	require.Len(t, as, 3)
	require.Equal(t, 1, as[0].Attempt)
	require.Nil(t, as[0].StatusCode)
	require.Contains(t, *as[0].Error, "timeout")
	require.Equal(t, 10000.412, as[0].DurationMS)
	require.Equal(t, 500, *as[1].StatusCode)
	require.Nil(t, as[1].Error)
	require.True(t, as[2].At.After(as[1].At))
	cs.answerWith("listDeliveryAttempts", http.StatusNotFound)
	_, err = cs.client.DeliveryAttempts(c, w.ID, "ev_1_1")
	requireCode(t, err, http.StatusNotFound, client.CodeNotFound)

	require.NoError(t, cs.client.DeleteWebhook(c, w.ID))
	cs.answerWith("deleteWebhook", http.StatusNotFound)
	requireCode(t, cs.client.DeleteWebhook(c, w.ID), http.StatusNotFound, client.CodeNotFound)
}

func TestContractPools(t *testing.T) {
	t.Parallel()
	cs := newContractServer(t)
	c := ctx(t)
	p, err := cs.client.CreatePool(c, client.NewPool{Title: "Main hall", Capacity: 200})
	require.NoError(t, err)
	require.Equal(t, "/v1/pools", cs.lastURL())
	require.Equal(t, 200, p.Remaining)
	require.Equal(t, []string{}, p.Activities)
	require.Empty(t, p.Source)

	got, err := cs.client.GetPool(c, p.ID)
	require.NoError(t, err)
	require.Equal(t, "/v1/pools/"+p.ID, cs.lastURL())
	require.Equal(t, "cache", got.Source)
	require.Equal(t, 163, got.Remaining)
	require.Len(t, got.Activities, 2)

	page, err := cs.client.ListPools(c, client.ListOptions{Limit: 10, Cursor: "cF8x"})
	require.NoError(t, err)
	require.Equal(t, "/v1/pools?cursor=cF8x&limit=10", cs.lastURL())
	require.Len(t, page.Items, 1)
	require.Nil(t, page.NextCursor)

	changed, err := cs.client.UpdatePool(c, p.ID, client.PoolPatch{Capacity: new(250)})
	require.NoError(t, err)
	require.Equal(t, 250, changed.Capacity)

	a, err := cs.client.UpdateActivity(c, "a_1", client.ActivityPatch{Pools: &[]string{}})
	require.NoError(t, err)
	require.Equal(t, "/v1/activities/a_1", cs.lastURL())
	require.Equal(t, []string{}, a.Pools)

	cs.answerWith("getPool", http.StatusNotFound)
	_, err = cs.client.GetPool(c, "p_1")
	requireCode(t, err, http.StatusNotFound, client.CodeNotFound)
}

func TestContractSeries(t *testing.T) {
	t.Parallel()
	cs := newContractServer(t)
	c := ctx(t)
	s, err := cs.client.CreateSeries(c, client.NewSeries{Title: "Spring workshops", MaxPerUser: 2})
	require.NoError(t, err)
	require.Equal(t, "/v1/series", cs.lastURL())
	require.Equal(t, "Spring workshops", s.Title)
	require.Equal(t, 2, s.MaxPerUser)

	got, err := cs.client.GetSeries(c, s.ID)
	require.NoError(t, err)
	require.Equal(t, "/v1/series/"+s.ID, cs.lastURL())
	require.Equal(t, s, got)

	page, err := cs.client.ListSeries(c, client.ListOptions{Limit: 10, Cursor: "c18x"})
	require.NoError(t, err)
	require.Equal(t, "/v1/series?cursor=c18x&limit=10", cs.lastURL())
	require.Len(t, page.Items, 1)
	require.Nil(t, page.NextCursor)

	changed, err := cs.client.UpdateSeries(c, s.ID, client.SeriesPatch{MaxPerUser: new(3)})
	require.NoError(t, err)
	require.Equal(t, 3, changed.MaxPerUser)

	// Both forms of a patch's series_id keep to the description.
	a, err := cs.client.UpdateActivity(c, "a_1", client.ActivityPatch{SeriesID: new("")})
	require.NoError(t, err)
	require.Nil(t, a.SeriesID)
	_, err = cs.client.UpdateActivity(c, "a_1", client.ActivityPatch{SeriesID: &s.ID})
	require.NoError(t, err)
	acts, err := cs.client.ListActivities(c, client.ListOptions{})
	require.NoError(t, err)
	require.Equal(t, s.ID, *acts.Items[0].SeriesID)

	cs.answerWith("getSeries", http.StatusNotFound)
	_, err = cs.client.GetSeries(c, "s_1")
	requireCode(t, err, http.StatusNotFound, client.CodeNotFound)
}

func TestContractBlocks(t *testing.T) {
	t.Parallel()
	cs := newContractServer(t)
	c := ctx(t)
	until := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	b, err := cs.client.CreateBlock(c, "a_1", client.NewBlock{Seats: 20, Code: "SPEAKERS-27", ExpiresAt: &until})
	require.NoError(t, err)
	require.Equal(t, "/v1/activities/a_1/blocks", cs.lastURL())
	require.Equal(t, 20, b.Seats)
	require.Equal(t, "SPEAKERS-27", *b.Code)
	require.Nil(t, b.Role)
	require.Nil(t, b.ExpiresAt)
	_, err = cs.client.CreateBlock(c, "a_1", client.NewBlock{Seats: 10, Role: "resident"})
	require.NoError(t, err, "a role block keeps to the description too")

	blocks, err := cs.client.ListBlocks(c, "a_1")
	require.NoError(t, err)
	require.Equal(t, "/v1/activities/a_1/blocks", cs.lastURL())
	require.Len(t, blocks, 2)
	require.Equal(t, 3, blocks[0].Used)
	require.Equal(t, "resident", *blocks[1].Role)
	require.Equal(t, time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC), blocks[1].ExpiresAt.UTC())

	require.NoError(t, cs.client.DeleteBlock(c, b.ID))
	require.Equal(t, "/v1/blocks/"+b.ID, cs.lastURL())

	_, err = cs.client.Signup(c, "a_1", client.SignupOptions{Code: "SPEAKERS-27"})
	require.NoError(t, err, "a signup with a code keeps to the description")

	cs.answerWith("createBlock", http.StatusConflict)
	_, err = cs.client.CreateBlock(c, "a_1", client.NewBlock{Seats: 20, Code: "SPEAKERS-27"})
	requireCode(t, err, http.StatusConflict, client.CodeActivityFull)
	cs.answerWith("deleteBlock", http.StatusNotFound)
	requireCode(t, cs.client.DeleteBlock(c, "b_1"), http.StatusNotFound, client.CodeNotFound)
}

// TestActivityPatchSeriesID checks the three forms of a patch's series_id:
// absent, null (leave the series) and an id.
func TestActivityPatchSeriesID(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		patch client.ActivityPatch
		want  string
	}{
		{client.ActivityPatch{Title: new("x")}, `{"title":"x"}`},
		{client.ActivityPatch{SeriesID: new("")}, `{"series_id":null}`},
		{client.ActivityPatch{SeriesID: new("s_1"), Pools: &[]string{}}, `{"pools":[],"series_id":"s_1"}`},
	} {
		b, err := json.Marshal(tc.patch)
		require.NoError(t, err)
		require.JSONEq(t, tc.want, string(b))
	}
	b, err := json.Marshal(&client.ActivityPatch{SeriesID: new("")})
	require.NoError(t, err)
	require.JSONEq(t, `{"series_id":null}`, string(b), "a pointer to a patch too")
}

func TestContractCheckin(t *testing.T) {
	t.Parallel()
	cs := newContractServer(t)
	c := ctx(t)

	tk, err := cs.client.Ticket(c, "r_1")
	require.NoError(t, err)
	require.Equal(t, "/v1/registrations/r_1/ticket", cs.lastURL())
	require.Equal(t, 2, tk.Seats)
	require.True(t, strings.HasPrefix(tk.Ticket, "eyJ"), tk.Ticket)
	svg, err := cs.client.TicketSVG(c, "r_1")
	require.NoError(t, err)
	require.Equal(t, "/v1/registrations/r_1/ticket.svg", cs.lastURL())
	require.True(t, strings.HasPrefix(string(svg), "<svg"), string(svg))
	cs.answerWith("getTicket", http.StatusConflict)
	_, err = cs.client.Ticket(c, "r_1")
	requireCode(t, err, http.StatusConflict, client.CodeTicketRevoked)
	cs.answerWith("getTicketSVG", http.StatusConflict)
	_, err = cs.client.TicketSVG(c, "r_1")
	requireCode(t, err, http.StatusConflict, client.CodeTicketRevoked)

	keys, err := cs.client.WithToken("").CheckinKeys(c)
	require.NoError(t, err)
	require.Equal(t, "/v1/checkin/keys", cs.lastURL())
	require.Len(t, keys.Keys, 1)
	require.Equal(t, client.CheckinKey{Kty: "OKP", Crv: "Ed25519", Kid: "Jq2x7Vb0cYk3TnWe", X: "R0yQuNo8WKgUBzT74-hjvu3Pq6yTG8aexQZ8wj0jq8M",
		Alg: "EdDSA", Use: "sig"}, keys.Keys[0])

	limit := 120
	l, err := cs.client.CreateCheckinList(c, client.NewCheckinList{Name: "Hall A, main door", ActivityIDs: []string{"a_1"},
		Entry: client.EntryReentry, MaxInside: &limit, DoorRoles: []string{"door-hall-a"}})
	require.NoError(t, err)
	require.Equal(t, "/v1/checkin-lists", cs.lastURL())
	require.Equal(t, client.EntryReentry, l.Entry)
	require.Equal(t, 120, *l.MaxInside)
	require.Nil(t, l.OpensAt)
	require.Equal(t, []string{"door-hall-a"}, l.DoorRoles)

	page, err := cs.client.ListCheckinLists(c, client.CheckinListOptions{ActivityID: "a_1", Limit: 10, Cursor: "Y2wx"})
	require.NoError(t, err)
	require.Equal(t, "/v1/checkin-lists?activity_id=a_1&cursor=Y2wx&limit=10", cs.lastURL())
	require.Len(t, page.Items, 1)
	require.Equal(t, 37, page.Items[0].Inside)
	require.Nil(t, page.NextCursor)

	got, err := cs.client.GetCheckinList(c, l.ID)
	require.NoError(t, err)
	require.Equal(t, "/v1/checkin-lists/"+l.ID, cs.lastURL())
	require.Equal(t, 41, got.CheckedIn)
	require.Equal(t, 1, got.Conflicts)
	require.NotNil(t, got.OpensAt)

	changed, err := cs.client.UpdateCheckinList(c, l.ID, client.CheckinListPatch{MaxInside: new(150), ClearClosesAt: true})
	require.NoError(t, err)
	require.Equal(t, 150, *changed.MaxInside)
	_, err = cs.client.UpdateCheckinList(c, l.ID, client.CheckinListPatch{ClearMaxInside: true, Entry: new(client.EntryMultiple),
		DoorRoles: &[]string{}})
	require.NoError(t, err, "every form of a patch keeps to the description")

	at := time.Date(2026, 11, 29, 9, 41, 5, 0, time.UTC)
	res, err := cs.client.Redeem(c, l.ID, client.RedeemRequest{Ticket: tk.Ticket, Device: "hall-a-1"}, "scan-42")
	require.NoError(t, err)
	require.Equal(t, "/v1/checkin-lists/"+l.ID+"/redeem", cs.lastURL())
	require.Equal(t, "entered", res.Result)
	require.True(t, res.Registration.CheckedIn)
	require.Equal(t, int64(42), res.Checkin.Seq)
	require.Equal(t, client.ScanEntry, res.Checkin.Type)
	require.Nil(t, res.Checkin.Conflict)
	require.Equal(t, 39, res.Inside)
	require.Equal(t, 120, *res.MaxInside)
	_, err = cs.client.Redeem(c, l.ID, client.RedeemRequest{RegistrationID: "r_1", Type: client.ScanExit, Device: "hall-a-1",
		Force: true, At: &at}, "")
	require.NoError(t, err, "a forced upload by registration keeps to the description")

	cs.answerWith("redeemTicket", http.StatusConflict)
	_, err = cs.client.Redeem(c, l.ID, client.RedeemRequest{Ticket: tk.Ticket, Device: "hall-a-1"}, "")
	e := requireCode(t, err, http.StatusConflict, client.CodeAlreadyCheckedIn)
	require.Equal(t, client.PreviousEntry{At: time.Date(2026, 11, 29, 9, 58, 12, 0, time.UTC), Device: "hall-a-1",
		ListID: "cl_01JDQ9A2B4C6D8E0F2G4H6J8K0"}, *e.Previous)
	cs.answerWith("redeemTicket", http.StatusBadRequest)
	_, err = cs.client.Redeem(c, l.ID, client.RedeemRequest{Ticket: "x", Device: "hall-a-1"}, "")
	requireCode(t, err, http.StatusBadRequest, client.CodeInvalidTicket)

	feed, err := cs.client.Checkins(c, l.ID, 41, 2)
	require.NoError(t, err)
	require.Equal(t, "/v1/checkin-lists/"+l.ID+"/checkins?after=41&limit=2", cs.lastURL())
	require.Equal(t, int64(43), feed.NextAfter)
	require.Len(t, feed.Items, 2)
	require.True(t, feed.Items[1].Forced)
	require.Equal(t, client.CodeTicketRevoked, *feed.Items[1].Conflict)

	sync, err := cs.client.TicketSync(c, l.ID, "Y3Vy", 1000, 30)
	require.NoError(t, err)
	require.Equal(t, "/v1/checkin-lists/"+l.ID+"/tickets?cursor=Y3Vy&limit=1000&wait=30", cs.lastURL())
	require.Len(t, sync.Items, 2)
	require.True(t, sync.Items[0].Valid)
	require.True(t, sync.Items[0].Inside)
	require.Equal(t, 1, sync.Items[0].Entries)
	require.False(t, sync.Items[1].Valid)
	require.NotEmpty(t, sync.NextCursor)

	st, err := cs.client.StreamCheckinCounts(c, l.ID)
	require.NoError(t, err)
	counts, err := st.Next()
	require.NoError(t, err)
	require.NoError(t, st.Close())
	require.Equal(t, client.CheckinCounts{ListID: "cl_01JDQ9A2B4C6D8E0F2G4H6J8K0", CheckedIn: 41, Inside: 37, MaxInside: new(120), Conflicts: 1}, counts)

	w, err := cs.client.WalkIn(c, l.ID, client.NewWalkIn{ActivityID: "a_1", UserID: "dave", Seats: 1, Device: "hall-a-1"})
	require.NoError(t, err)
	require.Equal(t, "/v1/checkin-lists/"+l.ID+"/walk-ins", cs.lastURL())
	require.Equal(t, "entered", w.Result)
	require.Equal(t, client.Pending, w.Registration.Status)
	require.NotNil(t, w.Checkin)
	cs.answerWith("walkIn", http.StatusAccepted)
	w, err = cs.client.WalkIn(c, l.ID, client.NewWalkIn{ActivityID: "a_1", UserID: "dave"})
	require.NoError(t, err)
	require.Equal(t, "waitlisted", w.Result)
	require.Nil(t, w.Checkin)
	require.Equal(t, 1, *w.Registration.WaitlistPosition)
	cs.answerWith("walkIn", http.StatusConflict)
	_, err = cs.client.WalkIn(c, l.ID, client.NewWalkIn{ActivityID: "a_1", UserID: "dave"})
	e = requireCode(t, err, http.StatusConflict, client.CodeRoomFull)
	require.Equal(t, 120, *e.Inside)
	require.Equal(t, 120, *e.MaxInside)

	require.NoError(t, cs.client.DeleteCheckinList(c, l.ID))
	require.Equal(t, "/v1/checkin-lists/"+l.ID, cs.lastURL())
	cs.answerWith("getCheckinList", http.StatusForbidden)
	_, err = cs.client.GetCheckinList(c, l.ID)
	requireCode(t, err, http.StatusForbidden, client.CodeForbidden)
}

func TestContractAttendance(t *testing.T) {
	t.Parallel()
	cs := newContractServer(t)
	c := ctx(t)

	r, err := cs.client.Confirm(c, "r_1")
	require.NoError(t, err)
	require.Equal(t, "/v1/registrations/r_1/confirm", cs.lastURL())
	require.Equal(t, time.Date(2026, 12, 1, 8, 30, 0, 0, time.UTC), r.ConfirmedAt.UTC())
	require.Nil(t, r.CancelReason)
	cs.answerWith("confirmRegistration", http.StatusConflict)
	_, err = cs.client.Confirm(c, "r_1")
	requireCode(t, err, http.StatusConflict, client.CodeConfirmationClosed)
	cs.answerWith("confirmRegistration", http.StatusNotFound)
	_, err = cs.client.Confirm(c, "r_1")
	requireCode(t, err, http.StatusNotFound, client.CodeNotFound)

	page, err := cs.client.ActivityAttendance(c, "a_1", "Y3Vy", 2)
	require.NoError(t, err)
	require.Equal(t, "/v1/activities/a_1/attendance?cursor=Y3Vy&limit=2", cs.lastURL())
	require.Equal(t, client.AttendanceSummary{Registered: 4, CheckedIn: 3, NoShow: 1, NoShowRate: 0.25}, page.Summary)
	require.Len(t, page.Items, 2)
	alice := page.Items[0]
	require.True(t, alice.CheckedIn)
	require.Equal(t, 6300, *alice.Seconds)
	require.Equal(t, 87.5, *alice.Percent)
	require.True(t, alice.Eligible)
	require.Equal(t, client.Approved, alice.Status)
	require.Nil(t, page.Items[1].FirstEntryAt)
	require.False(t, page.Items[1].Eligible)
	require.NotNil(t, page.NextCursor)
	cs.answerWith("getActivityAttendance", http.StatusForbidden)
	_, err = cs.client.ActivityAttendance(c, "a_1", "", 0)
	requireCode(t, err, http.StatusForbidden, client.CodeForbidden)

	csv, err := cs.client.ExportAttendance(c, "a_1")
	require.NoError(t, err)
	b, err := io.ReadAll(csv)
	require.NoError(t, err)
	require.NoError(t, csv.Close())
	require.Equal(t, "/v1/activities/a_1/attendance.csv", cs.lastURL())
	require.True(t, strings.HasPrefix(string(b), "registration_id,user_id,seats,status,checked_in,first_entry_at,seconds,percent,eligible\n"), string(b))

	mine, err := cs.client.RegistrationAttendance(c, "r_1")
	require.NoError(t, err)
	require.Equal(t, "/v1/registrations/r_1/attendance", cs.lastURL())
	require.Equal(t, "r_01JDQ90M2X7C4B9E1T6R3Y8W5Z", mine.RegistrationID)
	require.True(t, mine.Eligible)
	require.True(t, strings.HasPrefix(*mine.Statement, "eyJ"), *mine.Statement)

	sa, err := cs.client.SeriesAttendance(c, "s_1", 120, 0.05)
	require.NoError(t, err)
	require.Equal(t, "/v1/series/s_1/attendance?risk=0.05&room=120", cs.lastURL())
	require.Equal(t, 6, sa.Activities)
	require.Equal(t, 0.85, *sa.ShowRate)
	require.Equal(t, 134, *sa.SuggestedCapacity)
	_, err = cs.client.SeriesAttendance(c, "s_1", 0, 0)
	require.NoError(t, err)
	require.Equal(t, "/v1/series/s_1/attendance", cs.lastURL())
	cs.answerWith("getSeriesAttendance", http.StatusBadRequest)
	_, err = cs.client.SeriesAttendance(c, "s_1", 120, 0.05)
	requireCode(t, err, http.StatusBadRequest, client.CodeInvalidRequest)

	// The activity's attendance settings, sent and read, keep to the
	// description in every form.
	start, end := time.Date(2026, 12, 3, 9, 0, 0, 0, time.UTC), time.Date(2026, 12, 3, 11, 0, 0, 0, time.UTC)
	confirmBy := time.Date(2026, 12, 2, 18, 0, 0, 0, time.UTC)
	_, err = cs.client.CreateActivity(c, client.NewActivity{Title: "Rounds", Capacity: 120, StartsAt: &start, EndsAt: &end,
		AttendancePercent: new(80), ConfirmBy: &confirmBy, ReleaseNoShowsAfterMinutes: new(15)})
	require.NoError(t, err)
	_, err = cs.client.UpdateActivity(c, "a_1", client.ActivityPatch{ClearStartsAt: true, ClearEndsAt: true,
		ClearAttendancePercent: true, ClearConfirmBy: true, ClearReleaseNoShowsAfterMinutes: true})
	require.NoError(t, err)
	a, err := cs.client.UpdateActivity(c, "a_1", client.ActivityPatch{ConfirmBy: &confirmBy, ReleaseNoShowsAfterMinutes: new(0)})
	require.NoError(t, err)
	require.Nil(t, a.StartsAt)
	got, err := cs.client.GetActivity(c, "a_1")
	require.NoError(t, err)
	require.Equal(t, start, got.StartsAt.UTC())
	require.Equal(t, end, got.EndsAt.UTC())
	require.Equal(t, 80, *got.AttendancePercent)
	require.Equal(t, confirmBy, got.ConfirmBy.UTC())
	require.Equal(t, 15, *got.ReleaseNoShowsAfterMinutes)
}
