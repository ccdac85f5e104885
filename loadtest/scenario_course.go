package loadtest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"sync/atomic"
	"time"

	"github.com/physiciansnet/capacityd/client"
)

// course_rush's shape: activities of courseSeats seats; every user signs
// up for courseChoices distinct ones at once, from courseClients clients.
const (
	courseSeats   = 50
	courseChoices = 3
	courseClients = 256
)

// courseRush is a course-selection morning: Sizes.CourseActivities
// activities of 50 seats (300, created untimed) and Sizes.CourseUsers
// distinct users (20,000) each signing up for 3 distinct random ones at
// once (60,000 requests from 256 clients). Afterwards every activity must
// be exact (taken = min(capacity, users who asked for it), from the
// authority) and any activity that refused someone as full must be full.
func (b *bench) courseRush(ctx context.Context) error {
	n, users := b.cfg.CourseActivities, b.cfg.CourseUsers
	ids, err := b.createActivities(ctx, n, client.NewActivity{Title: "Course", Capacity: courseSeats})
	if err != nil {
		return err
	}
	toks, err := b.tokens(ScenarioCourseRush, users)
	if err != nil {
		return err
	}
	picks := pickCourses(rand.New(rand.NewPCG(uint64(n), uint64(users))), users, n)
	run := newCourseRun(n)
	out := b.drive(ctx, Load{Name: ScenarioCourseRush, Clients: courseClients, Duration: 5 * time.Minute, MaxOps: int64(users * courseChoices)},
		func(ctx context.Context, _ int, i int64) error {
			u, a := i/courseChoices, picks[i/courseChoices][i%courseChoices]
			run.asked[a].Add(1)
			res, err := b.api.WithToken(toks[u]).Signup(ctx, ids[a], client.SignupOptions{})
			return run.record(a, res, err)
		})
	res := out.Result(courseClients)
	res.Note = sizeNote("%d users over %d activities", [2]int{users, FullSizes.CourseUsers}, [2]int{n, FullSizes.CourseActivities})
	b.report.Scenarios[ScenarioCourseRush] = res
	taken, err := b.takenOf(ctx, ids)
	if err != nil {
		return err
	}
	inexact, refusedNotFull := run.judge(taken, courseSeats)
	ch := b.report.Checks
	ch[CheckCourseActivities] = int64(n)
	ch[CheckCourseAdmitted] = run.answers.count(http.StatusCreated)
	ch[CheckCourseFull] = run.full.Load()
	ch[CheckCourse5xx] = run.answers.fivexx()
	ch[CheckCourseInexact] = inexact
	ch[CheckCourseRefusedNotFull] = refusedNotFull
	ch[CheckCourseP99MS] = res.P99MS
	fmt.Fprintf(b.log, "%-16s %d activities: admitted %d, refused as full %d, 5xx %d; inexact activities %d, refused someone while not full %d\n",
		ScenarioCourseRush, n, ch[CheckCourseAdmitted], ch[CheckCourseFull], ch[CheckCourse5xx], inexact, refusedNotFull)
	return nil
}

// pickCourses gives each of users courseChoices distinct activities of n
// (n ≥ courseChoices), at random.
func pickCourses(rng *rand.Rand, users, n int) [][courseChoices]int {
	picks := make([][courseChoices]int, users)
	for u := range picks {
		for k := 0; k < courseChoices; {
			if a := rng.IntN(n); !slices.Contains(picks[u][:k], a) {
				picks[u][k] = a
				k++
			}
		}
	}
	return picks
}

// courseRun is what course_rush's answers said, per activity.
type courseRun struct {
	seatRun
	// asked counts the users who asked for each activity.
	asked []atomic.Int64
}

func newCourseRun(n int) *courseRun {
	return &courseRun{
		seatRun: seatRun{seated: make([]atomic.Int64, n), refused: make([]atomic.Bool, n)},
		asked:   make([]atomic.Int64, n),
	}
}

// judge compares each activity's taken seats with the answers: it returns
// the activities whose taken is not min(capacity, asked) and those that
// refused someone as full while not full.
func (r *courseRun) judge(taken []int, capacity int) (inexact, refusedNotFull int64) {
	for a, t := range taken {
		if int64(t) != min(int64(capacity), r.asked[a].Load()) {
			inexact++
		}
		if r.refused[a].Load() && t < capacity {
			refusedNotFull++
		}
	}
	return inexact, refusedNotFull
}

// createActivities creates n activities as like from 16 clients, untimed,
// each titled like's title, its number and the run's nonce, and returns
// their ids in order.
func (b *bench) createActivities(ctx context.Context, n int, like client.NewActivity) ([]string, error) {
	return b.createActivitiesWith(ctx, n, func(int) client.NewActivity { return like })
}

// createActivitiesWith creates n activities from 16 clients, the i-th as
// like(i) says, each titled its title, its number and the run's nonce,
// and returns their ids in order.
func (b *bench) createActivitiesWith(ctx context.Context, n int, like func(i int) client.NewActivity) ([]string, error) {
	admin := b.api.WithToken(b.admin)
	ids := make([]string, n)
	out := b.drive(ctx, Load{Name: "setup:activities", Clients: 16, Duration: 2 * time.Minute, MaxOps: int64(n)},
		func(ctx context.Context, _ int, i int64) error {
			in := like(int(i))
			in.Title = fmt.Sprintf("%s %d %s", in.Title, i+1, b.nonce)
			a, err := admin.CreateActivity(ctx, in)
			ids[i] = a.ID
			return err
		})
	if out.Errors > 0 || out.Ops < int64(n) {
		return nil, fmt.Errorf("loadtest: created %d of %d activities: %v", out.Ops, n, out.FirstError)
	}
	return ids, nil
}

// takenOf reads each activity's taken seats from the authority.
func (b *bench) takenOf(ctx context.Context, ids []string) ([]int, error) {
	taken := make([]int, len(ids))
	for i, id := range ids {
		a, err := b.api.WithToken(b.admin).GetActivity(ctx, id)
		if err != nil {
			return nil, fmt.Errorf("loadtest: read activity %s: %w", id, err)
		}
		taken[i] = a.Taken
	}
	return taken, nil
}
