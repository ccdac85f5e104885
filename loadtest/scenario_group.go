package loadtest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/physiciansnet/capacityd/client"
)

// groupMaxParty is the most seats a group_rush party asks for, and its
// activities' max_seats_per_registration.
const groupMaxParty = 4

// groupRush is course_rush with parties: Sizes.GroupActivities activities
// of 50 seats (300, untimed, no waiting list, at most 4 seats per
// registration) and Sizes.GroupUsers distinct users (20,000), each with a
// party of 1 to 4 seats (uniformly at random) that they sign up, all or
// nothing, for 3 distinct random activities at once (60,000 requests from
// 256 clients). Nothing is released, so afterwards every activity must be
// exact (its taken, from the authority, is the sum of the seats answered
// 201, at most 50) and every party refused as full must ask for more
// seats than the activity has left at the end: remaining only falls, so a
// party that fits what is left at the end fitted when it was refused.
func (b *bench) groupRush(ctx context.Context) error {
	n, users := b.cfg.GroupActivities, b.cfg.GroupUsers
	ids, err := b.createActivities(ctx, n, client.NewActivity{Title: "Group", Capacity: courseSeats, MaxSeatsPerRegistration: groupMaxParty})
	if err != nil {
		return err
	}
	toks, err := b.tokens(ScenarioGroupRush, users)
	if err != nil {
		return err
	}
	rng := rand.New(rand.NewPCG(uint64(n), uint64(users)+groupMaxParty))
	picks, parties := pickCourses(rng, users, n), pickParties(rng, users)
	run := newGroupRun(n)
	out := b.drive(ctx, Load{Name: ScenarioGroupRush, Clients: courseClients, Duration: 5 * time.Minute, MaxOps: int64(users * courseChoices)},
		func(ctx context.Context, _ int, i int64) error {
			u, a := i/courseChoices, picks[i/courseChoices][i%courseChoices]
			seats := parties[u]
			res, err := b.api.WithToken(toks[u]).Signup(ctx, ids[a], client.SignupOptions{Seats: seats})
			return run.record(a, seats, res, err)
		})
	res := out.Result(courseClients)
	res.Note = sizeNote("%d users over %d activities", [2]int{users, FullSizes.GroupUsers}, [2]int{n, FullSizes.GroupActivities})
	b.report.Scenarios[ScenarioGroupRush] = res
	taken, err := b.takenOf(ctx, ids)
	if err != nil {
		return err
	}
	inexact, refusedFitting, refusedNotFull := run.judge(taken, courseSeats)
	ch := b.report.Checks
	ch[CheckGroupActivities] = int64(n)
	ch[CheckGroupAdmitted] = run.answers.count(http.StatusCreated)
	ch[CheckGroupSeats] = run.seats.Load()
	ch[CheckGroupFull] = run.full.Load()
	ch[CheckGroup5xx] = run.answers.fivexx()
	ch[CheckGroupInexact] = inexact
	ch[CheckGroupRefusedFitting] = refusedFitting
	ch[CheckGroupRefusedNotFull] = refusedNotFull
	ch[CheckGroupP99MS] = res.P99MS
	fmt.Fprintf(b.log, "%-16s %d activities: admitted %d parties (%d seats), refused as full %d, 5xx %d; inexact activities %d, "+
		"refused a party that fitted %d, refused a larger party than was left and kept seats free %d\n",
		ScenarioGroupRush, n, ch[CheckGroupAdmitted], ch[CheckGroupSeats], ch[CheckGroupFull], ch[CheckGroup5xx], inexact, refusedFitting, refusedNotFull)
	return nil
}

// pickParties gives each of users a party of 1 to groupMaxParty seats,
// uniformly at random.
func pickParties(rng *rand.Rand, users int) []int {
	parties := make([]int, users)
	for u := range parties {
		parties[u] = 1 + rng.IntN(groupMaxParty)
	}
	return parties
}

// groupRun is what group_rush's answers said, per activity.
type groupRun struct {
	rushTally
	// seated sums the seats of each activity's parties answered 201, and
	// seats those of all activities.
	seated []atomic.Int64
	seats  atomic.Int64
	// smallestRefused is the fewest seats a party refused as full asked
	// of each activity; 0 while it refused none.
	smallestRefused []atomic.Int64
}

func newGroupRun(n int) *groupRun {
	return &groupRun{seated: make([]atomic.Int64, n), smallestRefused: make([]atomic.Int64, n)}
}

// record counts one party's answer for activity a: seated (201, with the
// seats it asked for) or refused as full (409 activity_full) is a success,
// anything else fails. A 201 with other seats than asked counts what the
// answer says and fails.
func (r *groupRun) record(a, seats int, res client.SignupResult, err error) error {
	st, full, err := r.tally(res, err)
	if err != nil {
		return err
	}
	switch {
	case full:
		r.refused(a, seats)
	case st == http.StatusCreated:
		got := int64(res.Registration.Seats)
		r.seated[a].Add(got)
		r.seats.Add(got)
		if got != int64(seats) {
			return fmt.Errorf("admitted with %d seats, asked for %d", got, seats)
		}
	default:
		return fmt.Errorf("status %d", st)
	}
	return nil
}

// refused lowers activity a's smallest refused party to seats.
func (r *groupRun) refused(a, seats int) {
	s := &r.smallestRefused[a]
	for {
		cur := s.Load()
		if cur != 0 && cur <= int64(seats) || s.CompareAndSwap(cur, int64(seats)) {
			return
		}
	}
}

// judge compares each activity's taken seats with the answers: it returns
// the activities whose taken is not the sum of the seats answered 201 or
// exceeds capacity, those that refused as full a party no larger than what
// they have left, and those that refused a party and yet are not full
// (rightly when every party refused was larger than what is left: what the
// second count would catch otherwise).
func (r *groupRun) judge(taken []int, capacity int) (inexact, refusedFitting, refusedNotFull int64) {
	for a, t := range taken {
		if t > capacity || int64(t) != r.seated[a].Load() {
			inexact++
		}
		s := r.smallestRefused[a].Load()
		if s > 0 && s <= int64(capacity-t) {
			refusedFitting++
		}
		if s > 0 && t < capacity {
			refusedNotFull++
		}
	}
	return inexact, refusedFitting, refusedNotFull
}
