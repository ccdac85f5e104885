// Package widget holds the drop-in browser widgets and the demo page that
// capacityd serves from its binary: seats.js (live "N of M seats left"),
// note-buttons.js (note views and waters) and the demo page's template,
// script and style.
package widget

import (
	"embed"
	"html/template"
)

// Assets are the static files served under /widget/: seats.js,
// note-buttons.js, demo.js and demo.css.
//
//go:embed seats.js note-buttons.js demo.js demo.css
var Assets embed.FS

//go:embed demo.html
var demoHTML string

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
