package httpapi

import (
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/physiciansnet/capacityd"
	"github.com/physiciansnet/capacityd/registration"
)

// blockRequest is the body of POST /v1/activities/{id}/blocks: seats, and
// code or role (exactly one), optionally expires_at (RFC 3339).
type blockRequest struct {
	Seats     *int    `json:"seats"`
	Code      *string `json:"code"`
	Role      *string `json:"role"`
	ExpiresAt *string `json:"expires_at"`
}

// blockList is the answer of GET /v1/activities/{id}/blocks.
type blockList struct {
	Items []registration.Block `json:"items"`
}

func blockID(c echo.Context) (string, error) {
	return pathID(c, "id", "b", registration.BlockNotFound)
}

// newBlock returns the block req asks for; the service checks its ranges.
func (req blockRequest) newBlock() (registration.NewBlock, error) {
	if req.Seats == nil {
		return registration.NewBlock{}, capacityd.Errorf(capacityd.EInvalid, "seats is required")
	}
	in := registration.NewBlock{Seats: *req.Seats}
	if req.Code != nil {
		if *req.Code == "" {
			return registration.NewBlock{}, capacityd.Errorf(capacityd.EInvalid, "code must not be empty")
		}
		in.Code = *req.Code
	}
	if req.Role != nil {
		if *req.Role == "" {
			return registration.NewBlock{}, capacityd.Errorf(capacityd.EInvalid, "role must not be empty")
		}
		in.Role = *req.Role
	}
	if req.ExpiresAt != nil {
		t, err := time.Parse(time.RFC3339, *req.ExpiresAt)
		if err != nil {
			return registration.NewBlock{}, capacityd.Errorf(capacityd.EInvalid, "expires_at must be an RFC 3339 time")
		}
		in.ExpiresAt = &t
	}
	return in, nil
}

// createBlock holds seats of an activity for an audience: 409
// activity_full when fewer seats are free (in the activity or one of its
// pools).
func (s *Server) createBlock(c echo.Context) error {
	id, err := activityID(c)
	if err != nil {
		return err
	}
	var req blockRequest
	if err := decodeJSON(c, &req, false); err != nil {
		return err
	}
	in, err := req.newBlock()
	if err != nil {
		return err
	}
	b, err := s.regs.CreateBlock(c.Request().Context(), id, in, callerOf(c))
	if err != nil {
		return err
	}
	return writeJSON(c, http.StatusCreated, b)
}

// listBlocks serves the live blocks of an activity, oldest first.
func (s *Server) listBlocks(c echo.Context) error {
	id, err := activityID(c)
	if err != nil {
		return err
	}
	bs, err := s.regs.ListBlocks(c.Request().Context(), id)
	if err != nil {
		return err
	}
	if bs == nil {
		bs = []registration.Block{}
	}
	return writeJSON(c, http.StatusOK, blockList{Items: bs})
}

// deleteBlock ends a block: its unused seats return to the public at once,
// promoting the waiting list; the registrations made from it stay.
func (s *Server) deleteBlock(c echo.Context) error {
	id, err := blockID(c)
	if err != nil {
		return err
	}
	if err := s.regs.DeleteBlock(c.Request().Context(), id, callerOf(c)); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}
