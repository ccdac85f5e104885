package e2e

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd/internal/test/apptest"
)

// door is a check-in list under test on one or more instances.
type door struct {
	insts []*apptest.Instance
	admin string
	id    string
}

type listAnswer struct {
	ID        string `json:"id"`
	CheckedIn int    `json:"checked_in"`
	Inside    int    `json:"inside"`
	Conflicts int    `json:"conflicts"`
	MaxInside *int   `json:"max_inside"`
}

type scanAnswer struct {
	Result       string `json:"result"`
	Inside       int    `json:"inside"`
	Registration struct {
		ID        string `json:"id"`
		CheckedIn bool   `json:"checked_in"`
	} `json:"registration"`
	Checkin struct {
		ID       string  `json:"id"`
		Seq      int64   `json:"seq"`
		Device   string  `json:"device"`
		Forced   bool    `json:"forced"`
		Conflict *string `json:"conflict"`
		At       string  `json:"at"`
	} `json:"checkin"`
}

type errAnswer struct {
	Error struct {
		Code     string `json:"code"`
		Previous *struct {
			At     time.Time `json:"at"`
			Device string    `json:"device"`
			ListID string    `json:"list_id"`
		} `json:"previous"`
		Inside    *int `json:"inside"`
		MaxInside *int `json:"max_inside"`
	} `json:"error"`
}

// newDoor creates a list over the activities with the given fields.
func newDoor(t *testing.T, insts []*apptest.Instance, fields map[string]any) door {
	t.Helper()
	admin := insts[0].Token(t, "organiser", true)
	r := insts[0].MustDo(t, http.MethodPost, "/v1/checkin-lists", admin, fields)
	require.Equal(t, http.StatusCreated, r.Status, "%s", r.Body)
	var l listAnswer
	r.JSON(t, &l)
	return door{insts: insts, admin: admin, id: l.ID}
}

// ticket returns the ticket of a registration as its owner reads it.
func ticket(t *testing.T, inst *apptest.Instance, regID, owner string) string {
	t.Helper()
	r := inst.MustDo(t, http.MethodGet, "/v1/registrations/"+regID+"/ticket", inst.Token(t, owner, false), nil)
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	var tk struct{ Ticket string }
	r.JSON(t, &tk)
	return tk.Ticket
}

// scan redeems a body at the list through instance i.
func (d door) scan(t testing.TB, i int, token string, body map[string]any, headers ...string) apptest.Response {
	t.Helper()
	return d.insts[i%len(d.insts)].MustDo(t, http.MethodPost, "/v1/checkin-lists/"+d.id+"/redeem", token, body, headers...)
}

func (d door) read(t *testing.T) listAnswer {
	t.Helper()
	r := d.insts[0].MustDo(t, http.MethodGet, "/v1/checkin-lists/"+d.id, d.admin, nil)
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	var l listAnswer
	r.JSON(t, &l)
	return l
}

func errOf(t testing.TB, r apptest.Response) errAnswer {
	t.Helper()
	var e errAnswer
	r.JSON(t, &e)
	return e
}

// twoInstances starts two instances on one database and Redis.
func twoInstances(t *testing.T) []*apptest.Instance {
	a := apptest.Start(t, apptest.Options{})
	b := apptest.Start(t, apptest.Options{DatabaseURL: a.DatabaseURL})
	return []*apptest.Instance{a, b}
}

func TestTwentyDevicesScanOneTicketOnce(t *testing.T) {
	t.Parallel()
	insts := twoInstances(t)
	act := insts[0].CreateActivity(t, "grand rounds", 10)
	reg := insts[0].MustSignup(t, act, "alice")
	d := newDoor(t, insts, map[string]any{"name": "Hall A", "activity_ids": []string{act}})
	tk := ticket(t, insts[1], reg.ID, "alice")

	answers := make([]apptest.Response, 20)
	var wg sync.WaitGroup
	for i := range answers {
		wg.Go(func() {
			answers[i] = d.scan(t, i, d.admin, map[string]any{"ticket": tk, "device": fmt.Sprintf("door-%d", i)})
		})
	}
	wg.Wait()
	var entered scanAnswer
	refused := 0
	for _, r := range answers {
		switch r.Status {
		case http.StatusOK:
			require.Empty(t, entered.Result, "a second entry was accepted")
			r.JSON(t, &entered)
		case http.StatusConflict:
			e := errOf(t, r)
			require.Equal(t, "already_checked_in", e.Error.Code)
			require.NotNil(t, e.Error.Previous, "the refusal names the accepted entry")
			refused++
		default:
			t.Fatalf("status %d: %s", r.Status, r.Body)
		}
	}
	require.Equal(t, "entered", entered.Result)
	require.Equal(t, 19, refused)
	assert.True(t, entered.Registration.CheckedIn)
	for _, r := range answers {
		if r.Status == http.StatusConflict {
			p := errOf(t, r).Error.Previous
			assert.Equal(t, entered.Checkin.Device, p.Device)
			assert.Equal(t, d.id, p.ListID)
			at, err := time.Parse(time.RFC3339Nano, entered.Checkin.At)
			require.NoError(t, err)
			assert.True(t, at.Equal(p.At), "previous entry's time")
		}
	}
	l := d.read(t)
	assert.Equal(t, 1, l.CheckedIn)
	assert.Equal(t, 1, l.Inside)

	// The history has the one entry, and the activity's events one checked_in.
	h := insts[0].MustDo(t, http.MethodGet, "/v1/checkin-lists/"+d.id+"/checkins", d.admin, nil)
	require.Equal(t, http.StatusOK, h.Status, "%s", h.Body)
	var page struct {
		Items []struct {
			Seq  int64  `json:"seq"`
			Type string `json:"type"`
		} `json:"items"`
		NextAfter int64 `json:"next_after"`
	}
	h.JSON(t, &page)
	require.Len(t, page.Items, 1)
	assert.Equal(t, int64(1), page.NextAfter)
	evs := insts[1].MustDo(t, http.MethodGet, "/v1/registrations/"+reg.ID+"/events", d.admin, nil)
	var events struct {
		Items []struct {
			Type   string `json:"type"`
			ListID string `json:"list_id"`
			Device string `json:"device"`
			Forced *bool  `json:"forced"`
		} `json:"items"`
	}
	evs.JSON(t, &events)
	require.Len(t, events.Items, 2)
	assert.Equal(t, "registration.checked_in", events.Items[1].Type)
	assert.Equal(t, d.id, events.Items[1].ListID)
	assert.Equal(t, entered.Checkin.Device, events.Items[1].Device)
}

func TestRoomLimitHoldsAcrossDoors(t *testing.T) {
	t.Parallel()
	insts := twoInstances(t)
	act := insts[0].CreateActivity(t, "workshop", 40)
	d := newDoor(t, insts, map[string]any{"name": "Room 1", "activity_ids": []string{act}, "entry": "reentry", "max_inside": 10})
	tickets := make([]string, 30)
	for i := range tickets {
		user := fmt.Sprintf("u%d", i)
		reg := insts[0].MustSignup(t, act, user)
		tickets[i] = ticket(t, insts[0], reg.ID, user)
	}
	statuses := make([]apptest.Response, len(tickets))
	var wg sync.WaitGroup
	for i, tk := range tickets {
		wg.Go(func() {
			statuses[i] = d.scan(t, i, d.admin, map[string]any{"ticket": tk, "device": fmt.Sprintf("d%d", i%4)})
		})
	}
	wg.Wait()
	var in, out []int
	for i, r := range statuses {
		switch r.Status {
		case http.StatusOK:
			in = append(in, i)
		case http.StatusConflict:
			e := errOf(t, r)
			require.Equal(t, "room_full", e.Error.Code)
			require.Equal(t, 10, *e.Error.MaxInside)
			require.LessOrEqual(t, *e.Error.Inside, 10)
			out = append(out, i)
		default:
			t.Fatalf("status %d: %s", r.Status, r.Body)
		}
	}
	require.Len(t, in, 10, "exactly the room's limit inside")
	require.Equal(t, 10, d.read(t).Inside)

	for _, i := range in[:3] {
		r := d.scan(t, i, d.admin, map[string]any{"ticket": tickets[i], "device": "exit", "type": "exit"})
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	}
	for _, i := range out[:3] {
		r := d.scan(t, i, d.admin, map[string]any{"ticket": tickets[i], "device": "d1"})
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	}
	r := d.scan(t, 0, d.admin, map[string]any{"ticket": tickets[out[3]], "device": "d1"})
	require.Equal(t, http.StatusConflict, r.Status)
	assert.Equal(t, "room_full", errOf(t, r).Error.Code)
	l := d.read(t)
	assert.Equal(t, 10, l.Inside)
	assert.Equal(t, 13, l.CheckedIn)
}

func TestTicketValidityComesBeforeDuplicates(t *testing.T) {
	t.Parallel()
	inst := apptest.Start(t, apptest.Options{})
	act := inst.CreateActivity(t, "lecture", 5)
	other := inst.CreateActivity(t, "other lecture", 5)
	d := newDoor(t, []*apptest.Instance{inst}, map[string]any{"name": "Door", "activity_ids": []string{act}})
	reg := inst.MustSignup(t, act, "bob")
	tk := ticket(t, inst, reg.ID, "bob")
	require.Equal(t, http.StatusOK, d.scan(t, 0, d.admin, map[string]any{"ticket": tk, "device": "d"}).Status)

	cancel := inst.MustDo(t, http.MethodPost, "/v1/registrations/"+reg.ID+"/cancel", inst.Token(t, "bob", false), map[string]any{})
	require.Equal(t, http.StatusOK, cancel.Status)
	r := d.scan(t, 0, d.admin, map[string]any{"ticket": tk, "device": "d"})
	require.Equal(t, http.StatusConflict, r.Status)
	assert.Equal(t, "ticket_revoked", errOf(t, r).Error.Code, "a used, then cancelled ticket is revoked, not a duplicate")
	r = inst.MustDo(t, http.MethodGet, "/v1/registrations/"+reg.ID+"/ticket", inst.Token(t, "bob", false), nil)
	assert.Equal(t, http.StatusConflict, r.Status)
	assert.Equal(t, "ticket_revoked", r.ErrorCode())

	oreg := inst.MustSignup(t, other, "carol")
	r = d.scan(t, 0, d.admin, map[string]any{"ticket": ticket(t, inst, oreg.ID, "carol"), "device": "d"})
	assert.Equal(t, http.StatusConflict, r.Status)
	assert.Equal(t, "wrong_list", r.ErrorCode())

	for _, bad := range []string{"garbage", tk[:len(tk)-4] + "AAAA", "eyJhbGciOiJub25lIn0.eyJyZWciOiJyXzEifQ."} {
		r = d.scan(t, 0, d.admin, map[string]any{"ticket": bad, "device": "d"})
		assert.Equal(t, http.StatusBadRequest, r.Status, "%q", bad)
		assert.Equal(t, "invalid_ticket", r.ErrorCode())
	}
	svg := inst.MustDo(t, http.MethodGet, "/v1/registrations/"+oreg.ID+"/ticket.svg", inst.Token(t, "carol", false), nil)
	require.Equal(t, http.StatusOK, svg.Status)
	assert.Equal(t, "image/svg+xml", svg.Header.Get("Content-Type"))
	assert.Contains(t, string(svg.Body), "<svg")
	r = inst.MustDo(t, http.MethodGet, "/v1/registrations/"+oreg.ID+"/ticket", inst.Token(t, "mallory", false), nil)
	assert.Equal(t, http.StatusNotFound, r.Status, "someone else's ticket")
}

func TestRetriedScanIsAnsweredTheSameAndRecordedOnce(t *testing.T) {
	t.Parallel()
	inst := apptest.Start(t, apptest.Options{})
	act := inst.CreateActivity(t, "lecture", 5)
	d := newDoor(t, []*apptest.Instance{inst}, map[string]any{"name": "Door", "activity_ids": []string{act}, "entry": "multiple"})
	reg := inst.MustSignup(t, act, "dora")
	body := map[string]any{"registration_id": reg.ID, "device": "d"}
	first := d.scan(t, 0, d.admin, body, "Idempotency-Key", "scan-1")
	require.Equal(t, http.StatusOK, first.Status, "%s", first.Body)
	again := d.scan(t, 0, d.admin, body, "Idempotency-Key", "scan-1")
	require.Equal(t, http.StatusOK, again.Status)
	assert.Equal(t, "true", again.Header.Get("Idempotent-Replayed"))
	var a, b scanAnswer
	first.JSON(t, &a)
	again.JSON(t, &b)
	assert.Equal(t, a.Checkin, b.Checkin)
	// Ten retries at once (gathered into one transaction or not) answer
	// the same check-in.
	retries := make([]apptest.Response, 10)
	var wg sync.WaitGroup
	for i := range retries {
		wg.Go(func() {
			retries[i] = d.scan(t, 0, d.admin, map[string]any{"registration_id": reg.ID, "device": "d"}, "Idempotency-Key", "scan-2")
		})
	}
	wg.Wait()
	var second scanAnswer
	retries[0].JSON(t, &second)
	for _, r := range retries {
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
		var c scanAnswer
		r.JSON(t, &c)
		assert.Equal(t, second.Checkin, c.Checkin)
	}
	conflict := d.scan(t, 0, d.admin, map[string]any{"registration_id": reg.ID, "device": "other"}, "Idempotency-Key", "scan-1")
	assert.Equal(t, "idempotency_conflict", conflict.ErrorCode())
	assert.Equal(t, 1, d.read(t).CheckedIn)
	evs := inst.MustDo(t, http.MethodGet, "/v1/registrations/"+reg.ID+"/events", d.admin, nil)
	var events struct{ Items []struct{ Type string } }
	evs.JSON(t, &events)
	assert.Len(t, events.Items, 3, "created and one checked_in per key")
}

func TestOfflineUploadsAreRecordedWithTheirConflicts(t *testing.T) {
	t.Parallel()
	inst := apptest.Start(t, apptest.Options{})
	act := inst.CreateActivity(t, "lecture", 5)
	d := newDoor(t, []*apptest.Instance{inst}, map[string]any{"name": "Door", "activity_ids": []string{act}})
	reg := inst.MustSignup(t, act, "erin")
	gone := inst.MustSignup(t, act, "frank")
	tk := ticket(t, inst, reg.ID, "erin")
	goneTk := ticket(t, inst, gone.ID, "frank")
	require.Equal(t, http.StatusOK, d.scan(t, 0, d.admin, map[string]any{"ticket": tk, "device": "online"}).Status)
	require.Equal(t, http.StatusOK, inst.MustDo(t, http.MethodPost, "/v1/registrations/"+gone.ID+"/cancel", d.admin, map[string]any{}).Status)

	at := time.Now().Add(-10 * time.Minute).UTC().Format(time.RFC3339)
	r := d.scan(t, 0, d.admin, map[string]any{"ticket": tk, "device": "phone", "force": true, "at": at})
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	var dup scanAnswer
	r.JSON(t, &dup)
	assert.True(t, dup.Checkin.Forced)
	require.NotNil(t, dup.Checkin.Conflict)
	assert.Equal(t, "already_checked_in", *dup.Checkin.Conflict)
	r = d.scan(t, 0, d.admin, map[string]any{"ticket": goneTk, "device": "phone", "force": true, "at": at})
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	var rev scanAnswer
	r.JSON(t, &rev)
	assert.Equal(t, "ticket_revoked", *rev.Checkin.Conflict)
	assert.Equal(t, 2, d.read(t).Conflicts)

	r = d.scan(t, 0, d.admin, map[string]any{"ticket": tk, "device": "phone", "at": at})
	assert.Equal(t, http.StatusBadRequest, r.Status, "at without force")
	r = d.scan(t, 0, d.admin, map[string]any{"ticket": tk, "device": "phone", "force": true,
		"at": time.Now().Add(-8 * 24 * time.Hour).UTC().Format(time.RFC3339)})
	assert.Equal(t, http.StatusBadRequest, r.Status, "at older than 7 days")
	r = d.scan(t, 0, d.admin, map[string]any{"ticket": "forged.ticket.x", "device": "phone", "force": true, "at": at})
	assert.Equal(t, "invalid_ticket", r.ErrorCode(), "a forced scan is still checked for validity of the ticket")
}

func TestDoorRoleReachesItsOwnListOnly(t *testing.T) {
	t.Parallel()
	inst := apptest.Start(t, apptest.Options{})
	act := inst.CreateActivity(t, "lecture", 5)
	a := newDoor(t, []*apptest.Instance{inst}, map[string]any{"name": "A", "activity_ids": []string{act}, "door_roles": []string{"door-a"}})
	b := newDoor(t, []*apptest.Instance{inst}, map[string]any{"name": "B", "activity_ids": []string{act}, "door_roles": []string{"door-b"}})
	staff := inst.RoleToken(t, "staff-a", "door-a")
	reg := inst.MustSignup(t, act, "gina")
	r := a.scan(t, 0, staff, map[string]any{"registration_id": reg.ID, "device": "a1"})
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	assert.Equal(t, http.StatusForbidden, b.scan(t, 0, staff, map[string]any{"registration_id": reg.ID, "device": "a1"}).Status)
	assert.Equal(t, http.StatusOK, inst.MustDo(t, http.MethodGet, "/v1/checkin-lists/"+a.id, staff, nil).Status)
	assert.Equal(t, http.StatusForbidden, inst.MustDo(t, http.MethodGet, "/v1/checkin-lists/"+b.id, staff, nil).Status)
	assert.Equal(t, http.StatusForbidden, inst.MustDo(t, http.MethodGet, "/v1/checkin-lists", staff, nil).Status)
	assert.Equal(t, http.StatusForbidden, inst.MustDo(t, http.MethodPatch, "/v1/checkin-lists/"+a.id, staff, map[string]any{"name": "x"}).Status)
	assert.Equal(t, http.StatusForbidden, inst.MustDo(t, http.MethodGet, "/v1/activities/"+act+"/registrations", staff, nil).Status)

	// The event records the door staff as its actor.
	evs := inst.MustDo(t, http.MethodGet, "/v1/registrations/"+reg.ID+"/events", a.admin, nil)
	var events struct {
		Items []struct{ Type, Actor string }
	}
	evs.JSON(t, &events)
	require.Len(t, events.Items, 2)
	assert.Equal(t, "user:staff-a", events.Items[1].Actor)
}

func TestTicketSyncFeedSendsEverythingThenChanges(t *testing.T) {
	t.Parallel()
	inst := apptest.Start(t, apptest.Options{})
	act := inst.CreateActivity(t, "lecture", 10)
	d := newDoor(t, []*apptest.Instance{inst}, map[string]any{"name": "Door", "activity_ids": []string{act}})
	var regs []string
	for i := range 5 {
		regs = append(regs, inst.MustSignup(t, act, fmt.Sprintf("s%d", i)).ID)
	}
	type item struct {
		RegistrationID string `json:"registration_id"`
		Valid          bool   `json:"valid"`
		Inside         bool   `json:"inside"`
		Entries        int    `json:"entries"`
	}
	type page struct {
		Items      []item `json:"items"`
		NextCursor string `json:"next_cursor"`
	}
	get := func(query string) page {
		t.Helper()
		r := inst.MustDo(t, http.MethodGet, "/v1/checkin-lists/"+d.id+"/tickets"+query, d.admin, nil)
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
		var p page
		r.JSON(t, &p)
		require.NotEmpty(t, p.NextCursor)
		return p
	}
	first := get("?limit=3")
	require.Len(t, first.Items, 3)
	rest := get("?limit=3&cursor=" + first.NextCursor)
	require.Len(t, rest.Items, 2)
	var all []string
	for _, it := range append(first.Items, rest.Items...) {
		all = append(all, it.RegistrationID)
		assert.True(t, it.Valid)
	}
	assert.ElementsMatch(t, regs, all)
	quiet := get("?cursor=" + rest.NextCursor)
	assert.Empty(t, quiet.Items)

	require.Equal(t, http.StatusOK, inst.MustDo(t, http.MethodPost, "/v1/registrations/"+regs[1]+"/cancel", d.admin, map[string]any{}).Status)
	require.Equal(t, http.StatusOK, d.scan(t, 0, d.admin, map[string]any{"registration_id": regs[2], "device": "d"}).Status)
	changed := get("?cursor=" + quiet.NextCursor)
	require.Len(t, changed.Items, 2)
	assert.Equal(t, item{RegistrationID: regs[1], Valid: false}, changed.Items[0], "a cancellation as valid: false")
	assert.Equal(t, item{RegistrationID: regs[2], Valid: true, Inside: true, Entries: 1}, changed.Items[1], "an entry as inside")

	// A quiet long poll waits, and a change wakes it.
	start := time.Now()
	empty := get("?wait=1&cursor=" + changed.NextCursor)
	assert.Empty(t, empty.Items)
	assert.GreaterOrEqual(t, time.Since(start), 900*time.Millisecond, "the empty page waited")
	// A change answers a long poll long before its wait: the entry made
	// while it waits (or just before it reads) is its page.
	woken := make(chan page, 1)
	polled := time.Now()
	go func() { woken <- get("?wait=20&cursor=" + empty.NextCursor) }()
	require.Equal(t, http.StatusOK, d.scan(t, 0, d.admin, map[string]any{"registration_id": regs[3], "device": "d"}).Status)
	p := <-woken
	require.Len(t, p.Items, 1)
	assert.Equal(t, regs[3], p.Items[0].RegistrationID)
	assert.Less(t, time.Since(polled), 10*time.Second, "the poll was answered by the entry, not by its wait")
	assert.Equal(t, http.StatusBadRequest, inst.MustDo(t, http.MethodGet, "/v1/checkin-lists/"+d.id+"/tickets?cursor=zzz", d.admin, nil).Status)
}

// TestTicketSyncIsCompressed reads the ticket sync as a door's browser
// does, accepting gzip: the first sync of a list is its biggest download.
func TestTicketSyncIsCompressed(t *testing.T) {
	t.Parallel()
	inst := apptest.Start(t, apptest.Options{})
	act := inst.CreateActivity(t, "lecture", 40)
	d := newDoor(t, []*apptest.Instance{inst}, map[string]any{"name": "Door", "activity_ids": []string{act}})
	apptest.SignupBurst(t, []*apptest.Instance{inst}, act, "gz-", 40)
	req, err := http.NewRequest(http.MethodGet, inst.URL+"/v1/checkin-lists/"+d.id+"/tickets", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+d.admin)
	req.Header.Set("Accept-Encoding", "gzip")
	resp, err := (&http.Client{Transport: &http.Transport{DisableCompression: true}}).Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "gzip", resp.Header.Get("Content-Encoding"))
	wire, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	zr, err := gzip.NewReader(bytes.NewReader(wire))
	require.NoError(t, err)
	var page struct {
		Items []struct {
			RegistrationID string `json:"registration_id"`
		} `json:"items"`
	}
	require.NoError(t, json.NewDecoder(zr).Decode(&page))
	require.Len(t, page.Items, 40)
	plain := inst.MustDo(t, http.MethodGet, "/v1/checkin-lists/"+d.id+"/tickets", d.admin, nil, "Accept-Encoding", "identity")
	require.Equal(t, http.StatusOK, plain.Status)
	assert.Less(t, len(wire)*2, len(plain.Body), "gzip at least halves the page (%d of %d bytes)", len(wire), len(plain.Body))
}

func TestWalkInsAreSeatedAndCheckedInOrWaitlisted(t *testing.T) {
	t.Parallel()
	inst := apptest.Start(t, apptest.Options{})
	act := inst.CreateWaitlisted(t, "lecture", 1)
	d := newDoor(t, []*apptest.Instance{inst}, map[string]any{"name": "Door", "activity_ids": []string{act}, "door_roles": []string{"door"}})
	staff := inst.RoleToken(t, "staff", "door")
	r := inst.MustDo(t, http.MethodPost, "/v1/checkin-lists/"+d.id+"/walk-ins", staff, map[string]any{"activity_id": act, "user_id": "walker-1"})
	require.Equal(t, http.StatusCreated, r.Status, "%s", r.Body)
	var in scanAnswer
	r.JSON(t, &in)
	assert.Equal(t, "entered", in.Result)
	assert.True(t, in.Registration.CheckedIn)
	r = inst.MustDo(t, http.MethodPost, "/v1/checkin-lists/"+d.id+"/walk-ins", staff, map[string]any{"activity_id": act, "user_id": "walker-2"})
	require.Equal(t, http.StatusAccepted, r.Status, "%s", r.Body)
	var standby struct {
		Result       string          `json:"result"`
		Checkin      *map[string]any `json:"checkin"`
		Registration struct{ Status string }
	}
	r.JSON(t, &standby)
	assert.Equal(t, "waitlisted", standby.Result)
	assert.Equal(t, "waitlisted", standby.Registration.Status)
	assert.Nil(t, standby.Checkin)
	other := inst.CreateActivity(t, "elsewhere", 5)
	r = inst.MustDo(t, http.MethodPost, "/v1/checkin-lists/"+d.id+"/walk-ins", staff, map[string]any{"activity_id": other, "user_id": "walker-3"})
	assert.Equal(t, "wrong_list", r.ErrorCode())
	assert.Equal(t, 1, d.read(t).Inside)
}

func TestCheckinListCRUDAndValidation(t *testing.T) {
	t.Parallel()
	inst := apptest.Start(t, apptest.Options{})
	act := inst.CreateActivity(t, "lecture", 5)
	admin := inst.Token(t, "organiser", true)
	for _, bad := range []map[string]any{
		{"name": "", "activity_ids": []string{act}},
		{"name": "x", "activity_ids": []string{}},
		{"name": "x", "activity_ids": []string{act}, "entry": "twice"},
		{"name": "x", "activity_ids": []string{act}, "max_inside": 0},
		{"name": "x", "activity_ids": []string{act}, "unknown": 1},
		{"name": "x", "activity_ids": []string{act, act}},
		{"name": "x", "activity_ids": []string{act}, "opens_at": "2026-12-06T10:00:00Z", "closes_at": "2026-12-06T09:00:00Z"},
	} {
		r := inst.MustDo(t, http.MethodPost, "/v1/checkin-lists", admin, bad)
		assert.Equal(t, http.StatusBadRequest, r.Status, "%v: %s", bad, r.Body)
	}
	r := inst.MustDo(t, http.MethodPost, "/v1/checkin-lists", admin, map[string]any{"name": "x", "activity_ids": []string{"a_01JDQ90M2X7C4B9E1T6R3Y8W5Z"}})
	assert.Equal(t, http.StatusNotFound, r.Status)
	d := newDoor(t, []*apptest.Instance{inst}, map[string]any{"name": "Hall A 主入口", "activity_ids": []string{act}, "max_inside": 5})
	r = inst.MustDo(t, http.MethodPatch, "/v1/checkin-lists/"+d.id, admin, map[string]any{"max_inside": nil, "entry": "reentry"})
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	var l struct {
		Name      string `json:"name"`
		Entry     string `json:"entry"`
		MaxInside *int   `json:"max_inside"`
	}
	r.JSON(t, &l)
	assert.Equal(t, "Hall A 主入口", l.Name)
	assert.Equal(t, "reentry", l.Entry)
	assert.Nil(t, l.MaxInside)
	r = inst.MustDo(t, http.MethodGet, "/v1/checkin-lists?activity_id="+act, admin, nil)
	require.Equal(t, http.StatusOK, r.Status)
	var page struct{ Items []struct{ ID string } }
	r.JSON(t, &page)
	require.Len(t, page.Items, 1)
	assert.Equal(t, http.StatusNoContent, inst.MustDo(t, http.MethodDelete, "/v1/checkin-lists/"+d.id, admin, nil).Status)
	assert.Equal(t, http.StatusNotFound, inst.MustDo(t, http.MethodGet, "/v1/checkin-lists/"+d.id, admin, nil).Status)
	assert.Equal(t, http.StatusNotFound, inst.MustDo(t, http.MethodGet, "/v1/checkin-lists/cl_nothing", admin, nil).Status)
	keys := inst.MustDo(t, http.MethodGet, "/v1/checkin/keys", "", nil)
	require.Equal(t, http.StatusOK, keys.Status)
	assert.Contains(t, string(keys.Body), `"crv":"Ed25519"`)
}

// TestCheckinStreamShowsTheCountsLive reads a list's counts stream from
// one instance while another records an entry.
func TestCheckinStreamShowsTheCountsLive(t *testing.T) {
	t.Parallel()
	insts := twoInstances(t)
	act := insts[0].CreateActivity(t, "lecture", 5)
	d := newDoor(t, insts, map[string]any{"name": "Door", "activity_ids": []string{act}, "max_inside": 4, "door_roles": []string{"door"}})
	reg := insts[0].MustSignup(t, act, "streamed")
	req, err := http.NewRequest(http.MethodGet, insts[1].URL+"/v1/checkin-lists/"+d.id+"/stream", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+insts[1].RoleToken(t, "staff", "door"))
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, resp.Header.Get("Content-Type"), "text/event-stream")
	counts := make(chan listAnswer, 8)
	go func() {
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				var l listAnswer
				if json.Unmarshal([]byte(data), &l) == nil {
					counts <- l
				}
			}
		}
		close(counts)
	}()
	first := <-counts
	assert.Equal(t, 0, first.Inside)
	require.NotNil(t, first.MaxInside)
	assert.Equal(t, 4, *first.MaxInside)
	require.Equal(t, http.StatusOK, d.scan(t, 0, d.admin, map[string]any{"registration_id": reg.ID, "device": "d"}).Status)
	select {
	case l := <-counts:
		assert.Equal(t, 1, l.Inside)
		assert.Equal(t, 1, l.CheckedIn)
	case <-time.After(10 * time.Second):
		t.Fatal("the stream did not show the entry made at the other instance")
	}
	require.Equal(t, http.StatusNoContent, insts[0].MustDo(t, http.MethodDelete, "/v1/checkin-lists/"+d.id, d.admin, nil).Status)
	for {
		select {
		case _, open := <-counts:
			if !open {
				return
			}
		case <-time.After(10 * time.Second):
			t.Fatal("the stream of a list deleted at the other instance did not end")
		}
	}
}
