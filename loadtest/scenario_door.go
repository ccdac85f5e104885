package loadtest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/physiciansnet/capacityd/client"
)

// door_rush's shape: Sizes.DoorDevices (16) devices scan the tickets of a
// crowd of Sizes.DoorTickets (10,000) at a check-in list with entry "once"
// and a room of doorRoomPercent of the crowd, doorDuplicatePercent of the
// tickets scanned a second time at another device; the list's ticket sync
// is read in pages of doorSyncPage.
const (
	doorRoomPercent      = 80
	doorDuplicatePercent = 10
	doorSyncPage         = 1000
	// doorSignupClients sign up for the hot activity during the second
	// rush, as many as signup_hot's.
	doorSignupClients = 64
	// doorRushTimeout bounds each rush and the untimed setup loads.
	doorRushTimeout = 3 * time.Minute
)

// doorScan is one scan of door_rush's plan: the ticket scanned and the
// device that scans it.
type doorScan struct {
	ticket, device int
}

// planDoorScans returns the scans of a rush of tickets tickets at devices
// devices: every ticket once, and dupPercent of them (chosen at random)
// once more, all in a random order. Scan k is at device k mod devices,
// except that a ticket's second scan is always at another device than
// its first (devices ≥ 2).
func planDoorScans(rng *rand.Rand, tickets, dupPercent, devices int) []doorScan {
	dups := tickets * dupPercent / 100
	order := make([]int, 0, tickets+dups)
	for t := range tickets {
		order = append(order, t)
	}
	order = append(order, rng.Perm(tickets)[:dups]...)
	rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
	first := make([]int, tickets) // the device of each ticket's first scan, +1
	plan := make([]doorScan, len(order))
	for k, t := range order {
		d := k % devices
		if first[t] == 0 {
			first[t] = d + 1
		} else if d == first[t]-1 {
			d = (d + 1) % devices
		}
		plan[k] = doorScan{ticket: t, device: d}
	}
	return plan
}

// doorRush is the door of a large event: an activity of Sizes.DoorTickets
// registrations (10,000, seeded in bulk like the dataset, untimed), their
// tickets read untimed, and a check-in list with entry "once" and room
// for 80% of them. Sizes.DoorDevices (16) devices (each a door role's
// token) scan every ticket once and 10% of them again at another device,
// each scan a redeem with its own Idempotency-Key (door_rush). Afterwards
// the list's whole first ticket sync is read in pages of 1,000 and timed,
// and the list's history and counts are checked against the answers. Then the
// same rush runs again at a second list of the activity while 64 clients
// sign distinct users up for the hot activity (door_rush_signups), checked
// the same way; the hot activity is reset afterwards. signup_hot runs again
// just before the first rush and just after the second: the mean of the
// two is what both rushes are compared with.
func (b *bench) doorRush(ctx context.Context) error {
	n := b.cfg.DoorTickets
	room := max(1, n*doorRoomPercent/100)
	crowd, err := b.seedDoor(ctx, n)
	if err != nil {
		return err
	}
	regIDs, tickets := crowd.regIDs, crowd.tickets
	role := "door-" + b.nonce
	devices := make([]*client.Client, b.cfg.DoorDevices)
	for d := range devices {
		tok, err := b.auth.SignRoles(fmt.Sprintf("lt-%s-door-%d", b.nonce, d+1), []string{role}, 2*time.Hour)
		if err != nil {
			return fmt.Errorf("loadtest: sign the door tokens: %w", err)
		}
		devices[d] = b.api.WithToken(tok)
	}
	plan := planDoorScans(rand.New(rand.NewPCG(uint64(n), doorDuplicatePercent)), n, doorDuplicatePercent, len(devices))
	note := sizeNote("%d tickets at %d devices", [2]int{n, FullSizes.DoorTickets}, [2]int{len(devices), FullSizes.DoorDevices})
	if err := b.signupHotPlain(ctx, ScenarioSignupHotBeforeDoor); err != nil {
		return err
	}

	// The rush alone.
	list, err := b.createDoorList(ctx, crowd.activity, room, role, 1)
	if err != nil {
		return err
	}
	run := newDoorRun(n)
	out := b.drive(ctx, Load{Name: ScenarioDoorRush, Clients: len(devices), Duration: doorRushTimeout, MaxOps: int64(len(plan))},
		b.scanOp(list, plan, tickets, devices, run))
	res := out.Result(len(devices))
	res.Note = note
	b.report.Scenarios[ScenarioDoorRush] = res
	items, syncTime, err := b.syncDoor(ctx, devices[0], list)
	if err != nil {
		return err
	}
	v, history, listAfter, err := b.judgeDoor(ctx, run, list, regIDs, room)
	if err != nil {
		return err
	}
	sync := judgeSync(regIDs, history, items)

	// The rush again, at another list, while signups go on elsewhere.
	list2, err := b.createDoorList(ctx, crowd.activity, room, role, 2)
	if err != nil {
		return err
	}
	run2 := newDoorRun(n)
	if err := b.doorRushWithSignups(ctx, list2, plan, tickets, devices, run2, note); err != nil {
		return err
	}
	v2, _, _, err := b.judgeDoor(ctx, run2, list2, regIDs, room)
	if err != nil {
		return err
	}
	v.add(v2)

	ch := b.report.Checks
	ch[CheckDoorTickets] = int64(n)
	ch[CheckDoorScans] = int64(len(plan))
	ch[CheckDoorDevices] = int64(len(devices))
	ch[CheckDoorMaxInside] = int64(room)
	ch[CheckDoorEntered] = v.entered
	ch[CheckDoorInside] = v.inside
	ch[CheckDoorAlready] = run.already.Load()
	ch[CheckDoorRoomFull] = run.roomFull.Load()
	ch[CheckDoorOther] = run.other.Load() + run2.other.Load()
	ch[CheckDoorEnteredTwice] = v.enteredTwice
	ch[CheckDoorOverMax] = v.overMax
	ch[CheckDoorInsideOff] = v.insideOff
	ch[CheckDoorMismatched] = v.mismatched
	ch[CheckDoorUnjustified] = v.unjustified
	ch[CheckDoorSyncSeconds] = round(syncTime.Seconds(), 3)
	ch[CheckDoorSyncTickets] = sync.tickets
	ch[CheckDoorSyncInexact] = sync.inexact + sync.extra
	fmt.Fprintf(b.log, "%-16s %d tickets, %d scans at %d devices, room %d: entered %d, already checked in %d, room full %d, other %d; "+
		"list inside %d, checked in %d, history %d; entered twice %d, over the room %d, inside off %d, history mismatches %d, "+
		"unjustified refusals %d (both rushes); sync of %d tickets in %s (%d inexact, %d extra)\n",
		ScenarioDoorRush, n, len(plan), len(devices), room, v.entered, run.already.Load(), run.roomFull.Load(), ch[CheckDoorOther],
		listAfter.Inside, listAfter.CheckedIn, v.history, v.enteredTwice, v.overMax, v.insideOff, v.mismatched, v.unjustified,
		sync.tickets, syncTime.Round(time.Millisecond), sync.inexact, sync.extra)
	if err := b.dropDoorRecords(ctx, list.ID, list2.ID); err != nil {
		return err
	}
	if err := b.resetHot(ctx); err != nil {
		return err
	}
	return b.signupHotPlain(ctx, ScenarioSignupHotAfterDoor)
}

// dropDoorRecords deletes the check-ins and records of the rush's lists
// once judged, before the hot activity's reset deletes registrations they
// reference.
func (b *bench) dropDoorRecords(ctx context.Context, lists ...string) error {
	_, err := b.db.Exec(ctx, `
		WITH l AS (SELECT id FROM checkin_list WHERE public_id = ANY ($1)),
		     r AS (DELETE FROM checkin_record WHERE list_id IN (SELECT id FROM l))
		DELETE FROM checkin WHERE list_id IN (SELECT id FROM l)`, lists)
	if err != nil {
		return fatalError{fmt.Errorf("loadtest: drop the door's check-ins: %w", err)}
	}
	return nil
}

// scanOp is a rush's operation: scan i of the plan at its device's
// token, with a key of its own.
func (b *bench) scanOp(list client.CheckinList, plan []doorScan, tickets []string, devices []*client.Client, run *doorRun) Op {
	return func(ctx context.Context, _ int, i int64) error {
		s := plan[i]
		res, err := devices[s.device].Redeem(ctx, list.ID,
			client.RedeemRequest{Ticket: tickets[s.ticket], Device: fmt.Sprintf("door-%d", s.device+1)},
			fmt.Sprintf("lt-%s-%s-%d", b.nonce, list.ID, i))
		return run.record(s.ticket, res, err)
	}
}

// doorRushWithSignups runs the rush at list while 64 clients sign
// distinct users up for the hot activity until it ends, as activity_read
// does with its reads: the scans are door_rush_with_signups, the signups
// door_rush_signups.
func (b *bench) doorRushWithSignups(ctx context.Context, list client.CheckinList, plan []doorScan, tickets []string,
	devices []*client.Client, run *doorRun, note string) error {
	n := b.maxSignups()
	toks, err := b.tokens(ScenarioDoorRushSignups, n)
	if err != nil {
		return err
	}
	hot := b.seed.HotActivity
	if err := b.warmSeats(ctx, hot); err != nil {
		return err
	}
	rushCtx, rushDone := context.WithCancel(ctx)
	defer rushDone()
	var scans Outcome
	var wg sync.WaitGroup
	wg.Go(func() {
		defer rushDone()
		scans = Drive(rushCtx, Load{Name: ScenarioDoorRushLoaded, Clients: len(devices), Duration: doorRushTimeout, MaxOps: int64(len(plan))},
			b.log, b.scanOp(list, plan, tickets, devices, run))
	})
	// The signups end with the rush (an operation cut short by its end
	// counts neither way).
	out := b.drive(rushCtx, Load{Name: ScenarioDoorRushSignups, Clients: doorSignupClients, Duration: doorRushTimeout, MaxOps: int64(n)},
		func(ctx context.Context, _ int, i int64) error {
			return b.signupAdmitted(ctx, toks[i], hot)
		})
	wg.Wait()
	if ctx.Err() != nil {
		return ctx.Err()
	}
	res := scans.Result(len(devices))
	res.Note = note
	b.report.Scenarios[ScenarioDoorRushLoaded] = res
	b.report.Scenarios[ScenarioDoorRushSignups] = out.Result(doorSignupClients)
	return nil
}

// doorCrowd is door_rush's activity, its registrations and their
// tickets (in the same order).
type doorCrowd struct {
	activity        string
	regIDs, tickets []string
}

// seedDoor creates door_rush's activity with n seats and fills it with n
// approved registrations in one INSERT … SELECT generate_series, as Seed
// fills the dataset (then vacuums and analyzes the table as Seed does),
// and reads their tickets, untimed, as an admin from 64 clients.
func (b *bench) seedDoor(ctx context.Context, n int) (doorCrowd, error) {
	admin := b.api.WithToken(b.admin)
	a, err := admin.CreateActivity(ctx, client.NewActivity{Title: "Door rush " + b.nonce, Capacity: n})
	if err != nil {
		return doorCrowd{}, fmt.Errorf("loadtest: create the door's activity: %w", err)
	}
	t0 := time.Now()
	rows, err := b.db.Query(ctx, doorRegistrationsSQL, a.ID, n, "lt-"+b.nonce+"-door-")
	if err != nil {
		return doorCrowd{}, fatalError{fmt.Errorf("loadtest: seed the door's registrations: %w", err)}
	}
	regIDs, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return doorCrowd{}, fatalError{fmt.Errorf("loadtest: seed the door's registrations: %w", err)}
	}
	if len(regIDs) != n {
		return doorCrowd{}, fmt.Errorf("loadtest: seeded %d of %d door registrations", len(regIDs), n)
	}
	if _, err := b.db.Exec(ctx, `VACUUM (ANALYZE) registration`); err != nil {
		return doorCrowd{}, fatalError{fmt.Errorf("loadtest: vacuum after the door's seed: %w", err)}
	}
	fmt.Fprintf(b.log, "%-16s seeded %d registrations of %s and vacuumed (%s)\n", ScenarioDoorRush, n, a.ID, time.Since(t0).Round(time.Millisecond))
	tickets := make([]string, n)
	out := b.drive(ctx, Load{Name: "setup:tickets", Clients: 64, Duration: doorRushTimeout, MaxOps: int64(n)},
		func(ctx context.Context, _ int, i int64) error {
			t, err := admin.Ticket(ctx, regIDs[i])
			if err == nil && (t.RegistrationID != regIDs[i] || t.Ticket == "") {
				err = fmt.Errorf("ticket of %s: got %+v", regIDs[i], t)
			}
			tickets[i] = t.Ticket
			return err
		})
	if out.Errors > 0 || out.Ops < int64(n) {
		return doorCrowd{}, fmt.Errorf("loadtest: read %d of %d tickets: %v", out.Ops, n, out.FirstError)
	}
	return doorCrowd{activity: a.ID, regIDs: regIDs, tickets: tickets}, nil
}

// doorRegistrationsSQL inserts $2 approved registrations of the activity
// whose public id is $1, user ids $3 and their number, and returns their
// public ids in id order: "r_01JF", the activity's internal id in 8 hex
// digits and the registration's number in 14 (hex digits are Crockford
// base32 digits: a valid ULID, distinct from the dataset's "r_01JD…").
const doorRegistrationsSQL = `
	INSERT INTO registration (public_id, activity_id, user_id, status, created_at, updated_at)
	SELECT 'r_01JF' || lpad(upper(to_hex(a.id)), 8, '0') || lpad(upper(to_hex(g)), 14, '0'), a.id, $3 || g, 'approved', now(), now()
	FROM activity a, generate_series(1, $2::int) AS g
	WHERE a.public_id = $1
	ORDER BY g
	RETURNING public_id`

// createDoorList creates the k-th check-in list of the door's activity:
// entry once, room for room seats, worked by the role's devices.
func (b *bench) createDoorList(ctx context.Context, activity string, room int, role string, k int) (client.CheckinList, error) {
	l, err := b.api.WithToken(b.admin).CreateCheckinList(ctx, client.NewCheckinList{
		Name: fmt.Sprintf("Door rush %s, door %d", b.nonce, k), ActivityIDs: []string{activity},
		Entry: client.EntryOnce, MaxInside: &room, DoorRoles: []string{role}})
	if err != nil {
		return client.CheckinList{}, fmt.Errorf("loadtest: create the door's check-in list: %w", err)
	}
	return l, nil
}

// syncDoor reads the list's whole first ticket sync as a device does, in
// pages of 1,000, and returns its items and how long it took: until a
// page shorter than the limit, or one that names no registration the
// pages before did not (the last page of the first sync may be full; the
// feed then goes on with the changes since, none here). It logs how long
// each page took.
func (b *bench) syncDoor(ctx context.Context, device *client.Client, list client.CheckinList) ([]client.TicketSyncItem, time.Duration, error) {
	var items []client.TicketSyncItem
	var pages []time.Duration
	seen := map[string]bool{}
	cursor := ""
	t0 := time.Now()
	for {
		tp := time.Now()
		p, err := device.TicketSync(ctx, list.ID, cursor, doorSyncPage, 0)
		if err != nil {
			return nil, 0, fmt.Errorf("loadtest: sync the door's tickets: %w", err)
		}
		pages = append(pages, time.Since(tp).Round(time.Millisecond))
		fresh := 0
		for _, it := range p.Items {
			if !seen[it.RegistrationID] {
				seen[it.RegistrationID] = true
				fresh++
			}
		}
		items = append(items, p.Items...)
		cursor = p.NextCursor
		if len(p.Items) < doorSyncPage || fresh == 0 {
			break
		}
	}
	took := time.Since(t0)
	fmt.Fprintf(b.log, "%-16s ticket sync: %d items in %d pages, %s; pages %v\n", ScenarioDoorRush, len(items), len(pages),
		took.Round(time.Millisecond), pages)
	return items, took, nil
}

// judgeDoor reads the list and its whole history after a rush and judges
// them.
func (b *bench) judgeDoor(ctx context.Context, run *doorRun, list client.CheckinList, regIDs []string, room int) (doorVerdict, []client.CheckIn, client.CheckinList, error) {
	admin := b.api.WithToken(b.admin)
	l, err := admin.GetCheckinList(ctx, list.ID)
	if err != nil {
		return doorVerdict{}, nil, l, fmt.Errorf("loadtest: read the door's check-in list: %w", err)
	}
	var history []client.CheckIn
	after := int64(0)
	for {
		f, err := admin.Checkins(ctx, list.ID, after, 500)
		if err != nil {
			return doorVerdict{}, nil, l, fmt.Errorf("loadtest: read the door's check-ins: %w", err)
		}
		history = append(history, f.Items...)
		if len(f.Items) == 0 || f.NextAfter <= after {
			break
		}
		after = f.NextAfter
	}
	return run.judge(regIDs, history, l, room), history, l, nil
}
