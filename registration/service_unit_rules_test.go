package registration

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd"
)

// unitSignupCmd is a signup command as the Service makes it, with a
// display hold named after its user.
func unitSignupCmd(user string) SignupCommand {
	return SignupCommand{Origin: Origin{Actor: "user:" + user, RequestID: "req-" + user},
		RegistrationID: "r_" + user, UserID: user, Metadata: []byte(`{}`), Hold: Hold{Gen: "h-" + user}}
}

func TestUnitIsolationSplitsOnlyWhatMayBeOneCommandsFault(t *testing.T) {
	t.Parallel()
	malloryIn := func(batches []CommandBatch) bool {
		for _, b := range batches {
			for _, c := range b.Commands {
				if c, ok := c.(SignupCommand); ok && c.UserID == "mallory" {
					return true
				}
			}
		}
		return false
	}
	for _, tc := range []struct {
		name string
		// poison makes mallory's command fail the transactions it is in.
		poison func(*MemStore, *SignupCommand)
		split  bool
		code   string
	}{
		{"a value the schema refuses", func(_ *MemStore, c *SignupCommand) { c.RequestID = "\xff\xfe" }, true, capacityd.EInvalid},
		{"an unexpected error", func(m *MemStore, _ *SignupCommand) {
			m.OnApply(func(batches []CommandBatch) error {
				if malloryIn(batches) {
					return errors.New("unexpected")
				}
				return nil
			})
		}, true, capacityd.EInternal},
		{"an unavailable database", func(m *MemStore, _ *SignupCommand) {
			m.OnApply(func(batches []CommandBatch) error {
				if malloryIn(batches) {
					return capacityd.Unavailable(errors.New("connection reset"), "the database is unavailable")
				}
				return nil
			})
		}, false, capacityd.EUnavailable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newUnitEnv(t, unitOptions{})
			a, b := e.activity(t, 10, false), e.activity(t, 10, false)
			mallory := unitSignupCmd("mallory")
			tc.poison(e.store, &mallory)
			batches := []CommandBatch{
				{ActivityID: a, Commands: []Command{unitSignupCmd("a1"), unitSignupCmd("a2"), unitSignupCmd("a3"),
					mallory, unitSignupCmd("a4"), unitSignupCmd("a5")}},
				{ActivityID: b, Commands: []Command{unitSignupCmd("b1"), unitSignupCmd("b2")}},
			}
			outs, errs := e.svc.ApplyBatches(t.Context(), batches)

			calls := e.store.ApplyCalls()
			require.Equal(t, batches, calls[0], "the first transaction had every command")
			committed, failed := e.seen.holds()
			if !tc.split {
				require.Len(t, calls, 1, "a failure that is nobody's data is not split")
				for i, es := range errs {
					for j, err := range es {
						require.True(t, capacityd.IsCode(err, tc.code), "%d/%d: %v", i, j, err)
					}
				}
				require.Empty(t, e.store.Registrations(a))
				require.Empty(t, e.store.Registrations(b))
				require.Empty(t, committed)
				require.Len(t, failed, 8, "every hold goes back")
				return
			}
			require.Greater(t, len(calls), 1, "the transaction was split")
			for i, batch := range batches {
				for j, c := range batch.Commands {
					if c.(SignupCommand).UserID == "mallory" {
						require.True(t, capacityd.IsCode(errs[i][j], tc.code), "%v", errs[i][j])
						continue
					}
					require.NoError(t, errs[i][j])
					require.Equal(t, Pending, outs[i][j].Registration.Status)
				}
			}
			// The commands that committed did so once, their events
			// numbered without a gap.
			for act, n := range map[string]int{a: 5, b: 2} {
				require.Len(t, e.store.Registrations(act), n)
				evs := e.store.Events(act)
				require.Len(t, evs, n)
				for k, ev := range evs {
					require.Equal(t, int64(k+1), ev.Seq)
				}
			}
			require.Equal(t, []Hold{{Gen: "h-mallory"}}, failed)
			require.Len(t, committed, 7)
		})
	}

	t.Run("an activity that does not exist", func(t *testing.T) {
		t.Parallel()
		e := newUnitEnv(t, unitOptions{})
		b := e.activity(t, 10, false)
		_, errs := e.svc.ApplyBatches(t.Context(), []CommandBatch{
			{ActivityID: "a_gone", Commands: []Command{unitSignupCmd("g1"), unitSignupCmd("g2")}},
			{ActivityID: b, Commands: []Command{unitSignupCmd("b1"), unitSignupCmd("b2")}},
		})
		require.Len(t, e.store.ApplyCalls(), 1, "a refusal every command of a batch shares is not split")
		for _, err := range errs[0] {
			require.True(t, capacityd.IsCode(err, capacityd.ENotFound), "%v", err)
		}
		for _, err := range errs[1] {
			require.NoError(t, err)
		}
		require.Len(t, e.store.Registrations(b), 2)
	})
}

func TestUnitExpiryExpiresDueHoldsAndPromotesTheLine(t *testing.T) {
	t.Parallel()
	e := newUnitEnv(t, unitOptions{})
	act := e.activity(t, 1, true)
	admin := Caller{UserID: "root", Admin: true}
	ann, _, err := e.svc.Signup(t.Context(), unitSignup(act, "ann"))
	require.NoError(t, err)
	bob, _, err := e.svc.Signup(t.Context(), unitSignup(act, "bob"))
	require.NoError(t, err)
	require.Equal(t, Waitlisted, bob.Status)

	held, err := e.svc.SetStatus(t.Context(), ann.ID, AwaitingPayment, admin)
	require.NoError(t, err)
	require.Equal(t, unitEpoch.Add(60*time.Second), *held.ExpiresAt, "the service's clock plus the activity's hold")

	applies := len(e.store.ApplyCalls())
	e.clock.Advance(59 * time.Second)
	n, err := e.svc.ExpireDue(t.Context())
	require.NoError(t, err)
	require.Zero(t, n)
	require.Len(t, e.store.ApplyCalls(), applies, "nothing due, nothing applied")

	e.clock.Advance(time.Second)
	n, err = e.svc.ExpireDue(t.Context())
	require.NoError(t, err)
	require.Equal(t, 1, n, "due at its deadline")

	regs, errs := e.svc.LookupBatch(t.Context(), []string{ann.ID, bob.ID})
	require.NoError(t, errors.Join(errs...))
	require.Equal(t, Expired, regs[0].Status)
	require.Nil(t, regs[0].ExpiresAt)
	require.Equal(t, Pending, regs[1].Status, "the freed seat went to the first in line")
	require.Nil(t, regs[1].WaitlistPosition)

	var types []EventType
	for _, ev := range e.store.Events(act) {
		types = append(types, ev.Type)
	}
	require.Equal(t, []EventType{EventCreated, EventWaitlisted, EventStatusChanged, EventExpired, EventPromoted}, types)
	commits := e.seen.Commits()
	last := commits[len(commits)-1]
	require.Len(t, last.Events, 2)
	require.Equal(t, ActorSystem, last.Events[0].Actor)
	require.Equal(t, ActorSystem, last.Events[1].Actor)
	require.Equal(t, [3]int{1, 0, 5}, [3]int{last.State.Taken, last.State.Waiting, int(last.State.LastSeq)})

	n, err = e.svc.ExpireDue(t.Context())
	require.NoError(t, err)
	require.Zero(t, n, "an expired hold is not due again")
	// A late payment re-admits only to a free seat: bob has it.
	_, err = e.svc.SetStatus(t.Context(), ann.ID, Approved, admin)
	require.True(t, capacityd.IsCode(err, capacityd.EActivityFull), "%v", err)
}

func TestUnitAnIdempotentReplayWritesNothing(t *testing.T) {
	t.Parallel()
	e := newUnitEnv(t, unitOptions{})
	act := e.activity(t, 1, false)
	in := unitSignup(act, "ann")
	in.IdempotencyKey, in.Metadata = "k-ann", []byte(`{"seat":"aisle"}`)
	first, replayed, err := e.svc.Signup(t.Context(), in)
	require.NoError(t, err)
	require.False(t, replayed)

	written := func() [3]int {
		return [3]int{len(e.store.ApplyCalls()), len(e.store.Events(act)), e.store.Records()}
	}
	before := written()
	again, replayed, err := e.svc.Signup(t.Context(), in)
	require.NoError(t, err)
	require.True(t, replayed)
	require.Equal(t, first.ID, again.ID)
	require.Equal(t, first.Status, again.Status)
	require.Equal(t, first.CreatedAt, again.CreatedAt)
	require.JSONEq(t, `{"seat":"aisle"}`, string(again.Metadata))
	require.Equal(t, before, written(), "a replay runs no transaction and writes nothing")

	// The same key with another body is a conflict, and writes nothing.
	other := in
	other.Metadata = []byte(`{"seat":"window"}`)
	_, _, err = e.svc.Signup(t.Context(), other)
	require.True(t, capacityd.IsCode(err, capacityd.EIdempotencyConflict), "%v", err)
	require.Equal(t, before, written())

	// A refusal is replayed too, even once a seat is free.
	bob := unitSignup(act, "bob")
	bob.IdempotencyKey = "k-bob"
	_, replayed, err = e.svc.Signup(t.Context(), bob)
	require.True(t, capacityd.IsCode(err, capacityd.EActivityFull), "%v", err)
	require.False(t, replayed)
	_, err = e.svc.Cancel(t.Context(), first.ID, Caller{UserID: "ann"})
	require.NoError(t, err)
	before = written()
	_, replayed, err = e.svc.Signup(t.Context(), bob)
	require.True(t, capacityd.IsCode(err, capacityd.EActivityFull), "%v", err)
	require.True(t, replayed)
	require.Equal(t, before, written())

	// Two first uses of one key in one transaction make one registration.
	c1, c2, c3 := unitSignupCmd("cara"), unitSignupCmd("cara"), unitSignupCmd("cara")
	c2.RegistrationID, c3.RegistrationID = "r_cara2", "r_cara3"
	for _, c := range []*SignupCommand{&c1, &c2, &c3} {
		c.IdempotencyKey, c.RequestHash = "k-cara", []byte("same")
	}
	c3.RequestHash = []byte("other")
	outs, errs := e.svc.ApplyBatches(t.Context(), []CommandBatch{{ActivityID: act, Commands: []Command{c1, c2, c3}}})
	require.NoError(t, errs[0][0])
	require.Equal(t, Pending, outs[0][0].Registration.Status)
	require.True(t, outs[0][1].Replayed)
	require.False(t, outs[0][1].Changed)
	require.Equal(t, outs[0][0].Registration.ID, outs[0][1].Registration.ID)
	require.True(t, capacityd.IsCode(outs[0][2].Err, capacityd.EIdempotencyConflict), "%v", outs[0][2].Err)
	n := 0
	for _, r := range e.store.Registrations(act) {
		if r.UserID == "cara" {
			n++
		}
	}
	require.Equal(t, 1, n)
	require.Equal(t, before[2]+1, e.store.Records(), "one record of the key")
}

func TestUnitReadsPageInOrder(t *testing.T) {
	t.Parallel()
	e := newUnitEnv(t, unitOptions{})
	act := e.activity(t, 2, true)
	var regs []Registration
	for _, u := range unitUsers("u", 5) {
		r, _, err := e.svc.Signup(t.Context(), unitSignup(act, u))
		require.NoError(t, err)
		regs = append(regs, r)
	}
	ctx := t.Context()

	// An activity's registrations, in creation order, with places in line.
	var ids []string
	var positions []int
	f := ListFilter{ActivityID: act, Limit: 2}
	for pages := 0; ; pages++ {
		require.Less(t, pages, 3)
		p, err := e.svc.ListRegistrations(ctx, f)
		require.NoError(t, err)
		for _, r := range p.Items {
			ids = append(ids, r.ID)
			positions = append(positions, unitPlace(r))
		}
		if p.NextCursor == nil {
			break
		}
		f.After, err = DecodeCursor(*p.NextCursor, RegistrationCursor)
		require.NoError(t, err)
	}
	require.Equal(t, []string{regs[0].ID, regs[1].ID, regs[2].ID, regs[3].ID, regs[4].ID}, ids)
	require.Equal(t, []int{0, 0, 1, 2, 3}, positions)
	p, err := e.svc.ListRegistrations(ctx, ListFilter{ActivityID: act, Status: Waitlisted})
	require.NoError(t, err)
	require.Len(t, p.Items, 3)
	_, err = e.svc.ListRegistrations(ctx, ListFilter{ActivityID: act, After: "r_none"})
	require.True(t, capacityd.IsCode(err, capacityd.EInvalid), "%v", err)
	_, err = e.svc.ListRegistrations(ctx, ListFilter{ActivityID: "a_none"})
	require.True(t, capacityd.IsCode(err, capacityd.ENotFound), "%v", err)

	// A user's registrations, newest first.
	other := e.activity(t, 1, false)
	second, _, err := e.svc.Signup(ctx, unitSignup(other, "u00"))
	require.NoError(t, err)
	mine, err := e.svc.UserRegistrations(ctx, UserFilter{UserID: "u00", Limit: 1})
	require.NoError(t, err)
	require.Equal(t, second.ID, mine.Items[0].ID)
	require.NotNil(t, mine.NextCursor)
	mine, err = e.svc.UserRegistrations(ctx, UserFilter{UserID: "u00", Before: second.ID})
	require.NoError(t, err)
	require.Equal(t, regs[0].ID, mine.Items[0].ID)
	require.Nil(t, mine.NextCursor)

	// Activities, newest first.
	acts, err := e.svc.ListActivities(ctx, "", 1)
	require.NoError(t, err)
	require.Equal(t, other, acts.Items[0].ID)
	acts, err = e.svc.ListActivities(ctx, other, 0)
	require.NoError(t, err)
	require.Equal(t, act, acts.Items[0].ID)
	require.Equal(t, [2]int{2, 3}, [2]int{acts.Items[0].Taken, acts.Items[0].Waiting})

	// The event feed and a registration's history.
	feed, err := e.svc.ActivityEvents(ctx, EventFilter{ActivityID: act, After: 2, Limit: 2})
	require.NoError(t, err)
	require.Equal(t, []int64{3, 4}, []int64{feed.Items[0].Seq, feed.Items[1].Seq})
	require.Equal(t, int64(4), feed.NextAfter)
	require.Equal(t, EventID(act, 3), feed.Items[0].ID)
	hist, err := e.svc.RegistrationEvents(ctx, regs[2].ID, Caller{UserID: "u02"})
	require.NoError(t, err)
	require.Len(t, hist, 1)
	require.Equal(t, EventWaitlisted, hist[0].Type)
	_, err = e.svc.RegistrationEvents(ctx, regs[2].ID, Caller{UserID: "u03"})
	require.True(t, capacityd.IsCode(err, capacityd.ENotFound), "another's registration reads as not found: %v", err)
	_, err = e.svc.Cancel(ctx, regs[2].ID, Caller{UserID: "u03"})
	require.True(t, capacityd.IsCode(err, capacityd.ENotFound), "%v", err)

	// The export, in creation order.
	var exported []string
	err = e.svc.ExportRegistrations(ctx, act, "", func(r Registration) error {
		require.Nil(t, r.WaitlistPosition)
		exported = append(exported, r.ID)
		return nil
	})
	require.NoError(t, err)
	require.Equal(t, ids, exported)
}

// unitPlace returns a registration's place in line, 0 when it is not in
// line.
func unitPlace(r Registration) int {
	if r.WaitlistPosition == nil {
		return 0
	}
	return *r.WaitlistPosition
}

// Faults injected into the MemStore fail the calls they are injected
// into, and nothing else: the Service answers them unavailable.
func TestUnitMemStoreFaultsFailTheCallsTheyAreInjectedInto(t *testing.T) {
	t.Parallel()
	e := newUnitEnv(t, unitOptions{})
	act := e.activity(t, 1, false)
	r, _, err := e.svc.Signup(t.Context(), unitSignup(act, "ann"))
	require.NoError(t, err)

	e.store.FailNext(MemGetRegistrations, capacityd.Unavailable(errors.New("down"), "the database is unavailable"))
	_, err = e.svc.Cancel(t.Context(), r.ID, Caller{UserID: "ann"})
	require.True(t, capacityd.IsCode(err, capacityd.EUnavailable), "%v", err)

	e.store.FailNext(MemApply, capacityd.Unavailable(errors.New("down"), "the database is unavailable"))
	_, err = e.svc.Cancel(t.Context(), r.ID, Caller{UserID: "ann"})
	require.True(t, capacityd.IsCode(err, capacityd.EUnavailable), "%v", err)
	require.Equal(t, Pending, e.store.Registrations(act)[0].Status, "nothing written")

	// A blocked read whose context ends fails unavailable.
	block := e.store.BlockNext(MemFindOutcome)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		in := unitSignup(act, "bob")
		in.IdempotencyKey = "k"
		_, _, err := e.svc.Signup(ctx, in)
		done <- err
	}()
	unitAwait(t, block.Entered(), "the blocked read")
	cancel()
	select {
	case err := <-done:
		require.True(t, capacityd.IsCode(err, capacityd.EUnavailable), "%v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("the blocked read did not end with its context")
	}

	got, err := e.svc.Cancel(t.Context(), r.ID, Caller{UserID: "ann"})
	require.NoError(t, err)
	require.Equal(t, Cancelled, got.Status)
}
