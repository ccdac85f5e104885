package checkin_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd"
	"github.com/physiciansnet/capacityd/checkin"
	"github.com/physiciansnet/capacityd/registration"
)

var t0 = time.Date(2026, 12, 6, 9, 0, 0, 0, time.UTC)

func ptr[T any](v T) *T { return &v }

func seated(seats int) registration.Registration {
	return registration.Registration{ID: "r_1", ActivityID: "a_1", UserID: "u", Status: registration.Approved, Seats: seats}
}

func list(entry checkin.Entry, maxInside *int, inside int) checkin.List {
	return checkin.List{ID: "cl_1", ActivityIDs: []string{"a_1"}, Entry: entry, MaxInside: maxInside, Inside: inside}
}

func TestDecideRefusesInTheDocumentedOrder(t *testing.T) {
	first := t0.Add(-time.Minute)
	inside := checkin.Record{Inside: true, InsideSeats: 1, Entries: 1, FirstAt: &first, FirstDevice: "door-1"}
	cancelled := seated(1)
	cancelled.Status = registration.Cancelled
	other := seated(1)
	other.ActivityID = "a_2"
	closed := list(checkin.EntryOnce, nil, 0)
	closed.ClosesAt = ptr(t0)
	entry := checkin.Scan{Type: checkin.TypeEntry, Device: "door-2", At: t0}
	exit := checkin.Scan{Type: checkin.TypeExit, Device: "door-2", At: t0}
	for _, tc := range []struct {
		name string
		l    checkin.List
		reg  registration.Registration
		rec  checkin.Record
		scan checkin.Scan
		code string
	}{
		// A revoked ticket is refused as revoked even when it was used: validity comes before duplicates.
		{"revoked before duplicate", list(checkin.EntryOnce, nil, 1), cancelled, inside, entry, capacityd.ETicketRevoked},
		{"waitlisted holds no seat", list(checkin.EntryOnce, nil, 0), registration.Registration{ID: "r_1", ActivityID: "a_1", Status: registration.Waitlisted}, checkin.Record{}, entry, capacityd.ETicketRevoked},
		{"wrong list before closed", closed, other, checkin.Record{}, entry, capacityd.EWrongList},
		{"closed before duplicate", closed, seated(1), inside, entry, capacityd.ECheckinClosed},
		{"once: second entry", list(checkin.EntryOnce, nil, 1), seated(1), inside, entry, capacityd.EAlreadyCheckedIn},
		{"once: entry after exit", list(checkin.EntryOnce, nil, 0), seated(1), checkin.Record{Entries: 1, Exits: 1, FirstAt: &first, FirstDevice: "door-1"}, entry, capacityd.EAlreadyCheckedIn},
		{"reentry: entry while inside", list(checkin.EntryReentry, nil, 1), seated(1), inside, entry, capacityd.EAlreadyCheckedIn},
		{"exit of one not inside", list(checkin.EntryReentry, nil, 0), seated(1), checkin.Record{}, exit, capacityd.ENotInside},
		{"duplicate before room full", list(checkin.EntryOnce, ptr(1), 1), seated(1), inside, entry, capacityd.EAlreadyCheckedIn},
		{"room full counts seats", list(checkin.EntryOnce, ptr(10), 8), seated(3), checkin.Record{}, entry, capacityd.ERoomFull},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := checkin.Decide(tc.l, tc.reg, tc.rec, tc.scan)
			require.Error(t, v.Refusal)
			assert.Equal(t, tc.code, capacityd.ErrorCode(v.Refusal))
			assert.Equal(t, tc.rec, v.Record, "a refusal changes nothing")
			assert.Equal(t, tc.l.Inside, v.Inside)
		})
	}
}

func TestDecideNamesThePreviousEntryAndTheRoom(t *testing.T) {
	first := t0.Add(-time.Minute)
	v := checkin.Decide(list(checkin.EntryOnce, nil, 1), seated(1), checkin.Record{Inside: true, InsideSeats: 1, Entries: 1, FirstAt: &first, FirstDevice: "door-1"},
		checkin.Scan{Type: checkin.TypeEntry, Device: "door-2", At: t0})
	var e *capacityd.Error
	require.ErrorAs(t, v.Refusal, &e)
	require.NotNil(t, e.Previous)
	assert.Equal(t, capacityd.PreviousEntry{At: first, Device: "door-1", ListID: "cl_1"}, *e.Previous)

	v = checkin.Decide(list(checkin.EntryOnce, ptr(10), 9), seated(2), checkin.Record{}, checkin.Scan{Type: checkin.TypeEntry, Device: "d", At: t0})
	require.ErrorAs(t, v.Refusal, &e)
	assert.Equal(t, 9, *e.Inside)
	assert.Equal(t, 10, *e.MaxInside)
}

func TestDecideEntryRules(t *testing.T) {
	entry := checkin.Scan{Type: checkin.TypeEntry, Device: "d", At: t0}
	exit := checkin.Scan{Type: checkin.TypeExit, Device: "d", At: t0}
	run := func(l checkin.List, reg registration.Registration, scans ...checkin.Scan) ([]string, checkin.List, checkin.Record) {
		var rec checkin.Record
		var out []string
		for _, s := range scans {
			v := checkin.Decide(l, reg, rec, s)
			if v.Refusal != nil {
				out = append(out, capacityd.ErrorCode(v.Refusal))
				continue
			}
			out = append(out, "ok")
			rec, l.Inside, l.CheckedIn, l.Conflicts = v.Record, v.Inside, v.CheckedIn, v.Conflicts
		}
		return out, l, rec
	}
	got, l, rec := run(list(checkin.EntryOnce, nil, 0), seated(2), entry, entry, exit, entry, exit)
	assert.Equal(t, []string{"ok", capacityd.EAlreadyCheckedIn, "ok", capacityd.EAlreadyCheckedIn, capacityd.ENotInside}, got)
	assert.Equal(t, 0, l.Inside)
	assert.Equal(t, 1, l.CheckedIn)
	assert.Equal(t, 1, rec.Entries)

	got, l, _ = run(list(checkin.EntryReentry, nil, 0), seated(2), entry, exit, entry, entry)
	assert.Equal(t, []string{"ok", "ok", "ok", capacityd.EAlreadyCheckedIn}, got)
	assert.Equal(t, 2, l.Inside, "a party of two inside")
	assert.Equal(t, 1, l.CheckedIn, "one registration checked in")

	got, l, rec = run(list(checkin.EntryMultiple, nil, 0), seated(1), entry, entry, entry, exit)
	assert.Equal(t, []string{"ok", "ok", "ok", "ok"}, got)
	assert.Equal(t, 0, l.Inside, "entries while inside count the seats once")
	assert.Equal(t, 3, rec.Entries)
}

func TestDecideRecordsAForcedScanWithTheRuleItBroke(t *testing.T) {
	first := t0.Add(-time.Hour)
	rec := checkin.Record{Inside: true, InsideSeats: 1, Entries: 1, FirstAt: &first, FirstDevice: "door-1"}
	forced := checkin.Scan{Type: checkin.TypeEntry, Device: "phone", Force: true, At: t0}
	v := checkin.Decide(list(checkin.EntryOnce, nil, 1), seated(1), rec, forced)
	require.NoError(t, v.Refusal)
	assert.Equal(t, capacityd.EAlreadyCheckedIn, v.Conflict)
	assert.Equal(t, 1, v.Conflicts)
	assert.Equal(t, 2, v.Record.Entries)
	assert.Equal(t, 1, v.Inside, "already inside: no seat counted twice")

	cancelled := seated(1)
	cancelled.Status = registration.Cancelled
	v = checkin.Decide(list(checkin.EntryOnce, ptr(1), 1), cancelled, checkin.Record{}, forced)
	require.NoError(t, v.Refusal)
	assert.Equal(t, capacityd.ETicketRevoked, v.Conflict, "the first rule broken, in order")
	assert.Equal(t, 2, v.Inside, "a forced entry is inside, over the limit")

	v = checkin.Decide(list(checkin.EntryOnce, nil, 0), seated(1), checkin.Record{}, forced)
	require.NoError(t, v.Refusal)
	assert.Empty(t, v.Conflict)
	assert.Equal(t, 0, v.Conflicts)
}
