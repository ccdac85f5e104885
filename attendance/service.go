package attendance

import (
	"context"
	"log/slog"
	"math"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/physiciansnet/capacityd"
	"github.com/physiciansnet/capacityd/checkin"
	"github.com/physiciansnet/capacityd/registration"
)

// SheetQuery selects a page of an activity's attendance: the
// registrations that hold a seat, in creation order, after the one of
// public id After (when set) or of internal id AfterSeq.
type SheetQuery struct {
	ActivityID string
	After      string
	AfterSeq   int64
	Limit      int
	// Counts asks for the activity's counts too.
	Counts bool
}

// SheetRows is what the store reads for a SheetQuery.
type SheetRows struct {
	Activity Activity
	Counts   Counts
	Rows     []Row
}

// SeriesCounts are the counts of a series' activities that have ended.
type SeriesCounts struct {
	Activities int
	Counts
}

// Store is what attendance reads of the authority.
type Store interface {
	// AttendanceSheet reads an activity's schedule, its counts (when
	// asked) and a page of its registrations that hold a seat with their
	// check-ins: not_found for an unknown activity, invalid_request for a
	// cursor that names no registration of it.
	AttendanceSheet(ctx context.Context, q SheetQuery) (SheetRows, error)
	// RegistrationAttendance reads a registration with its check-ins and
	// its activity's schedule.
	RegistrationAttendance(ctx context.Context, registrationID string) (Activity, Row, error)
	// SeriesAttendance counts, over the series' activities whose end is at
	// or before now, the registrations that hold a seat and those of them
	// with an entry; not_found for an unknown series.
	SeriesAttendance(ctx context.Context, seriesID string, now time.Time) (SeriesCounts, error)
}

// Registrations gives a registration to its owner or an admin (not_found
// to anyone else).
type Registrations interface {
	GetRegistration(ctx context.Context, id string, c registration.Caller) (registration.Registration, error)
}

// Signer signs statements with the check-in keys (*checkin.Keyring),
// with a typ header of their own (checkin.StatementType) so that a
// statement, which names a registration and its activity as a ticket
// does, is never taken for one at a door.
type Signer interface {
	SignAs(ctx context.Context, claims jwt.Claims, typ string) (string, error)
}

// Config wires a Service.
type Config struct {
	Store         Store
	Registrations Registrations
	Keys          Signer
	// Now is the clock that says whether an activity has ended; default
	// time.Now.
	Now func() time.Time
	// Ender records the end of activities (EndDue); nil: EndDue does
	// nothing. Observers are told of the events it recorded.
	Ender     Ender
	Announcer Announcer
	Observers []Observer
	// Logger logs the failures of RunEnds; default slog.Default().
	Logger *slog.Logger
}

// Service answers the attendance reads.
type Service struct {
	cfg Config
}

// NewService returns a Service.
func NewService(cfg Config) *Service {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Service{cfg: cfg}
}

// Activity returns a page of an activity's attendance, in creation order,
// after the registration of public id after ("": from the first), with the
// activity's summary. limit is 1 to registration.MaxListLimit (0: the
// default).
func (s *Service) Activity(ctx context.Context, activityID, after string, limit int) (Sheet, error) {
	if limit == 0 {
		limit = registration.DefaultListLimit
	}
	if limit < 1 || limit > registration.MaxListLimit {
		return Sheet{}, capacityd.Errorf(capacityd.EInvalid, "limit must be between 1 and %d", registration.MaxListLimit)
	}
	rows, err := s.cfg.Store.AttendanceSheet(ctx, SheetQuery{ActivityID: activityID, After: after, Limit: limit + 1, Counts: true})
	if err != nil {
		return Sheet{}, err
	}
	sheet := Sheet{Summary: Summarize(rows.Counts), Items: make([]Item, 0, min(len(rows.Rows), limit))}
	for i, r := range rows.Rows {
		if i == limit {
			next := registration.EncodeCursor(rows.Rows[i-1].RegistrationID)
			sheet.NextCursor = &next
			break
		}
		sheet.Items = append(sheet.Items, Evaluate(rows.Activity, r))
	}
	return sheet, nil
}

// exportChunk is how many registrations one read of an export takes.
const exportChunk = 1000

// Export calls emit with every item of an activity's attendance, in
// creation order, reading a chunk at a time (a short statement each, so
// that no statement or connection is held while a slow client reads).
// Every chunk is measured against the schedule the first one read.
func (s *Service) Export(ctx context.Context, activityID string, emit func(Item) error) error {
	var act *Activity
	var after int64
	for {
		rows, err := s.cfg.Store.AttendanceSheet(ctx, SheetQuery{ActivityID: activityID, AfterSeq: after, Limit: exportChunk})
		if err != nil {
			return err
		}
		if act == nil {
			act = &rows.Activity
		}
		for _, r := range rows.Rows {
			if err := emit(Evaluate(*act, r)); err != nil {
				return err
			}
		}
		if len(rows.Rows) < exportChunk {
			return nil
		}
		after = rows.Rows[len(rows.Rows)-1].Seq
	}
}

// Registration returns one registration's attendance to its owner or an
// admin, with a statement signed with the check-in keys once its activity
// has ended.
func (s *Service) Registration(ctx context.Context, registrationID string, c registration.Caller) (Personal, error) {
	if _, err := s.cfg.Registrations.GetRegistration(ctx, registrationID, c); err != nil {
		return Personal{}, err
	}
	act, row, err := s.cfg.Store.RegistrationAttendance(ctx, registrationID)
	if err != nil {
		return Personal{}, err
	}
	now := s.cfg.Now()
	p := Personal{Item: Evaluate(act, row)}
	if !act.Ended(now) {
		return p, nil
	}
	tok, err := s.cfg.Keys.SignAs(ctx, NewStatement(act, p.Item, now), checkin.StatementType)
	if err != nil {
		return Personal{}, err
	}
	p.Statement = &tok
	return p, nil
}

// SeriesReport is a series' attendance over its ended activities, with
// the capacity it suggests for a room.
type SeriesReport struct {
	SeriesID string `json:"series_id"`
	// Activities counts the series' activities that have ended (ends_at at
	// or before now); Registered and CheckedIn sum theirs.
	Activities int `json:"activities"`
	Registered int `json:"registered"`
	CheckedIn  int `json:"checked_in"`
	// ShowRate is CheckedIn / Registered (nil when nobody registered).
	ShowRate *float64 `json:"show_rate"`
	// SuggestedCapacity is SuggestedCapacity for the room asked for (nil
	// without a room or a show rate).
	SuggestedCapacity *int `json:"suggested_capacity"`
}

// ValidEstimate checks a room (0: none) and a risk.
func ValidEstimate(room int, risk float64) error {
	if room < 0 || room > MaxRoom {
		return capacityd.Errorf(capacityd.EInvalid, "room must be an integer between 1 and %d", MaxRoom)
	}
	if math.IsNaN(risk) || risk <= 0 || risk >= 1 {
		return capacityd.Errorf(capacityd.EInvalid, "risk must be a number greater than 0 and less than 1")
	}
	return nil
}

// Series returns a series' attendance and, for a room (0: none), the
// capacity that overflows it with probability at most risk.
func (s *Service) Series(ctx context.Context, seriesID string, room int, risk float64) (SeriesReport, error) {
	if err := ValidEstimate(room, risk); err != nil {
		return SeriesReport{}, err
	}
	c, err := s.cfg.Store.SeriesAttendance(ctx, seriesID, s.cfg.Now())
	if err != nil {
		return SeriesReport{}, err
	}
	rep := SeriesReport{SeriesID: seriesID, Activities: c.Activities, Registered: c.Registered, CheckedIn: c.CheckedIn}
	if c.Registered > 0 {
		rate := float64(c.CheckedIn) / float64(c.Registered)
		rep.ShowRate = &rate
		if room > 0 {
			n := SuggestedCapacity(room, rate, risk)
			rep.SuggestedCapacity = &n
		}
	}
	return rep, nil
}
