package console_test

import (
	"fmt"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd/client"
	"github.com/physiciansnet/capacityd/internal/test/apptest"
)

// TestDoorWedgeScansCheckIn: a keyboard-wedge scan (the ticket's keys
// and Enter, no field focused) checks the registration in at the
// service; the same ticket again is refused as already checked in, saying
// when and through which device; a cancelled registration's ticket is
// refused as no longer valid; an exit lets the registration out.
func TestDoorWedgeScansCheckIn(t *testing.T) {
	t.Parallel()
	inst := apptest.Start(t, apptest.Options{})
	ev := newDoorEvent(t, inst, 10, client.NewCheckinList{}, "alice", "bob")
	alice, bob := doorTicket(t, inst, ev, "alice"), doorTicket(t, inst, ev, "bob")
	doorCancel(t, inst, ev, "bob")

	s := signInTab(t, inst, "en", "dan", "door-a")
	s.doorOpen(ev.list.ID, "hall-a-1")

	r := s.doorWedge(alice)
	require.Equal(t, "entered", r.Outcome, r)
	require.Equal(t, "service", r.Decided)
	require.Equal(t, "Entered", r.Words)
	require.Contains(t, r.Who, "alice")

	r = s.doorWedge(alice)
	require.Equal(t, "refused", r.Outcome, r)
	require.Equal(t, "already_checked_in", r.Reason)
	require.Equal(t, "Already checked in.", r.Why)
	require.Contains(t, r.Previous, "through device hall-a-1")
	require.Regexp(t, `at \d{1,2}:\d{2}:\d{2}`, r.Previous, "the time of the first entry")

	r = s.doorWedge(bob)
	require.Equal(t, "refused", r.Outcome, r)
	require.Equal(t, "ticket_revoked", r.Reason)
	require.Contains(t, r.Why, "no longer valid")

	s.doorMode("exit")
	r = s.doorWedge(alice)
	require.Equal(t, "exited", r.Outcome, r)

	history := doorHistory(t, inst, ev.list.ID)
	require.Len(t, history, 2, "alice's entry and exit, nothing for the refusals")
	require.Equal(t, "hall-a-1", history[0].Device)
	require.Equal(t, "entry", history[0].Type)
	require.Equal(t, "exit", history[1].Type)
	require.False(t, history[0].Forced)
}

// TestDoorDeviceNameIsKept: the device's name, set on the page (any
// printable characters, as the service takes them), is kept on the device
// and recorded with its scans; an empty one is refused beside its field.
func TestDoorDeviceNameIsKept(t *testing.T) {
	t.Parallel()
	inst := apptest.Start(t, apptest.Options{})
	ev := newDoorEvent(t, inst, 10, client.NewCheckinList{}, "alice")
	s := signInTab(t, inst, "zh-TW", "dan", "door-a")
	s.doorOpen(ev.list.ID, "")
	require.Regexp(t, `^door-[0-9a-f]{6}$`, text(t, s.ctx, "#device-shown"), "a new device's name")
	setName := func(name string) {
		do(t, s.ctx, doorWait,
			void(chromedp.Evaluate[bool](fmt.Sprintf(`document.getElementById('settings').open = true;
				document.getElementById('device-name').value = %q; true`, name))),
			chromedp.Click(`#device-form button[type="submit"]`))
	}
	setName("")
	require.Equal(t, "true", attr(t, s.ctx, "#device-name", "aria-invalid"))
	require.Equal(t, "請輸入 1 到 64 個字元（文字、數字、符號或空格）。", text(t, s.ctx, "#device-error"))
	setName("大廳 1")
	do(t, s.ctx, doorWait, waitText("#device-shown", "大廳 1", doorWait))
	require.Empty(t, attr(t, s.ctx, "#device-name", "aria-invalid"))

	s.doorNavigate(ev.list.ID)
	require.Equal(t, "大廳 1", text(t, s.ctx, "#device-shown"))
	r := s.doorType(ev.regs["alice"].ID)
	require.Equal(t, "entered", r.Outcome, r)
	require.Equal(t, "已入場", r.Words)
	history := doorHistory(t, inst, ev.list.ID)
	require.Len(t, history, 1)
	require.Equal(t, "大廳 1", history[0].Device)
}
