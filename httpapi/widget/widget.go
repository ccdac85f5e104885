// Package widget holds the drop-in browser widgets and the demo page that
// capacityd serves from its binary: seats.js (live "N of M seats left"),
// note-buttons.js (note views and waters), queue.js (a user's place in an
// activity's admission queue) and the demo page's template, script and
// style.
package widget

import (
	"embed"
	"html/template"
)

// Assets are the static files served under /widget/: seats.js,
// note-buttons.js, queue.js, demo.js and demo.css.
//
//go:embed seats.js note-buttons.js queue.js demo.js demo.css
var Assets embed.FS

//go:embed demo.html
var demoHTML string

// StyleHashes are the Content-Security-Policy hash sources of the <style>
// elements that seats.js and note-buttons.js add to a page (their default
// look), for a page whose policy lets styles in by hash, as the demo
// page's does. TestStyleHashes checks them against the scripts.
var StyleHashes = []string{
	"'sha256-1Zl6B6kifXVVX1CwLWlABX/w57yy2ljsF98N/PpmuKQ='",
	"'sha256-cns0QGnrX45nhZNtJESZ+kDiySX7RrDykJ1JJ1XYefE='",
}

// DemoPage is the template of the demo page. Its data is DemoData.
var DemoPage = template.Must(template.New("demo").Parse(demoHTML))

// DemoData fills the demo page.
type DemoData struct {
	// Base is the service's absolute URL as the browser reached it
	// ("https://seats.example"), so that the embed snippets work when
	// pasted into another site.
	Base string
	// ActivityID is the activity of the seat widget; empty leaves it out.
	ActivityID string
	// WaitlistID is a second activity, one that keeps a waiting list;
	// empty leaves it out.
	WaitlistID string
	// NoteID is the note of the note buttons; empty leaves them out.
	NoteID string
	// Signups shows the "sign up a random user" button.
	Signups bool
	// Pool is a pool shown with the seat widgets of its activities; nil
	// leaves it out.
	Pool *DemoPool
	// MissingPool is the id of a pool asked for that does not exist;
	// the page says so.
	MissingPool string
}

// MaxDemoPoolActivities is the most activities of a pool the demo page
// shows widgets for; the pool's line counts the others.
const MaxDemoPoolActivities = 4

// DemoPool is a pool shown by the demo page: a line saying that its
// activities share its seats, and a seat widget for each of them, so that
// a signup to one visibly lowers the others' remaining.
type DemoPool struct {
	ID       string
	Title    string
	Capacity int
	// Activities are the ids of the activities shown, at most
	// MaxDemoPoolActivities; More counts the pool's other activities.
	Activities []string
	More       int
	// Signups shows the "sign up a random user" buttons.
	Signups bool
}

// NewDemoPool returns the DemoPool of a pool's settings: the first
// MaxDemoPoolActivities of activities are shown.
func NewDemoPool(id, title string, capacity int, activities []string, signups bool) *DemoPool {
	shown := activities[:min(len(activities), MaxDemoPoolActivities)]
	return &DemoPool{ID: id, Title: title, Capacity: capacity, Activities: shown,
		More: len(activities) - len(shown), Signups: signups}
}

// DemoName is an activity named in a pool's line, after Before (""
// first, then ", ", and " and " before the last).
type DemoName struct {
	ID     string
	Before string
}

// Names returns the activities shown, as the pool's line names them.
func (p DemoPool) Names() []DemoName {
	out := make([]DemoName, len(p.Activities))
	for i, id := range p.Activities {
		out[i].ID = id
		switch {
		case i == 0:
		case i == len(p.Activities)-1 && p.More == 0:
			out[i].Before = " and "
		default:
			out[i].Before = ", "
		}
	}
	return out
}

// Shared says the pool has more than one activity.
func (p DemoPool) Shared() bool { return len(p.Activities)+p.More > 1 }

// Cards returns the cards of the pool's activities shown.
func (p DemoPool) Cards() []DemoCard {
	out := make([]DemoCard, len(p.Activities))
	for i, id := range p.Activities {
		out[i] = DemoCard{ID: id, Signups: p.Signups}
	}
	return out
}

// DemoCard is one activity shown by the demo page.
type DemoCard struct {
	ID string
	// Waitlist says the activity keeps a waiting list.
	Waitlist bool
	Signups  bool
}

// Cards returns the activities the page shows, in order.
func (d DemoData) Cards() []DemoCard {
	var out []DemoCard
	if d.ActivityID != "" {
		out = append(out, DemoCard{ID: d.ActivityID, Signups: d.Signups})
	}
	if d.WaitlistID != "" {
		out = append(out, DemoCard{ID: d.WaitlistID, Waitlist: true, Signups: d.Signups})
	}
	return out
}
