package chaos

import (
	"net/http"
	"slices"

	"github.com/physiciansnet/capacityd/internal/test/history"
)

// Parties counts what a history did with groups.
type Parties struct {
	// Activities that take parties, Strict of them with a strict
	// waiting list.
	Activities, Strict int
	// Signups for more than one seat that were answered, and how:
	// Seated (201), Waitlisted (202) or Full (409 activity_full).
	Signups, Seated, Waitlisted, Full int
	// Reductions answered, Reduced of them 200 to fewer seats than the
	// client knew the registration to hold (a change, unless another
	// client's reduction had made it first).
	Reductions, Reduced int
}

// PartiesOf counts the parties of h.
func PartiesOf(h history.History) Parties {
	var p Parties
	for _, op := range h.Ops {
		if op.Result != history.Answered {
			continue
		}
		switch o := op.Output; {
		case op.Kind == history.CreateActivity && o.Status == http.StatusCreated && op.Input.MaxSeats > 1:
			p.Activities++
			if op.Input.Policy != "fill" {
				p.Strict++
			}
		case op.Kind == history.Signup && op.Input.Seats > 1 && o.Status < 500:
			p.Signups++
			switch {
			case o.Status == http.StatusCreated:
				p.Seated++
			case o.Status == http.StatusAccepted:
				p.Waitlisted++
			case o.Code == "activity_full":
				p.Full++
			}
		case op.Kind == history.ReduceSeats && o.Status < 500:
			p.Reductions++
			if o.Status == http.StatusOK && op.Input.Held > op.Input.Seats {
				p.Reduced++
			}
		}
	}
	return p
}

// Pools counts what a history did with pools.
type Pools struct {
	// Pools created, and activities created in one pool (InOne) or in two
	// (InTwo).
	Pools, InOne, InTwo int
	// Signups on activities in pools that were answered, and how: Seated
	// (201), Waitlisted (202) or Full (409 activity_full).
	Signups, Seated, Waitlisted, Full int
	// Reads of pools answered 200, FullReads of them with no seat left,
	// and ReservedReads of them that showed seats its activities' blocks
	// hold.
	Reads, FullReads, ReservedReads int
	// Blocked are the activities in pools that got a block at creation.
	Blocked int
}

// PoolsOf counts the pools of h.
func PoolsOf(h history.History) Pools {
	var p Pools
	pooled, blocked := map[string]bool{}, map[string]bool{}
	for _, op := range h.Ops {
		if op.Result != history.Answered {
			continue
		}
		switch o := op.Output; {
		case op.Kind == history.CreatePool && o.Status == http.StatusCreated:
			p.Pools++
		case op.Kind == history.CreateActivity && o.Status == http.StatusCreated && len(op.Input.Pools) > 0:
			pooled[op.Input.Key] = true
			if len(op.Input.Pools) == 1 {
				p.InOne++
			} else {
				p.InTwo++
			}
		case op.Kind == history.Signup && pooled[op.Input.Key] && o.Status < 500:
			p.Signups++
			switch {
			case o.Status == http.StatusCreated:
				p.Seated++
			case o.Status == http.StatusAccepted:
				p.Waitlisted++
			case o.Code == "activity_full":
				p.Full++
			}
		case op.Kind == history.ReadPool && o.Status == http.StatusOK:
			p.Reads++
			if o.Taken >= o.Capacity {
				p.FullReads++
			}
			if o.Reserved > 0 {
				p.ReservedReads++
			}
		case op.Kind == history.CreateBlock && o.Status == http.StatusCreated && pooled[op.Input.Key] && !blocked[op.Input.Key]:
			blocked[op.Input.Key] = true
			p.Blocked++
		}
	}
	return p
}

// Blocks counts what a history did with blocks.
type Blocks struct {
	// Created blocks (201), and creations refused as Full; Deleted
	// (204), and deletions that found the block Gone (404).
	Created, Full, Deleted, Gone int
	// Signups with a code that were answered, and how: Seated (201),
	// Waitlisted (202), SignupsFull (409 activity_full), or BadCode (400:
	// no live block has the code).
	Signups, Seated, Waitlisted, SignupsFull, BadCode int
	// ReservedReads are authoritative activity reads that showed reserved
	// seats.
	ReservedReads int
	// RoleBlocks are the blocks for a role created. RoleSignups are the
	// answered signups whose token holds blockRole (RoleAndCode of them
	// with a code too): seated FromRoleBlock, RoleFromCodeBlock, or on
	// RolePublic seats, RoleWaitlisted, or RoleFull (409 activity_full).
	RoleBlocks, RoleSignups, RoleAndCode                                   int
	FromRoleBlock, RoleFromCodeBlock, RolePublic, RoleWaitlisted, RoleFull int
	// OtherRoleSignups are the answered signups whose token holds other
	// roles only, OtherRoleFromBlock of them seated from a block (of
	// their code).
	OtherRoleSignups, OtherRoleFromBlock int
}

// BlocksOf counts the blocks of h.
func BlocksOf(h history.History) Blocks {
	var b Blocks
	roleBlocks := map[string]bool{}
	for _, op := range h.Ops {
		if op.Result == history.Answered && op.Kind == history.CreateBlock && op.Output.Status == http.StatusCreated && op.Input.Role != "" {
			roleBlocks[op.Output.ID] = true
		}
	}
	b.RoleBlocks = len(roleBlocks)
	for _, op := range h.Ops {
		if op.Result != history.Answered {
			continue
		}
		if op.Kind == history.Signup && len(op.Input.Roles) > 0 && op.Output.Status < 500 {
			b.countRoles(op, roleBlocks[op.Output.Block])
		}
		switch o := op.Output; {
		case op.Kind == history.CreateBlock && o.Status == http.StatusCreated:
			b.Created++
		case op.Kind == history.CreateBlock && o.Code == "activity_full":
			b.Full++
		case op.Kind == history.DeleteBlock && o.Status == http.StatusNoContent:
			b.Deleted++
		case op.Kind == history.DeleteBlock && o.Status == http.StatusNotFound:
			b.Gone++
		case op.Kind == history.Signup && op.Input.Code != "" && o.Status < 500:
			b.Signups++
			switch {
			case o.Status == http.StatusCreated:
				b.Seated++
			case o.Status == http.StatusAccepted:
				b.Waitlisted++
			case o.Code == "activity_full":
				b.SignupsFull++
			case o.Status == http.StatusBadRequest:
				b.BadCode++
			}
		case op.Kind == history.ReadActivity && o.Status == http.StatusOK && o.Reserved > 0:
			b.ReservedReads++
		}
	}
	return b
}

// countRoles counts an answered signup with roles; fromRole: its
// registration took seats of a block for a role.
func (b *Blocks) countRoles(op history.Op, fromRole bool) {
	o := op.Output
	if !slices.Contains(op.Input.Roles, blockRole) {
		b.OtherRoleSignups++
		if o.Block != "" {
			b.OtherRoleFromBlock++
		}
		return
	}
	b.RoleSignups++
	if op.Input.Code != "" {
		b.RoleAndCode++
	}
	switch {
	case o.Status == http.StatusCreated && fromRole:
		b.FromRoleBlock++
	case o.Status == http.StatusCreated && o.Block != "":
		b.RoleFromCodeBlock++
	case o.Status == http.StatusCreated:
		b.RolePublic++
	case o.Status == http.StatusAccepted:
		b.RoleWaitlisted++
	case o.Code == "activity_full":
		b.RoleFull++
	}
}

// SeriesCounts counts what a history did with series.
type SeriesCounts struct {
	// Series created, and Activities created in one.
	Series, Activities int
	// Signups on activities in series that were answered, Taken of them
	// (201 or 202), LimitReached of them refused at the user's limit.
	Signups, Taken, LimitReached int
}

// SeriesOf counts the series of h.
func SeriesOf(h history.History) SeriesCounts {
	var c SeriesCounts
	inSeries := map[string]bool{}
	for _, op := range h.Ops {
		if op.Result != history.Answered {
			continue
		}
		switch o := op.Output; {
		case op.Kind == history.CreateSeries && o.Status == http.StatusCreated:
			c.Series++
		case op.Kind == history.CreateActivity && o.Status == http.StatusCreated && op.Input.Series != "":
			inSeries[op.Input.Key] = true
			c.Activities++
		case op.Kind == history.Signup && inSeries[op.Input.Key] && o.Status < 500:
			c.Signups++
			switch {
			case o.Status == http.StatusCreated || o.Status == http.StatusAccepted:
				c.Taken++
			case o.Code == "limit_reached":
				c.LimitReached++
			}
		}
	}
	return c
}
