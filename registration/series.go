package registration

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/physiciansnet/capacityd"
)

// MaxPerUserLimit is the most a series' max_per_user may be.
const MaxPerUserLimit = 1000

// Series is a set of activities of which one person may hold at most
// MaxPerUser active (occupying or waitlisted) registrations.
type Series struct {
	// Seq orders series by creation for keyset pagination.
	Seq int64 `json:"-"`

	ID         string    `json:"id"`
	Title      string    `json:"title"`
	MaxPerUser int       `json:"max_per_user"`
	CreatedAt  time.Time `json:"created_at"`
	UpdatedAt  time.Time `json:"updated_at"`
}

// SeriesPage is one page of the series listing.
type SeriesPage struct {
	Items      []Series `json:"items"`
	NextCursor *string  `json:"next_cursor"`
}

// NewSeries is what an admin sends to create a series.
type NewSeries struct {
	Title      string
	MaxPerUser int
}

// Validate checks a new series against the API's ranges.
func (n NewSeries) Validate() error {
	if err := validateFields(&n.Title, nil, nil); err != nil {
		return err
	}
	return validateMaxPerUser(&n.MaxPerUser)
}

// SeriesPatch changes the fields of a series that are set. Lowering
// MaxPerUser removes nobody.
type SeriesPatch struct {
	Title      *string
	MaxPerUser *int
}

// Validate checks the fields a series patch sets.
func (p SeriesPatch) Validate() error {
	if p.Title == nil && p.MaxPerUser == nil {
		return capacityd.Errorf(capacityd.EInvalid, "nothing to change: set title or max_per_user")
	}
	if err := validateFields(p.Title, nil, nil); err != nil {
		return err
	}
	return validateMaxPerUser(p.MaxPerUser)
}

func validateMaxPerUser(n *int) error {
	if n != nil && (*n < 1 || *n > MaxPerUserLimit) {
		return capacityd.Errorf(capacityd.EInvalid, "max_per_user must be between 1 and %d", MaxPerUserLimit)
	}
	return nil
}

// validSeriesID reports whether id can name a series ("" names none).
func validSeriesID(id string) error {
	if id != "" && (!strings.HasPrefix(id, "s_") || !storable(id) || len(id) > 64) {
		return capacityd.Errorf(capacityd.EInvalid, "series_id must be a series id (s_…) or null, not %q", id)
	}
	return nil
}

// SeriesNotFound returns the not_found error of a series that does not
// exist.
func SeriesNotFound(id string) error {
	return capacityd.Errorf(capacityd.ENotFound, "series %s not found", id)
}

// UnknownSeries returns the invalid_request error of an activity that
// names a series that does not exist.
func UnknownSeries(id string) error {
	return capacityd.Errorf(capacityd.EInvalid, "series not found: %s", id)
}

// LimitReached returns the limit_reached error of a user who already holds
// the most active registrations the series allows, naming them.
func LimitReached(seriesID string, max int, held []string) error {
	ids := slices.Sorted(slices.Values(held))
	return &capacityd.Error{Code: capacityd.ELimitReached,
		Message:         fmt.Sprintf("the user already holds %s in series %s, the most it allows (%d)", strings.Join(ids, ", "), seriesID, max),
		RegistrationIDs: ids}
}

// SeriesState is what a change transaction knows of a series for the users
// of its signups (and re-admissions), read under the (series, user) locks:
// the limit, and each such user's active registrations in the series.
type SeriesState struct {
	ID         string
	MaxPerUser int
	Held       map[string][]string // user → active registration ids
}

// IsSeriesID reports whether id names a series.
func IsSeriesID(id string) bool { return strings.HasPrefix(id, "s_") }

// CreateSeries validates and stores a new series.
func (s *Service) CreateSeries(ctx context.Context, in NewSeries) (Series, error) {
	if err := in.Validate(); err != nil {
		return Series{}, err
	}
	return s.store.CreateSeries(ctx, s.newID("s_"), in)
}

// GetSeries returns a series.
func (s *Service) GetSeries(ctx context.Context, id string) (Series, error) {
	if !IsSeriesID(id) || !storable(id) {
		return Series{}, SeriesNotFound(id)
	}
	return s.store.GetSeries(ctx, id)
}

// ListSeries returns one page of the series, newest first.
func (s *Service) ListSeries(ctx context.Context, before string, limit int) (SeriesPage, error) {
	limit, err := pageLimit(limit)
	if err != nil {
		return SeriesPage{}, err
	}
	items, err := s.store.ListSeries(ctx, before, limit+1)
	if err != nil {
		return SeriesPage{}, err
	}
	var p SeriesPage
	p.Items, p.NextCursor = cutPage(items, limit, func(x Series) string { return x.ID })
	return p, nil
}

// UpdateSeries changes a series. A lower limit removes nobody: it refuses
// the signups that follow.
func (s *Service) UpdateSeries(ctx context.Context, id string, p SeriesPatch) (Series, error) {
	if err := p.Validate(); err != nil {
		return Series{}, err
	}
	if !IsSeriesID(id) || !storable(id) {
		return Series{}, SeriesNotFound(id)
	}
	return s.store.UpdateSeries(ctx, id, p)
}
