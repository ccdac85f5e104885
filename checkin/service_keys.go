package checkin

import (
	"cmp"
	"context"
	"errors"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/physiciansnet/capacityd"
)

// KeysLoaded reports whether this instance holds its keys (Run read them,
// or a first use did).
func (s *Service) KeysLoaded() bool { return s.keys.Len() > 0 }

// Load reads the check-in keys, making the first one when there is none.
func (s *Service) Load(ctx context.Context) error {
	stored, err := s.cfg.Store.CheckinKeys(ctx, func() (StoredKey, error) {
		k, err := NewKey(s.cfg.Now().UTC())
		if err != nil {
			return StoredKey{}, err
		}
		return SealKey(s.cfg.Sealer, k)
	})
	if err != nil {
		return err
	}
	keys := make([]Key, 0, len(stored))
	var sealed error
	for _, sk := range stored {
		k, err := openKey(s.cfg.Sealer, sk)
		if err != nil {
			// A key this instance cannot open (another WEBHOOK_SECRET_KEY)
			// is left out; the others still serve.
			sealed = err
			continue
		}
		keys = append(keys, k)
	}
	if len(keys) == 0 && sealed != nil {
		return capacityd.Unavailable(sealed, "no check-in key opens with this instance's WEBHOOK_SECRET_KEY")
	}
	s.keys.Set(keys)
	s.mu.Lock()
	s.loaded = time.Now()
	s.mu.Unlock()
	return nil
}

// KeyRefresh is how often Run reads the keys again, so that a key that
// another instance or "capacityd ticket-key rotate" added signs here too.
const KeyRefresh = time.Minute

// Run reads the keys at once, then every interval (0: KeyRefresh) until
// ctx ends; a failed read keeps the keys this instance has.
func (s *Service) Run(ctx context.Context, every time.Duration) {
	// The keys are read (the first one made) here, not when the service
	// is made: a start does not wait for the database, and the first use
	// reads them if this has not yet.
	_ = s.Load(ctx)
	t := time.NewTicker(cmp.Or(every, KeyRefresh))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			_ = s.Load(ctx)
		}
	}
}

// reloadEvery bounds how often a ticket with an unknown kid reloads the
// keys (another instance may have rotated them).
const reloadEvery = 5 * time.Second

// ready reads the keys when this instance has none yet (the first use
// after a start whose database did not answer, or the first key of a new
// database): the service starts without them.
func (s *Service) ready(ctx context.Context) error {
	if s.keys.Len() > 0 {
		return nil
	}
	if err := s.Load(ctx); err != nil {
		return capacityd.Unavailable(err, "the check-in keys could not be read; retry later")
	}
	return nil
}

// SignAs signs claims with the newest check-in key and the typ given
// (attendance statements), reading the keys first if need be.
func (s *Service) SignAs(ctx context.Context, claims jwt.Claims, typ string) (string, error) {
	if err := s.ready(ctx); err != nil {
		return "", err
	}
	return s.keys.SignAs(claims, typ)
}

// verify checks a ticket, reloading the keys once when it names a key
// this instance does not know yet.
func (s *Service) verify(ctx context.Context, ticket string) (TicketClaims, error) {
	if err := s.ready(ctx); err != nil {
		return TicketClaims{}, err
	}
	c, err := s.keys.VerifyTicket(ticket)
	if !errors.Is(err, ErrUnknownKey) {
		return c, err
	}
	s.mu.Lock()
	stale := time.Since(s.loaded) > reloadEvery
	s.mu.Unlock()
	if stale {
		if err := s.Load(ctx); err != nil {
			return TicketClaims{}, err
		}
		if c, err = s.keys.VerifyTicket(ticket); !errors.Is(err, ErrUnknownKey) {
			return c, err
		}
	}
	return TicketClaims{}, InvalidTicket("it is signed with a key this service does not know")
}
