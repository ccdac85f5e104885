// Package history records what clients of capacityd observed: every
// operation's invocation and response on a monotonic clock, the instance
// it went to, its input and its result, or that no answer came. A
// Recorder is safe for concurrent use by the clients of many instances;
// its History is what a linearizability checker reads.
package history

import (
	"encoding/json"
	"os"
	"sync"
	"time"
)

// Kind is what an operation does.
type Kind string

// Operations the clients perform.
const (
	CreateActivity Kind = "create_activity"
	Signup         Kind = "signup"
	Cancel         Kind = "cancel"
	SetStatus      Kind = "set_status"
	SetCapacity    Kind = "set_capacity"
	ReduceSeats    Kind = "reduce_seats"
	ReadActivity   Kind = "read_activity"
	ReadSeats      Kind = "read_seats"
	NoteView       Kind = "note_view"
	NoteWater      Kind = "note_water"
	NoteStats      Kind = "note_stats"
	// CreatePool and ReadPool are a pool's creation and its authoritative
	// read; their Key is the pool's id.
	CreatePool Kind = "create_pool"
	ReadPool   Kind = "read_pool"
	// CreateBlock and DeleteBlock hold seats of an activity for the
	// signups with a code, or whose token holds a role, and end the hold;
	// their Key is the activity's id, a deletion's Block the block's id.
	CreateBlock Kind = "create_block"
	DeleteBlock Kind = "delete_block"
	// CreateSeries is a series' creation; its Key is the series' id.
	CreateSeries Kind = "create_series"
	// JoinQueue and ReadQueue take a user's place in an activity's
	// admission queue and read it (POST …/queue, GET …/queue/me); their
	// Key is the activity's id.
	JoinQueue Kind = "join_queue"
	ReadQueue Kind = "read_queue"
)

// Result says how an attempt ended.
type Result string

// Results of an attempt.
const (
	// Answered: the service sent a response; Status and Code say which.
	Answered Result = "answered"
	// Unknown: no answer (timeout, reset, killed instance); the request
	// may or may not have taken effect.
	Unknown Result = "unknown"
	// Refused: the connection was refused, so the request never reached
	// the service and had no effect.
	Refused Result = "refused"
)

// Input is what an operation asks for. Which fields are set depends on
// its Kind.
type Input struct {
	// Key is the object the operation is about: an activity id, a note id,
	// a pool id or a series id. Histories are checked per Key, and across
	// the activities of a pool or a series.
	Key string `json:"key"`
	// User is the index of the user (0, 1, …) among the activity's users.
	// In a series, user u of each of its activities is the same person.
	User int `json:"user,omitempty"`
	// Registration is the registration a cancel, status change or seat
	// reduction names.
	Registration string `json:"registration,omitempty"`
	// Seats a signup asks for (0: one), that a seat reduction keeps, or
	// that a block holds.
	Seats int `json:"seats,omitempty"`
	// Held is the seats the client last knew the registration a cancel or
	// seat reduction names to hold (0: not known): a bound on the seats
	// the change frees.
	Held int `json:"held,omitempty"`
	// IdempotencyKey of a signup; empty: none.
	IdempotencyKey string `json:"idempotency_key,omitempty"`
	// To is the status a status change asks for.
	To string `json:"to,omitempty"`
	// Capacity of an activity being created or changed.
	Capacity int `json:"capacity,omitempty"`
	// Waitlist of an activity being created.
	Waitlist bool `json:"waitlist,omitempty"`
	// MaxSeats (0: one) and Policy ("strict" or "fill"; "": strict) of an
	// activity being created: the most seats one registration may hold,
	// and how its waiting list serves parties.
	MaxSeats int    `json:"max_seats,omitempty"`
	Policy   string `json:"policy,omitempty"`
	// Users is the number of users an activity is created for.
	Users int `json:"users,omitempty"`
	// Pools are the ids of the pools an activity is created in.
	Pools []string `json:"pools,omitempty"`
	// Code of a signup ("": none), or of a block being created.
	Code string `json:"code,omitempty"`
	// Role of a block being created ("": a block for a code).
	Role string `json:"role,omitempty"`
	// Roles are the "roles" claim of the token a signup carries (nil:
	// none).
	Roles []string `json:"roles,omitempty"`
	// Block is the id of the block a deletion names.
	Block string `json:"block,omitempty"`
	// Series is the id of the series an activity is created in ("":
	// none).
	Series string `json:"series,omitempty"`
	// MaxPerUser of a series being created.
	MaxPerUser int `json:"max_per_user,omitempty"`
	// OpensAt of an activity being created, on the history's clock (nil:
	// none), and its admission Queue (nil: none).
	OpensAt *int64 `json:"opens_at,omitempty"`
	Queue   *Queue `json:"queue,omitempty"`
	// AdmissionToken a signup carries ("": none).
	AdmissionToken string `json:"admission_token,omitempty"`
}

// Queue is an activity's admission queue settings.
type Queue struct {
	AdmitPerSecond int `json:"admit_per_second"`
	MaxAdmitted    int `json:"max_admitted"`
	TokenSeconds   int `json:"token_seconds"`
	AbsentSeconds  int `json:"absent_seconds"`
}

// Output is what an answer said. Which fields are set depends on the
// operation's Kind and on Status.
type Output struct {
	// Status is the HTTP status; Code the error code of a refusal.
	Status int    `json:"status,omitempty"`
	Code   string `json:"code,omitempty"`
	// ID is the id of a created activity, pool, block or series.
	ID string `json:"id,omitempty"`
	// Registration is the id in a signup's answer, a cancel's, status
	// change's or seat reduction's answer, or an already_registered
	// refusal.
	Registration string `json:"registration,omitempty"`
	// RegStatus is the registration's status in the answer.
	RegStatus string `json:"reg_status,omitempty"`
	// Block is the block a signup's registration took its seats from, in
	// the answer ("": public seats, or not recorded).
	Block string `json:"block,omitempty"`
	// Seats is the registration's seats in such an answer.
	Seats int `json:"seats,omitempty"`
	// Position is a waitlisted signup's place in line.
	Position int `json:"position,omitempty"`
	// Remaining is the seats an activity_full refusal says were left, or
	// an activity's or pool's remaining in an authoritative read (nil: not
	// recorded).
	Remaining *int `json:"remaining,omitempty"`
	// Capacity, Taken and Waiting of an activity, pool or seat read.
	Capacity int `json:"capacity,omitempty"`
	Taken    int `json:"taken,omitempty"`
	Waiting  int `json:"waiting,omitempty"`
	// Reserved of an activity or pool read: the unused seats of blocks.
	Reserved int `json:"reserved,omitempty"`
	// Registrations a limit_reached refusal says the user holds.
	Registrations []string `json:"registrations,omitempty"`
	// Waitlist of an activity read.
	Waitlist bool `json:"waitlist,omitempty"`
	// Source of a seat read: "cache" or "database".
	Source string `json:"source,omitempty"`
	// Views and Waters of a note.
	Views  int64 `json:"views,omitempty"`
	Waters int64 `json:"waters,omitempty"`
	// QueueState, QueuePosition (0: none yet) and Token ("": none) of a
	// queue place's answer, and the token's deadline on the history's
	// clock (0: none); PollAfterMS is when the answer said to ask again.
	QueueState    string `json:"queue_state,omitempty"`
	QueuePosition int64  `json:"queue_position,omitempty"`
	Token         string `json:"token,omitempty"`
	TokenExpires  int64  `json:"token_expires,omitempty"`
	PollAfterMS   int64  `json:"poll_after_ms,omitempty"`
	// Error is the transport error of an attempt without an answer.
	Error string `json:"error,omitempty"`
}

// Op is one attempt of an operation: one HTTP request. Retries of one
// logical operation (same Idempotency-Key, or a cancel of the same
// registration) share Logical.
type Op struct {
	ID      int `json:"id"`
	Logical int `json:"logical"`
	Attempt int `json:"attempt"`
	// Client is the worker that sent it.
	Client int `json:"client"`
	// Instance is the service instance it went to.
	Instance string `json:"instance"`
	Kind     Kind   `json:"kind"`
	Input    Input  `json:"input"`
	// Call and Return are nanoseconds since the recorder started, on the
	// monotonic clock; Return is 0 until the attempt ends.
	Call   int64  `json:"call"`
	Return int64  `json:"return"`
	Result Result `json:"result"`
	Output Output `json:"output"`
}

// Fault is a fault injected while the history ran, from Start to End (0:
// still going).
type Fault struct {
	Class  string `json:"class"`
	Target string `json:"target"`
	Start  int64  `json:"start"`
	End    int64  `json:"end"`
}

// History is everything recorded.
type History struct {
	Ops    []Op    `json:"ops"`
	Faults []Fault `json:"faults"`
	// Settings the checker needs, e.g. the display counters' TTL.
	Settings map[string]string `json:"settings,omitempty"`
	// Authority is what the authority kept at the end of the run, read
	// once it settled (nil: not read).
	Authority *Authority `json:"authority,omitempty"`
}

// Authority is the authority's rows that the checker needs: the places of
// the admission queues and the registrations of the activities that have
// one. Times are the database's, on the history's clock; 0 is none.
type Authority struct {
	// Places are in the order they were taken.
	Places        []Place        `json:"places"`
	Registrations []Registration `json:"registrations"`
}

// Place is a queue place as the authority kept it.
type Place struct {
	// Key is the activity's id; User the user's index.
	Key  string `json:"key"`
	User int    `json:"user"`
	// Position is 0 for a place never given one.
	Position int64  `json:"position,omitempty"`
	State    string `json:"state"`
	Token    string `json:"token,omitempty"`
	// JoinedAt and LastSeenAt (the last presence written for it while it
	// waited), AdmittedAt and TokenExpires (0: never admitted).
	JoinedAt     int64 `json:"joined_at"`
	LastSeenAt   int64 `json:"last_seen_at"`
	AdmittedAt   int64 `json:"admitted_at,omitempty"`
	TokenExpires int64 `json:"token_expires,omitempty"`
}

// Registration is a registration as the authority kept it.
type Registration struct {
	ID     string `json:"id"`
	Key    string `json:"key"`
	User   int    `json:"user"`
	Status string `json:"status"`
}

// Recorder records a history. The zero value is not usable: use New.
type Recorder struct {
	start time.Time

	mu       sync.Mutex
	ops      []Op
	faults   []Fault
	logical  int
	settings map[string]string
	auth     *Authority
}

// New returns a Recorder whose clock starts now.
func New() *Recorder {
	return &Recorder{start: time.Now(), settings: map[string]string{}}
}

// Now returns the recorder's clock: nanoseconds since it started,
// monotonic.
func (r *Recorder) Now() int64 { return int64(time.Since(r.start)) }

// At returns a time the service reported (a wall-clock time) on the
// recorder's clock.
func (r *Recorder) At(t time.Time) int64 { return t.UnixNano() - r.start.UnixNano() }

// WallAt returns the wall-clock time of a moment on the recorder's clock.
func (r *Recorder) WallAt(at int64) time.Time { return time.Unix(0, r.start.UnixNano()+at) }

// SetAuthority records the authority's final rows for the checker.
func (r *Recorder) SetAuthority(a Authority) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.auth = &a
}

// Set records a setting of the run for the checker.
func (r *Recorder) Set(name, value string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.settings[name] = value
}

// NewLogical returns a fresh logical operation id for the attempts of one
// operation.
func (r *Recorder) NewLogical() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.logical++
	return r.logical
}

// Pending is an attempt in flight.
type Pending struct {
	r  *Recorder
	id int
}

// Invoke records the invocation of an attempt now. op.Call, op.ID and the
// result fields are set by the recorder; op.Logical 0 makes it a logical
// operation of its own.
func (r *Recorder) Invoke(op Op) *Pending {
	if op.Logical == 0 {
		op.Logical = r.NewLogical()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	op.ID = len(r.ops)
	op.Call = r.Now()
	op.Return, op.Result, op.Output = 0, "", Output{}
	r.ops = append(r.ops, op)
	return &Pending{r: r, id: op.ID}
}

// SetKey sets the attempt's Input.Key once it is known: an activity's id
// comes with the answer that created it.
func (p *Pending) SetKey(key string) {
	p.r.mu.Lock()
	defer p.r.mu.Unlock()
	p.r.ops[p.id].Input.Key = key
}

// End records the attempt's end now, with its result and output.
func (p *Pending) End(res Result, out Output) {
	now := p.r.Now()
	p.r.mu.Lock()
	defer p.r.mu.Unlock()
	op := &p.r.ops[p.id]
	op.Return, op.Result, op.Output = now, res, out
}

// FaultSpan is a fault being injected.
type FaultSpan struct {
	r  *Recorder
	id int
}

// BeginFault records the start of a fault of class on target now.
func (r *Recorder) BeginFault(class, target string) *FaultSpan {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.faults = append(r.faults, Fault{Class: class, Target: target, Start: r.Now()})
	return &FaultSpan{r: r, id: len(r.faults) - 1}
}

// End records the end of the fault now.
func (f *FaultSpan) End() {
	now := f.r.Now()
	f.r.mu.Lock()
	defer f.r.mu.Unlock()
	f.r.faults[f.id].End = now
}

// History returns a copy of what was recorded so far. Attempts still in
// flight have Return 0 and no Result: they count as Unknown.
func (r *Recorder) History() History {
	r.mu.Lock()
	defer r.mu.Unlock()
	h := History{Ops: append([]Op(nil), r.ops...), Faults: append([]Fault(nil), r.faults...), Settings: map[string]string{},
		Authority: r.auth}
	for k, v := range r.settings {
		h.Settings[k] = v
	}
	for i := range h.Ops {
		if h.Ops[i].Result == "" {
			h.Ops[i].Result = Unknown
			h.Ops[i].Output.Error = "still in flight when the history was taken"
		}
	}
	return h
}

// WriteFile writes h as indented JSON to path.
func (h History) WriteFile(path string) error {
	b, err := json.MarshalIndent(h, "", " ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}

// ReadFile reads a history written by WriteFile.
func ReadFile(path string) (History, error) {
	var h History
	b, err := os.ReadFile(path)
	if err != nil {
		return h, err
	}
	return h, json.Unmarshal(b, &h)
}
