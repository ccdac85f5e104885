// Package widget holds the drop-in browser widgets that capacityd serves
// from its binary, for other sites to embed: seats.js (live "N of M seats
// left"), note-buttons.js (note views and waters) and queue.js (a user's
// place in an activity's admission queue). The demo page that shows them
// is package demo's.
package widget

import "embed"

// Assets are the widget scripts served under /widget/: seats.js,
// note-buttons.js and queue.js.
//
//go:embed seats.js note-buttons.js queue.js
var Assets embed.FS

// StyleHashes are the Content-Security-Policy hash sources of the <style>
// elements that seats.js and note-buttons.js add to a page (their default
// look), for a page whose policy lets styles in by hash, as the demo
// page's does. TestStyleHashes checks them against the scripts.
var StyleHashes = []string{
	"'sha256-gzTFCKMeKEvbXLbst2mJ0Y8E0TMX501OXeq3oxNEu+8='",
	"'sha256-wKmuK2GmLDZx8TcI+EX/gTOwckkabTOEdVxWWN/jpvg='",
}
