package registration_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd"
	"github.com/physiciansnet/capacityd/internal/test/testenv"
	"github.com/physiciansnet/capacityd/registration"
	"github.com/physiciansnet/capacityd/store"
)

// twin is a service on a database of its own; two twins are given the same
// commands, one of them with poisoned ones among them.
type twin struct {
	svc   *registration.Service
	store *store.Store
}

func newTwin(t *testing.T, now time.Time) twin {
	st := store.New(testenv.Pool(t, testenv.NewDatabase(t), 4))
	svc := registration.NewService(registration.Config{Store: st, Now: func() time.Time { return now }})
	t.Cleanup(func() { _ = svc.Close(context.Background()) })
	return twin{svc: svc, store: st}
}

// answer is what a client can tell of a command's outcome.
type answer struct {
	Code                      string
	RegID, Status             string
	Position                  int
	Expires, Replayed, Change bool
	Capacity, Taken, Waiting  int
	Waitlist                  bool
}

func answerOf(o registration.Outcome, err error) answer {
	if err == nil {
		err = o.Err
	}
	a := answer{Code: capacityd.ErrorCode(err), Replayed: o.Replayed, Change: o.Changed}
	if r := o.Registration; r != nil && err == nil {
		a.RegID, a.Status, a.Expires = r.ID, string(r.Status), r.ExpiresAt != nil
		if r.WaitlistPosition != nil {
			a.Position = *r.WaitlistPosition
		}
	}
	if ac := o.Activity; ac != nil && err == nil {
		a.Capacity, a.Taken, a.Waiting, a.Waitlist = ac.Capacity, ac.Taken, ac.Waiting, ac.Waitlist
	}
	return a
}

// commandMaker makes random commands of every kind against what it has
// seen of the twins' registrations.
type commandMaker struct {
	rng  *rand.Rand
	n    int
	regs map[string][]registration.Registration // per activity, as last answered
}

func (m *commandMaker) next(activity string) registration.Command {
	m.n++
	admin := registration.Origin{Actor: "admin:root", RequestID: fmt.Sprintf("req-%d", m.n)}
	known := m.regs[activity]
	kind := m.rng.IntN(10)
	if len(known) == 0 && kind >= 4 {
		kind = 0
	}
	switch {
	case kind < 4: // a new signup, some with an idempotency key
		c := registration.SignupCommand{
			Origin:         registration.Origin{Actor: fmt.Sprintf("user:u%d", m.n), RequestID: fmt.Sprintf("req-%d", m.n)},
			RegistrationID: fmt.Sprintf("r_iso%d", m.n), UserID: fmt.Sprintf("u%d", m.n), Metadata: []byte(`{}`),
		}
		if m.rng.IntN(3) == 0 {
			c.IdempotencyKey, c.RequestHash = fmt.Sprintf("key-%d", m.n), []byte("h")
		}
		return c
	case kind == 4: // a second signup of a user who has one
		r := known[m.rng.IntN(len(known))]
		return registration.SignupCommand{Origin: registration.Origin{Actor: "user:" + r.UserID},
			RegistrationID: fmt.Sprintf("r_iso%d", m.n), UserID: r.UserID, Metadata: []byte(`{}`)}
	case kind < 7:
		r := known[m.rng.IntN(len(known))]
		caller := registration.Caller{UserID: r.UserID}
		return registration.CancelCommand{Origin: registration.Origin{Actor: caller.Actor()}, RegistrationID: r.ID, Caller: caller}
	case kind < 9:
		r := known[m.rng.IntN(len(known))]
		to := []registration.Status{registration.AwaitingPayment, registration.Approved}[m.rng.IntN(2)]
		return registration.StatusCommand{Origin: admin, RegistrationID: r.ID, To: to}
	default:
		capacity, waitlist := m.rng.IntN(6), m.rng.IntN(2) == 0
		return registration.ActivityCommand{Origin: admin, Patch: registration.ActivityPatch{Capacity: &capacity, Waitlist: &waitlist}}
	}
}

// poison gives c data that PostgreSQL refuses: a request id, an actor, a
// user id or a title that is not valid text, as a command would carry if a
// check before the queue missed it.
func poison(rng *rand.Rand, c registration.Command) registration.Command {
	o := registration.Origin{Actor: "user:mallory", RequestID: "\xff\xfe"}
	if rng.IntN(2) == 0 {
		o = registration.Origin{Actor: "user:mal\x00lory", RequestID: "ok"}
	}
	switch c := c.(type) {
	case registration.SignupCommand:
		c.Origin = o
		if rng.IntN(3) == 0 {
			c.UserID = "mal\xfflory"
		}
		return c
	case registration.CancelCommand:
		c.Origin = o
		return c
	case registration.StatusCommand:
		c.Origin = o
		return c
	case registration.ActivityCommand:
		// An activity change records no event of its own: its title is
		// what it writes.
		title := "title\x00"
		c.Origin, c.Patch.Title = o, &title
		return c
	}
	panic("unknown command")
}

// A change transaction shared by the commands of several activities: one
// poisoned command at a random place fails alone (or, when it changes
// nothing, harms nothing), and every other command gets exactly the answer
// it gets from a twin service that never saw the poisoned one, for every
// kind of command; both authorities end in the same state.
func TestAPoisonedCommandFailsAloneInItsBatch(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	dirty, clean := newTwin(t, now), newTwin(t, now)
	activities := []string{"a_iso1", "a_iso2", "a_iso3", "a_iso4"}
	for i, id := range activities {
		for _, tw := range []twin{dirty, clean} {
			_, err := tw.store.CreateActivity(ctx, id, registration.NewActivity{Title: id, Capacity: 2 + i, HoldSeconds: 900, Waitlist: i%2 == 0})
			require.NoError(t, err)
		}
	}
	rng := rand.New(rand.NewPCG(7, 29))
	m := &commandMaker{rng: rng, regs: map[string][]registration.Registration{}}
	poisonedKinds := map[string]int{}
	for round := range 60 {
		var dirtyIn, cleanIn []registration.CommandBatch
		type place struct{ batch, cmd int }
		var places []place
		for _, id := range activities[:1+rng.IntN(len(activities))] {
			b := registration.CommandBatch{ActivityID: id}
			for range 1 + rng.IntN(12) {
				b.Commands = append(b.Commands, m.next(id))
			}
			for j := range b.Commands {
				places = append(places, place{len(dirtyIn), j})
			}
			dirtyIn = append(dirtyIn, b)
		}
		bad := places[rng.IntN(len(places))]
		for i, b := range dirtyIn {
			cmds := append([]registration.Command(nil), b.Commands...)
			if i == bad.batch {
				poisoned := poison(rng, cmds[bad.cmd])
				poisonedKinds[fmt.Sprintf("%T", poisoned)]++
				cmds[bad.cmd] = poisoned
				dirtyIn[i].Commands = cmds
				cmds = append(append([]registration.Command(nil), cmds[:bad.cmd]...), cmds[bad.cmd+1:]...)
			}
			if len(cmds) > 0 {
				cleanIn = append(cleanIn, registration.CommandBatch{ActivityID: b.ActivityID, Commands: cmds})
			}
		}

		dirtyOut, dirtyErrs := dirty.svc.ApplyBatches(ctx, dirtyIn)
		cleanOut, cleanErrs := clean.svc.ApplyBatches(ctx, cleanIn)
		k := 0
		for i, b := range dirtyIn {
			skipped := 0
			for j := range b.Commands {
				got := answerOf(dirtyOut[i][j], dirtyErrs[i][j])
				if i == bad.batch && j == bad.cmd {
					// It fails on its data, or it wrote nothing (a
					// refusal, a second cancel) and so harmed nothing.
					if got.Code != capacityd.EInvalid {
						require.False(t, got.Change, "round %d: a poisoned command that did not fail changed nothing", round)
					}
					skipped = 1
					continue
				}
				ci := k
				if len(cleanIn[ci].Commands) == 0 || cleanIn[ci].ActivityID != b.ActivityID {
					t.Fatalf("round %d: batches out of step", round)
				}
				want := answerOf(cleanOut[ci][j-skipped], cleanErrs[ci][j-skipped])
				require.Equal(t, want, got, "round %d activity %s command %d (%T)", round, b.ActivityID, j, b.Commands[j])
				if r := dirtyOut[i][j].Registration; r != nil {
					m.remember(*r)
				}
			}
			if len(b.Commands) > skipped {
				k++
			}
		}
		for _, id := range activities {
			da, err := dirty.store.GetActivity(ctx, id)
			require.NoError(t, err)
			ca, err := clean.store.GetActivity(ctx, id)
			require.NoError(t, err)
			require.Equal(t, []int{ca.Capacity, ca.Taken, ca.Waiting}, []int{da.Capacity, da.Taken, da.Waiting}, "round %d activity %s", round, id)
		}
	}
	for _, kind := range []string{"registration.SignupCommand", "registration.CancelCommand", "registration.StatusCommand", "registration.ActivityCommand"} {
		require.Positive(t, poisonedKinds[kind], "no %s was poisoned: the rounds did not cover it", kind)
	}
	t.Logf("poisoned commands by kind: %v", poisonedKinds)
}

// remember keeps the latest answer of a registration.
func (m *commandMaker) remember(r registration.Registration) {
	list := m.regs[r.ActivityID]
	for i := range list {
		if list[i].ID == r.ID {
			list[i] = r
			return
		}
	}
	m.regs[r.ActivityID] = append(list, r)
}

// The batched reads isolate a poisoned request too: a full check (the
// seats a shed signup is refused on) or a registration lookup with an id
// PostgreSQL refuses fails alone, the others get the answers they get
// without it.
func TestAPoisonedReadFailsAloneInItsBatch(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tw := newTwin(t, time.Now())
	for i, id := range []string{"a_iso1", "a_iso2"} {
		_, err := tw.store.CreateActivity(ctx, id, registration.NewActivity{Title: id, Capacity: 1 + i, HoldSeconds: 900})
		require.NoError(t, err)
	}
	var regIDs []string
	for _, id := range []string{"a_iso1", "a_iso2"} {
		out, errs := tw.svc.ApplyBatches(ctx, []registration.CommandBatch{{ActivityID: id, Commands: []registration.Command{
			registration.SignupCommand{Origin: registration.Origin{Actor: "user:ann"}, RegistrationID: "r_" + id, UserID: "ann", Metadata: []byte(`{}`)},
		}}})
		require.NoError(t, errs[0][0])
		require.NoError(t, out[0][0].Err)
		regIDs = append(regIDs, out[0][0].Registration.ID)
	}

	checks := []registration.FullCheck{{ActivityID: "a_iso1", UserIDs: []string{"ann", "bob"}}, {ActivityID: "a_iso2", UserIDs: []string{"ann", "cy"}}}
	want, errs := tw.svc.CheckFullBatches(ctx, checks)
	for _, e := range errs {
		require.Equal(t, []error{nil, nil}, e)
	}
	for pos := range 3 {
		users := append([]string(nil), checks[1].UserIDs...)
		users = append(users[:pos:pos], append([]string{"\xff"}, users[pos:]...)...)
		got, errs := tw.svc.CheckFullBatches(ctx, []registration.FullCheck{checks[0], {ActivityID: "a_iso2", UserIDs: users}})
		require.Equal(t, want[0], got[0], "the other activity's checks")
		for j := range users {
			if j == pos {
				require.True(t, capacityd.IsCode(errs[1][j], capacityd.EInvalid), "the poisoned check fails alone: %v", errs[1][j])
				continue
			}
			wj := j
			if j > pos {
				wj--
			}
			require.NoError(t, errs[1][j])
			require.Equal(t, want[1][wj], got[1][j])
		}
	}

	ids := []string{regIDs[0], "\xff\xfe", "r_nothing", regIDs[1]}
	regs, errs2 := tw.svc.LookupBatch(ctx, ids)
	require.True(t, capacityd.IsCode(errs2[1], capacityd.EInvalid), "the poisoned lookup fails alone: %v", errs2[1])
	for _, j := range []int{0, 2, 3} {
		require.NoError(t, errs2[j])
	}
	require.Equal(t, regIDs[0], regs[0].ID)
	require.Nil(t, regs[2])
	require.Equal(t, regIDs[1], regs[3].ID)
}
