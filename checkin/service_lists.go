package checkin

import (
	"context"

	"github.com/physiciansnet/capacityd"
	"github.com/physiciansnet/capacityd/registration"
)

// CreateList makes a list.
func (s *Service) CreateList(ctx context.Context, in NewList) (List, error) {
	if err := in.Validate(); err != nil {
		return List{}, err
	}
	return s.cfg.Store.CreateCheckinList(ctx, s.newID("cl_"), in, s.cfg.Now().UTC())
}

// GetList returns a list to an admin or its door staff.
func (s *Service) GetList(ctx context.Context, id string, c registration.Caller) (List, error) {
	l, err := s.cfg.Store.GetCheckinList(ctx, id)
	if err != nil {
		return List{}, err
	}
	return l, Allowed(l, c)
}

// Allowed checks that c is an admin or door staff of l: who may use a
// list's door.
func Allowed(l List, c registration.Caller) error {
	if c.Admin || l.DoorOf(c.Roles) {
		return nil
	}
	return capacityd.Errorf(capacityd.EForbidden, "check-in list %s is for admins and its door roles", l.ID)
}

// Lists returns a page of lists, newest first; of one activity's when
// activityID is set.
func (s *Service) Lists(ctx context.Context, activityID, before string, limit int) (ListPage, error) {
	ls, err := s.cfg.Store.ListCheckinLists(ctx, activityID, before, limit+1)
	if err != nil {
		return ListPage{}, err
	}
	page := ListPage{Items: ls}
	if len(ls) > limit {
		page.Items = ls[:limit]
		next := ls[limit-1].ID
		page.NextCursor = &next
	}
	if page.Items == nil {
		page.Items = []List{}
	}
	return page, nil
}

// UpdateList changes a list.
func (s *Service) UpdateList(ctx context.Context, id string, p ListPatch) (List, error) {
	l, err := s.cfg.Store.UpdateCheckinList(ctx, id, p, s.cfg.Now().UTC())
	if err == nil {
		s.announce(ctx, l.ID)
	}
	return l, err
}

// DeleteList deletes a list.
func (s *Service) DeleteList(ctx context.Context, id string) error {
	err := s.cfg.Store.DeleteCheckinList(ctx, id)
	if err == nil {
		s.announce(ctx, id) // its streams end
	}
	return err
}
