package webhook

import (
	"context"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
)

// backlogStore answers Backlog with what the test sends, once the test
// lets it; the dispatcher's backlog refresh calls nothing else.
type backlogStore struct {
	Store
	asked  chan struct{}
	answer chan Backlog
}

func (s backlogStore) Backlog(context.Context) (Backlog, error) {
	s.asked <- struct{}{}
	return <-s.answer, nil
}

// TestAWebhookAddedDuringABacklogRefreshKeepsTheDispatcherOn: a refresh
// that counted no webhook before one was added on this instance does not
// turn the dispatcher off (it would sleep until the next refresh while
// commits waited); a refresh that starts after it decides by its count.
func TestAWebhookAddedDuringABacklogRefreshKeepsTheDispatcherOn(t *testing.T) {
	t.Parallel()
	st := backlogStore{asked: make(chan struct{}), answer: make(chan Backlog)}
	d := NewDispatcher(DispatcherConfig{Store: st, Guard: &Guard{}, Registerer: prometheus.NewRegistry()})
	refresh := func() chan error {
		done := make(chan error, 1)
		go func() { done <- d.refreshBacklog(t.Context()) }()
		<-st.asked
		return done
	}

	done := refresh()
	st.answer <- Backlog{}
	require.NoError(t, <-done)
	require.False(t, d.active.Load(), "no webhook: off")

	done = refresh()
	d.Activate() // a webhook is added while the count is read
	st.answer <- Backlog{}
	require.NoError(t, <-done)
	require.True(t, d.active.Load(), "the count was read before the webhook was added")

	done = refresh()
	st.answer <- Backlog{}
	require.NoError(t, <-done)
	require.False(t, d.active.Load(), "a later count that finds none turns it off (the webhook was deleted)")

	done = refresh()
	st.answer <- Backlog{Webhooks: 1}
	require.NoError(t, <-done)
	require.True(t, d.active.Load(), "a webhook another instance added turns it on")
}
