package onsale

import (
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd/registration"
)

func line(rate, absent int) Line {
	return Line{ActivityID: "a_1", Shuffled: true, Settings: registration.QueueSettings{AdmitPerSecond: rate, MaxAdmitted: 10,
		TokenSeconds: 60, AbsentSeconds: absent}}
}

func pos(n int64) *int64 { return &n }

// TestTicketOfAWaitingPlace: ahead, the estimate and the poll delay follow
// the distance from the front; a far place asks seldom, but often enough
// to keep it.
func TestTicketOfAWaitingPlace(t *testing.T) {
	t.Parallel()
	now := time.Now()
	l := line(50, 60)
	l.Head, l.Waiting, l.AdmittedThrough = pos(101), 10_000, 100
	near := ticketOf(Place{ActivityID: "a_1", UserID: "u", State: Waiting, Position: pos(110)}, l, now)
	require.Equal(t, int64(9), *near.Ahead)
	require.Equal(t, int64(1), *near.EstimatedWaitSeconds, "within the cap")
	require.InDelta(t, 1000, near.PollAfterMS, 200, "near the front: every second")
	far := ticketOf(Place{ActivityID: "a_1", UserID: "u", State: Waiting, Position: pos(9_000)}, l, now)
	require.Equal(t, int64(8_899), *far.Ahead)
	require.Equal(t, int64(178+60), *far.EstimatedWaitSeconds, "the rate, and beyond the cap the tokens out")
	require.LessOrEqual(t, far.PollAfterMS, int64(20_000*12/10), "at most a third of absent_seconds, with jitter")
	require.Greater(t, far.PollAfterMS, near.PollAfterMS)
	require.Nil(t, far.AdmissionToken)
}

// TestTicketOfOtherStates: before the opening a place has no position and
// is told to come back in the first second after it; an admitted place carries its token
// until it expires; a line sold out says so.
func TestTicketOfOtherStates(t *testing.T) {
	t.Parallel()
	now := time.Now()
	l := line(10, 600)
	opens := now.Add(30 * time.Second)
	l.OpensAt, l.Shuffled = &opens, false
	early := ticketOf(Place{State: Waiting}, l, now)
	require.Nil(t, early.Position)
	require.Nil(t, early.Ahead)
	require.Nil(t, early.EstimatedWaitSeconds)
	for range 100 {
		d := ticketOf(Place{State: Waiting}, l, now).PollAfterMS
		require.GreaterOrEqual(t, d, int64(30_000), "not before the opening")
		require.LessOrEqual(t, d, int64(31_000), "within a second after it")
	}
	far := l
	farOpens := now.Add(time.Hour)
	far.OpensAt = &farOpens
	require.LessOrEqual(t, ticketOf(Place{State: Waiting}, far, now).PollAfterMS, int64(200_000*12/10),
		"an opening further than a holder may stay unseen: back in time to keep the place")

	token, exp := "adm_x", now.Add(time.Minute)
	admitted := ticketOf(Place{State: Admitted, Position: pos(3), Token: &token, TokenExpiresAt: &exp}, line(10, 60), now)
	require.Equal(t, Admitted, admitted.State)
	require.Equal(t, &token, admitted.AdmissionToken)
	lapsed := ticketOf(Place{State: Admitted, Position: pos(3), Token: &token, TokenExpiresAt: &exp}, line(10, 60), exp)
	require.Equal(t, Expired, lapsed.State)
	require.Nil(t, lapsed.AdmissionToken, "an expired token is not shown")

	sold := line(10, 60)
	sold.SoldOut = true
	require.Equal(t, SoldOut, ticketOf(Place{State: Waiting, Position: pos(5)}, sold, now).State)
}

// TestJitterSpreadsAndBounds: ±20 %, never below.
func TestJitterSpreadsAndBounds(t *testing.T) {
	t.Parallel()
	seen := map[int64]bool{}
	for range 1000 {
		j := jitter(10_000)
		require.GreaterOrEqual(t, j, int64(8_000))
		require.LessOrEqual(t, j, int64(12_000))
		seen[j/500] = true
	}
	require.Greater(t, len(seen), 5, "spread over the range")
}

// TestCryptoShuffleIsAPermutationWithoutFavourites: every order is a
// permutation, and over many draws each place lands first about as often.
func TestCryptoShuffleIsAPermutationWithoutFavourites(t *testing.T) {
	t.Parallel()
	const n, draws = 5, 20_000
	first := make([]int, n)
	for range draws {
		p := cryptoShuffle(n)
		require.Equal(t, []int{0, 1, 2, 3, 4}, slices.Sorted(slices.Values(p)))
		first[p[0]]++
	}
	for i, c := range first {
		require.InDelta(t, draws/n, c, 300, "place %d first %d times of %d", i, c, draws) // about 5 standard deviations
	}
}

// TestStaleSaysWhenToAskTheAuthority: a waiting place is read again once
// the line reached it, shuffled it, sold out, or its holder was not seen
// here for half the absence allowed; an admitted one after a second.
func TestStaleSaysWhenToAskTheAuthority(t *testing.T) {
	t.Parallel()
	q := New(nil, Options{})
	now := time.Now()
	l := line(10, 60)
	l.AdmittedThrough = 10
	fresh := &cachedPlace{place: Place{State: Waiting, Position: pos(20)}, readAt: now, askedAt: now}
	require.False(t, q.stale(fresh, l, now))
	require.True(t, q.stale(fresh, l, now.Add(31*time.Second)), "not seen here for half of absent_seconds")
	reached := *fresh
	reached.place.Position = pos(10)
	require.True(t, q.stale(&reached, l, now))
	unshuffled := *fresh
	unshuffled.place.Position = nil
	require.True(t, q.stale(&unshuffled, l, now))
	sold := l
	sold.SoldOut = true
	require.True(t, q.stale(fresh, sold, now))
	admitted := &cachedPlace{place: Place{State: Admitted}, readAt: now, askedAt: now}
	require.False(t, q.stale(admitted, l, now.Add(500*time.Millisecond)))
	require.True(t, q.stale(admitted, l, now.Add(1100*time.Millisecond)))
}

// TestTheEstimateCountsTheTokensOut: a place at the front of a line whose
// cap is taken by unused tokens waits for them; one within the cap's free
// room does not.
func TestTheEstimateCountsTheTokensOut(t *testing.T) {
	t.Parallel()
	now := time.Now()
	l := line(100, 60)
	l.Settings.MaxAdmitted, l.Settings.TokenSeconds = 10, 120
	l.Head, l.Waiting, l.AdmittedThrough = pos(11), 50, 10
	l.TokensOut = 10
	head := ticketOf(Place{State: Waiting, Position: pos(11)}, l, now)
	require.Equal(t, int64(0), *head.Ahead)
	require.Equal(t, int64(120), *head.EstimatedWaitSeconds, "behind ten unused tokens: up to their lifetime")
	require.InDelta(t, 1000, head.PollAfterMS, 200, "at the front: every second")
	l.TokensOut = 4
	free := ticketOf(Place{State: Waiting, Position: pos(16)}, l, now)
	require.Equal(t, int64(5), *free.Ahead)
	require.Equal(t, int64(1), *free.EstimatedWaitSeconds, "within the six free tokens: the rate alone")
	behind := ticketOf(Place{State: Waiting, Position: pos(11 + 6 + 10)}, l, now)
	require.Equal(t, int64(1+120), *behind.EstimatedWaitSeconds, "beyond the free room: the rate and the tokens out")
}

// TestAUsedTokenMakesAnAdmittedPlaceStale: once the line counts a token
// used since the place was read, the place is read again; Forget drops it.
func TestAUsedTokenMakesAnAdmittedPlaceStale(t *testing.T) {
	t.Parallel()
	q := New(nil, Options{})
	now := time.Now()
	l := line(10, 60)
	l.Used = 3
	q.lines["a_1"] = l
	q.remember(Place{ActivityID: "a_1", UserID: "u", State: Admitted}, now)
	c := q.places[placeKey{"a_1", "u"}]
	require.False(t, q.stale(c, l, now))
	l.Used = 4
	require.True(t, q.stale(c, l, now), "a token used since")
	q.Forget("a_1", "u")
	require.Nil(t, q.places[placeKey{"a_1", "u"}])
}

// TestACommittedSignupForgetsItsPlace: a registration created or
// waitlisted here drops its user's cached place in a known line; other
// events, failed commits and unknown lines leave the cache alone.
func TestACommittedSignupForgetsItsPlace(t *testing.T) {
	t.Parallel()
	q := New(nil, Options{})
	now := time.Now()
	q.lines["a_1"] = line(10, 60)
	for _, u := range []string{"u1", "u2", "u3", "u4"} {
		q.remember(Place{ActivityID: "a_1", UserID: u, State: Admitted}, now)
	}
	q.remember(Place{ActivityID: "a_2", UserID: "u1", State: Admitted}, now)
	q.Committed(t.Context(), []registration.Commit{
		{ActivityID: "a_1", Events: []registration.Event{{Type: registration.EventCreated, UserID: "u1"},
			{Type: registration.EventWaitlisted, UserID: "u2"}, {Type: registration.EventCancelled, UserID: "u3"}}},
		{ActivityID: "a_1", Failed: true, Events: []registration.Event{{Type: registration.EventCreated, UserID: "u4"}}},
		{ActivityID: "a_2", Events: []registration.Event{{Type: registration.EventCreated, UserID: "u1"}}},
	})
	require.Nil(t, q.places[placeKey{"a_1", "u1"}])
	require.Nil(t, q.places[placeKey{"a_1", "u2"}])
	require.NotNil(t, q.places[placeKey{"a_1", "u3"}])
	require.NotNil(t, q.places[placeKey{"a_1", "u4"}])
	require.NotNil(t, q.places[placeKey{"a_2", "u1"}], "a line this instance does not know")
}
