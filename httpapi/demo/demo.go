// Package demo is the demo page that capacityd serves at /demo: the
// embeddable widgets (package widget) live on activities, a pool and a
// note of the service, with the snippets that embed them in another site
// and, when the DemoSignups setting allows it, buttons that sign random
// users up. This package holds the page's template, script and style;
// package httpapi serves them (the page at /demo, its script and style
// under /widget/ beside the widgets).
package demo

import (
	"embed"
	"html/template"
)

// Assets are the page's script and style, served under /widget/: demo.js
// and demo.css.
//
//go:embed demo.js demo.css
var Assets embed.FS

//go:embed demo.html
var pageHTML string

// Page is the template of the demo page. Its data is Data.
var Page = template.Must(template.New("demo").Parse(pageHTML))

// Data fills the demo page.
type Data struct {
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
	Pool *Pool
	// MissingPool is the id of a pool asked for that does not exist;
	// the page says so.
	MissingPool string
}

// MaxPoolActivities is the most activities of a pool the demo page
// shows widgets for; the pool's line counts the others.
const MaxPoolActivities = 4

// Pool is a pool shown by the demo page: a line saying that its
// activities share its seats, and a seat widget for each of them, so that
// a signup to one visibly lowers the others' remaining.
type Pool struct {
	ID       string
	Title    string
	Capacity int
	// Activities are the ids of the activities shown, at most
	// MaxPoolActivities; More counts the pool's other activities.
	Activities []string
	More       int
	// Signups shows the "sign up a random user" buttons.
	Signups bool
}

// NewPool returns the Pool of a pool's settings: the first
// MaxPoolActivities of activities are shown.
func NewPool(id, title string, capacity int, activities []string, signups bool) *Pool {
	shown := activities[:min(len(activities), MaxPoolActivities)]
	return &Pool{ID: id, Title: title, Capacity: capacity, Activities: shown,
		More: len(activities) - len(shown), Signups: signups}
}

// Name is an activity named in a pool's line, after Before (""
// first, then ", ", and " and " before the last).
type Name struct {
	ID     string
	Before string
}

// Names returns the activities shown, as the pool's line names them.
func (p Pool) Names() []Name {
	out := make([]Name, len(p.Activities))
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
func (p Pool) Shared() bool { return len(p.Activities)+p.More > 1 }

// Cards returns the cards of the pool's activities shown.
func (p Pool) Cards() []Card {
	out := make([]Card, len(p.Activities))
	for i, id := range p.Activities {
		out[i] = Card{ID: id, Signups: p.Signups}
	}
	return out
}

// Card is one activity shown by the demo page.
type Card struct {
	ID string
	// Waitlist says the activity keeps a waiting list.
	Waitlist bool
	Signups  bool
}

// Cards returns the activities the page shows, in order.
func (d Data) Cards() []Card {
	var out []Card
	if d.ActivityID != "" {
		out = append(out, Card{ID: d.ActivityID, Signups: d.Signups})
	}
	if d.WaitlistID != "" {
		out = append(out, Card{ID: d.WaitlistID, Waitlist: true, Signups: d.Signups})
	}
	return out
}
