package e2e

import (
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd/client"
	"github.com/physiciansnet/capacityd/internal/test/apptest"
)

// regState is what the release tests read of a registration.
type regState struct {
	ID           string     `json:"id"`
	Status       string     `json:"status"`
	ConfirmedAt  *time.Time `json:"confirmed_at"`
	CancelReason *string    `json:"cancel_reason"`
}

// mustWaitlist signs user up and fails unless they are waitlisted.
func mustWaitlist(t *testing.T, inst *apptest.Instance, act, user string) client.Registration {
	t.Helper()
	res, err := inst.Signup(t, act, user)
	require.NoError(t, err)
	require.True(t, res.Waitlisted, "%s is waitlisted", user)
	return res.Registration
}

func readReg(t *testing.T, inst *apptest.Instance, token, id string) regState {
	t.Helper()
	r := inst.MustDo(t, http.MethodGet, "/v1/registrations/"+id, token, nil)
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	var s regState
	r.JSON(t, &s)
	return s
}

// patchActivity sets fields of an activity.
func patchActivity(t testing.TB, inst *apptest.Instance, admin, id string, fields map[string]any) {
	t.Helper()
	r := inst.MustDo(t, http.MethodPatch, "/v1/activities/"+id, admin, fields)
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
}

type feedEvent struct {
	Seq            int64   `json:"seq"`
	Type           string  `json:"type"`
	RegistrationID string  `json:"registration_id"`
	Reason         *string `json:"reason"`
}

func activityFeed(t *testing.T, inst *apptest.Instance, admin, id string) []feedEvent {
	t.Helper()
	r := inst.MustDo(t, http.MethodGet, "/v1/activities/"+id+"/events?limit=500", admin, nil)
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	var page struct{ Items []feedEvent }
	r.JSON(t, &page)
	return page.Items
}

func TestReleaseAtTheDoorGivesNoShowsSeatsToTheLine(t *testing.T) {
	t.Parallel()
	insts := twoInstances(t)
	inst := insts[0]
	admin := inst.Token(t, "organiser", true)
	act := inst.CreateWaitlisted(t, "morning lecture", 2)
	came := inst.MustSignup(t, act, "came")
	absent := inst.MustSignup(t, act, "absent")
	waiting := mustWaitlist(t, inst, act, "waiting")
	d := newDoor(t, insts, map[string]any{"name": "Door", "activity_ids": []string{act}})
	require.Equal(t, http.StatusOK, d.scan(t, 1, d.admin, map[string]any{"registration_id": came.ID, "device": "d"}).Status)

	starts := time.Now().Add(2 * time.Second).UTC()
	patchActivity(t, inst, admin, act, map[string]any{"starts_at": starts.Format(time.RFC3339Nano),
		"ends_at": starts.Add(time.Hour).Format(time.RFC3339Nano), "release_no_shows_after_minutes": 0})
	require.Eventually(t, func() bool {
		return readReg(t, insts[1], admin, absent.ID).Status == "cancelled"
	}, 20*time.Second, 100*time.Millisecond, "the no-show is released after the moment")
	gone := readReg(t, inst, admin, absent.ID)
	require.NotNil(t, gone.CancelReason)
	assert.Equal(t, "no_show", *gone.CancelReason)
	kept := readReg(t, inst, admin, came.ID)
	assert.Equal(t, "pending", kept.Status, "the one who came keeps the seat")
	assert.Equal(t, "pending", readReg(t, inst, admin, waiting.ID).Status, "the first in line is promoted")

	evs := activityFeed(t, inst, admin, act)
	var released int
	for i, e := range evs {
		if e.Type == "registration.released" {
			released++
			require.Equal(t, absent.ID, e.RegistrationID)
			require.NotNil(t, e.Reason)
			assert.Equal(t, "no_show", *e.Reason)
			require.Less(t, i+1, len(evs))
			assert.Equal(t, "registration.promoted", evs[i+1].Type, "the promotion's event comes right after the release's")
			assert.Equal(t, waiting.ID, evs[i+1].RegistrationID)
		}
	}
	assert.Equal(t, 1, released, "released once, though both instances run the due work")
	r := d.scan(t, 0, d.admin, map[string]any{"registration_id": absent.ID, "device": "d"})
	assert.Equal(t, "ticket_revoked", r.ErrorCode(), "a released registration's ticket is refused")
}

func TestConfirmOrRelease(t *testing.T) {
	t.Parallel()
	insts := twoInstances(t)
	inst := insts[0]
	admin := inst.Token(t, "organiser", true)
	act := inst.CreateWaitlisted(t, "workshop", 2)
	sure := inst.MustSignup(t, act, "sure")
	unsure := inst.MustSignup(t, act, "unsure")
	waiting := mustWaitlist(t, inst, act, "next")
	confirmBy := time.Now().Add(2 * time.Second).UTC()
	patchActivity(t, inst, admin, act, map[string]any{"confirm_by": confirmBy.Format(time.RFC3339Nano)})

	r := inst.MustDo(t, http.MethodPost, "/v1/registrations/"+sure.ID+"/confirm", inst.Token(t, "sure", false), map[string]any{})
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	var confirmed regState
	r.JSON(t, &confirmed)
	require.NotNil(t, confirmed.ConfirmedAt)
	r = inst.MustDo(t, http.MethodPost, "/v1/registrations/"+waiting.ID+"/confirm", inst.Token(t, "next", false), nil)
	assert.Equal(t, "invalid_transition", r.ErrorCode(), "a waitlisted registration has no seat to confirm")

	require.Eventually(t, func() bool {
		return readReg(t, insts[1], admin, unsure.ID).Status == "cancelled"
	}, 20*time.Second, 100*time.Millisecond, "the unconfirmed is released at confirm_by")
	gone := readReg(t, inst, admin, unsure.ID)
	assert.Equal(t, "unconfirmed", *gone.CancelReason)
	promoted := readReg(t, inst, admin, waiting.ID)
	assert.Equal(t, "pending", promoted.Status)
	require.NotNil(t, promoted.ConfirmedAt, "a seat got after confirm_by is confirmed by getting it")
	assert.Equal(t, "pending", readReg(t, inst, admin, sure.ID).Status)

	r = inst.MustDo(t, http.MethodPost, "/v1/registrations/"+unsure.ID+"/confirm", inst.Token(t, "unsure", false), nil)
	assert.Equal(t, http.StatusConflict, r.Status)
	assert.Equal(t, "confirmation_closed", r.ErrorCode())
	r = insts[1].MustDo(t, http.MethodPost, "/v1/registrations/"+sure.ID+"/confirm", inst.Token(t, "sure", false), nil)
	require.Equal(t, http.StatusOK, r.Status)
	var again regState
	r.JSON(t, &again)
	assert.True(t, confirmed.ConfirmedAt.Equal(*again.ConfirmedAt), "a confirmed one is answered unchanged")
	var confirms int
	for _, e := range activityFeed(t, inst, admin, act) {
		if e.Type == "registration.confirmed" {
			confirms++
		}
	}
	assert.Equal(t, 1, confirms, "confirming again records nothing")
}

// TestLateScansRaceTheReleaseAtTheDoor scans thirty people from 300 ms
// before the release moment until after it, over both instances: each
// either entered and kept the seat, or was refused as ticket_revoked and
// released as a no-show; never both, never neither.
func TestLateScansRaceTheReleaseAtTheDoor(t *testing.T) {
	t.Parallel()
	insts := twoInstances(t)
	inst := insts[0]
	admin := inst.Token(t, "organiser", true)
	act := inst.CreateActivity(t, "keynote", 30)
	d := newDoor(t, insts, map[string]any{"name": "Door", "activity_ids": []string{act}})
	regs := make([]string, 30)
	for i := range regs {
		regs[i] = inst.MustSignup(t, act, fmt.Sprintf("late-%d", i)).ID
	}
	moment := time.Now().Add(500 * time.Millisecond).UTC()
	patchActivity(t, inst, admin, act, map[string]any{"starts_at": moment.Format(time.RFC3339Nano),
		"ends_at": moment.Add(time.Hour).Format(time.RFC3339Nano), "release_no_shows_after_minutes": 0})
	// One scan every 60 ms from now on: from about 400 ms before the
	// moment until over a second after it, across the due work's ticks.
	results := make([]apptest.Response, len(regs))
	var wg sync.WaitGroup
	pace := time.NewTicker(60 * time.Millisecond)
	defer pace.Stop()
	for i, id := range regs {
		wg.Go(func() {
			results[i] = d.scan(t, i, d.admin, map[string]any{"registration_id": id, "device": fmt.Sprintf("d%d", i%4)})
		})
		<-pace.C
	}
	wg.Wait()
	// Every registration not scanned in is released once the due work ran.
	require.Eventually(t, func() bool {
		for i, id := range regs {
			if results[i].Status != http.StatusOK && readReg(t, inst, admin, id).Status != "cancelled" {
				return false
			}
		}
		return true
	}, 20*time.Second, 200*time.Millisecond)
	entered, refused := 0, 0
	for i, id := range regs {
		st := readReg(t, insts[i%2], admin, id)
		switch results[i].Status {
		case http.StatusOK:
			entered++
			assert.Equal(t, "pending", st.Status, "%s entered and kept the seat", id)
		case http.StatusConflict:
			refused++
			assert.Equal(t, "ticket_revoked", results[i].ErrorCode())
			require.Equal(t, "cancelled", st.Status, "%s refused and released", id)
			assert.Equal(t, "no_show", *st.CancelReason)
		default:
			t.Fatalf("scan %d: %d %s", i, results[i].Status, results[i].Body)
		}
	}
	assert.Equal(t, len(regs), entered+refused)
	t.Logf("%d entered, %d refused after the release", entered, refused)
}

func TestTheEndOfAnActivityRecordsAttendedAndNoShowOnce(t *testing.T) {
	t.Parallel()
	insts := twoInstances(t)
	inst := insts[0]
	admin := inst.Token(t, "organiser", true)
	act := inst.CreateWaitlisted(t, "evening seminar", 2)
	came := inst.MustSignup(t, act, "came")
	absent := inst.MustSignup(t, act, "absent")
	mustWaitlist(t, inst, act, "waiting")
	d := newDoor(t, insts, map[string]any{"name": "Door", "activity_ids": []string{act}})
	starts := time.Now().Add(-time.Hour).UTC()
	ends := time.Now().Add(2 * time.Second).UTC()
	patchActivity(t, inst, admin, act, map[string]any{"starts_at": starts.Format(time.RFC3339Nano), "ends_at": ends.Format(time.RFC3339Nano)})
	r := d.scan(t, 1, d.admin, map[string]any{"registration_id": came.ID, "device": "phone", "force": true,
		"at": starts.Add(time.Minute).Format(time.RFC3339Nano)})
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)

	count := func() map[string][]string {
		out := map[string][]string{}
		for _, e := range activityFeed(t, inst, admin, act) {
			if e.Type == "registration.attended" || e.Type == "registration.no_show" {
				out[e.Type] = append(out[e.Type], e.RegistrationID)
			}
		}
		return out
	}
	require.Eventually(t, func() bool { return len(count()) == 2 }, 20*time.Second, 100*time.Millisecond)
	// Both instances' due work runs every second: nothing is recorded twice.
	require.Never(t, func() bool {
		c := count()
		return len(c["registration.attended"]) != 1 || len(c["registration.no_show"]) != 1
	}, 3*time.Second, 200*time.Millisecond)
	c := count()
	assert.Equal(t, []string{came.ID}, c["registration.attended"])
	assert.Equal(t, []string{absent.ID}, c["registration.no_show"])
}
