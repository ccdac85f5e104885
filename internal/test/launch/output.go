package launch

import (
	"bytes"
	"sync"
)

// Output collects what a process writes (or any log), safe for concurrent
// writers. With Max > 0 it keeps only the last Max bytes; the zero Output
// keeps everything.
type Output struct {
	// Max bounds what is kept, in bytes; 0: no bound.
	Max int

	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (o *Output) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.b.Write(p)
	if over := o.b.Len() - o.Max; o.Max > 0 && over > 0 {
		o.b.Next(over)
	}
	return len(p), nil
}

// String returns what is kept of what was written so far.
func (o *Output) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.b.String()
}

// Tail returns the last n bytes of String, marked with a leading "…"
// when cut.
func (o *Output) Tail(n int) string {
	s := o.String()
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}
