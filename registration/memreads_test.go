package registration

import (
	"cmp"
	"context"
	"math"
	"slices"
	"strings"
)

// GetRegistrations returns the registrations of ids that exist, with
// their places in line.
func (m *MemStore) GetRegistrations(ctx context.Context, ids []string) ([]Registration, error) {
	if err := m.faults.enter(ctx, MemGetRegistrations, ids); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []Registration
	for _, id := range ids {
		if r := m.regs[id]; r != nil {
			out = append(out, m.withPosition(r))
		}
	}
	return out, nil
}

// ListRegistrations returns up to f.Limit registrations of an activity
// created after the one of public id f.After, in creation order.
func (m *MemStore) ListRegistrations(ctx context.Context, f ListFilter) ([]Registration, error) {
	if err := m.faults.enter(ctx, MemListRegistrations, nil); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	ma := m.activities[f.ActivityID]
	if ma == nil {
		return nil, ActivityNotFound(f.ActivityID)
	}
	var after int64
	if f.After != "" {
		r := m.regs[f.After]
		if r == nil || r.ActivityID != f.ActivityID {
			return nil, UnknownCursor()
		}
		after = r.Seq
	}
	var out []Registration
	for _, r := range ma.regs {
		if len(out) == f.Limit {
			break
		}
		if r.Seq > after && (f.Status == "" || r.Status == f.Status) {
			out = append(out, m.withPosition(r))
		}
	}
	return out, nil
}

// UserRegistrations returns up to f.Limit of a user's registrations,
// newest first, created before the one of public id f.Before.
func (m *MemStore) UserRegistrations(ctx context.Context, f UserFilter) ([]Registration, error) {
	if err := m.faults.enter(ctx, MemUserRegistrations, nil); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	before := int64(1<<63 - 1)
	if f.Before != "" {
		r := m.regs[f.Before]
		if r == nil || r.UserID != f.UserID {
			return nil, UnknownCursor()
		}
		before = r.Seq
	}
	var mine []*Registration
	for _, r := range m.regs {
		if r.UserID == f.UserID && r.Seq < before {
			mine = append(mine, r)
		}
	}
	slices.SortFunc(mine, func(a, b *Registration) int { return cmp.Compare(b.Seq, a.Seq) })
	out := make([]Registration, 0, min(len(mine), f.Limit))
	for _, r := range mine[:min(len(mine), f.Limit)] {
		out = append(out, m.withPosition(r))
	}
	return out, nil
}

// memExportChunk is how many rows one read of an export takes.
const memExportChunk = 100

// ExportRegistrations calls emit for each of an activity's registrations
// (of the status, when set) in creation order, reading them in chunks: the
// lock is never held while emit runs.
func (m *MemStore) ExportRegistrations(ctx context.Context, activityID string, status Status, emit func(Registration) error) error {
	if err := m.faults.enter(ctx, MemExportRegistrations, nil); err != nil {
		return err
	}
	var after int64
	for {
		chunk, err := m.exportChunk(activityID, status, after)
		if err != nil {
			return err
		}
		for _, r := range chunk {
			if err := emit(r); err != nil {
				return err
			}
		}
		if len(chunk) < memExportChunk {
			return nil
		}
		after = chunk[len(chunk)-1].Seq
	}
}

func (m *MemStore) exportChunk(activityID string, status Status, after int64) ([]Registration, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	ma := m.activities[activityID]
	if ma == nil {
		return nil, ActivityNotFound(activityID)
	}
	var out []Registration
	for _, r := range ma.regs {
		if len(out) == memExportChunk {
			break
		}
		if r.Seq > after && (status == "" || r.Status == status) {
			out = append(out, memRow(r))
		}
	}
	return out, nil
}

// RegistrationEvents returns a registration's events in seq order.
func (m *MemStore) RegistrationEvents(ctx context.Context, registrationID string) ([]Event, error) {
	if err := m.faults.enter(ctx, MemRegistrationEvents, nil); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []Event
	for _, ma := range m.created {
		for _, e := range ma.events {
			if e.RegistrationID == registrationID {
				out = append(out, memEvent(e))
			}
		}
	}
	slices.SortStableFunc(out, func(a, b Event) int { return cmp.Compare(a.Seq, b.Seq) })
	return out, nil
}

// ActivityEvents returns up to f.Limit events of an activity with seq
// above f.After, in seq order.
func (m *MemStore) ActivityEvents(ctx context.Context, f EventFilter) ([]Event, error) {
	if err := m.faults.enter(ctx, MemActivityEvents, nil); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	ma := m.activities[f.ActivityID]
	if ma == nil {
		return nil, ActivityNotFound(f.ActivityID)
	}
	var out []Event
	for _, e := range ma.events {
		if len(out) == f.Limit {
			break
		}
		if e.Seq > f.After {
			out = append(out, memEvent(e))
		}
	}
	return out, nil
}

// Registrations returns every registration of an activity, in creation
// order, as stored (without places in line): for tests' assertions.
func (m *MemStore) Registrations(activityID string) []Registration {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []Registration
	if ma := m.activities[activityID]; ma != nil {
		for _, r := range ma.regs {
			out = append(out, memRow(r))
		}
	}
	return out
}

// Events returns every event of an activity, in seq order: for tests'
// assertions.
func (m *MemStore) Events(activityID string) []Event {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []Event
	if ma := m.activities[activityID]; ma != nil {
		for _, e := range ma.events {
			out = append(out, memEvent(e))
		}
	}
	return out
}

// Records returns how many idempotency records are stored.
func (m *MemStore) Records() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.records)
}

// ActivityUserRegistrations returns up to f.Limit of a user's
// registrations of an activity created after the one of public id f.After,
// in creation order.
func (m *MemStore) ActivityUserRegistrations(ctx context.Context, f ActivityUserFilter) ([]Registration, error) {
	all, err := m.ListRegistrations(ctx, ListFilter{ActivityID: f.ActivityID, Status: f.Status, After: f.After, Limit: math.MaxInt})
	var out []Registration
	for _, r := range all {
		if r.UserID == f.UserID && len(out) < f.Limit {
			out = append(out, r)
		}
	}
	return out, err
}

// SearchActivities returns up to limit activities whose title contains
// query, ignoring case, created before the one of public id before,
// newest first.
func (m *MemStore) SearchActivities(ctx context.Context, query, before string, limit int) ([]Activity, error) {
	all, err := m.ListActivities(ctx, before, math.MaxInt)
	var out []Activity
	for _, a := range all {
		if strings.Contains(strings.ToLower(a.Title), strings.ToLower(query)) && len(out) < limit {
			out = append(out, a)
		}
	}
	return out, err
}

// SeriesActivities returns up to limit activities of the series created
// before the one of public id before, newest first.
func (m *MemStore) SeriesActivities(ctx context.Context, seriesID, before string, limit int) ([]Activity, error) {
	all, err := m.ListActivities(ctx, before, math.MaxInt)
	var out []Activity
	for _, a := range all {
		if a.SeriesID != nil && *a.SeriesID == seriesID && len(out) < limit {
			out = append(out, a)
		}
	}
	return out, err
}
