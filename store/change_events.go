package store

import (
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/physiciansnet/capacityd/registration"
)

// eventsOf collects the events of a transaction as columns.
type eventsOf struct {
	aids, seqs                       []int64
	regIDs, users, types, to, actors []string
	from                             []*string
	seats                            []int32
	seatsFrom                        []*int32
	reqIDs                           []string
	at                               []time.Time
	blocks                           []*string
	// expires and positions are the registration's deadline and place in
	// the waiting list as the change left them, for webhook payloads.
	expires   []*time.Time
	positions []*int32
	reasons   []*string
}

func (c *eventsOf) add(aid int64, e registration.Event) {
	var from *string
	if e.From != nil {
		f := string(*e.From)
		from = &f
	}
	c.aids, c.seqs = append(c.aids, aid), append(c.seqs, e.Seq)
	c.regIDs, c.users, c.types = append(c.regIDs, e.RegistrationID), append(c.users, e.UserID), append(c.types, string(e.Type))
	c.from, c.to, c.actors = append(c.from, from), append(c.to, string(e.To)), append(c.actors, e.Actor)
	c.reqIDs, c.at = append(c.reqIDs, e.RequestID), append(c.at, e.At)
	var seatsFrom *int32
	if e.SeatsFrom != nil {
		n := int32(*e.SeatsFrom)
		seatsFrom = &n
	}
	seats := int32(max(e.Seats, 1))
	if e.Type.IsBlockEvent() {
		seats = int32(e.Seats)
	}
	c.seats, c.seatsFrom, c.blocks = append(c.seats, seats), append(c.seatsFrom, seatsFrom), append(c.blocks, e.BlockID)
	var expires *time.Time
	var pos *int32
	if r := e.Registration; r != nil {
		expires = r.ExpiresAt
		if r.WaitlistPosition != nil {
			n := int32(*r.WaitlistPosition)
			pos = &n
		}
	}
	c.expires, c.positions = append(c.expires, expires), append(c.positions, pos)
	c.reasons = append(c.reasons, (*string)(e.Reason))
}

// batch adds to b the insert of the collected events.
func (c *eventsOf) batch(b *pgx.Batch) {
	if len(c.aids) == 0 {
		return
	}
	b.Queue(`INSERT INTO registration_event (activity_id, seq, registration_id, user_id, type, from_status, to_status, actor, request_id, at,
			seats, seats_from, block_id, expires_at, waitlist_position, reason)
		SELECT * FROM unnest($1::bigint[], $2::bigint[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[], $9::text[],
			$10::timestamptz[], $11::int[], $12::int[], $13::text[], $14::timestamptz[], $15::int[], $16::text[])`,
		c.aids, c.seqs, c.regIDs, c.users, c.types, c.from, c.to, c.actors, c.reqIDs, c.at, c.seats, c.seatsFrom, c.blocks,
		c.expires, c.positions, c.reasons)
}
