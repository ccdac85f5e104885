// Package widget holds the drop-in browser widgets that capacityd serves
// from its binary, for other sites to embed: seats.js (live "N of M seats
// left"), note-buttons.js (note views and waters) and queue.js (a user's
// place in an activity's admission queue). The demo page that shows them
// is package demo's.
//
// Each widget is one self-contained script, as a site includes it. What
// the scripts share is written once, in parts that are not served: lang.js
// (the language of an element's text) and style.js (the default look's
// fonts and how it is put into a page). A script names a part on a line of
// its own, "// @include lang.js", and Script serves it with the part in
// that line's place.
package widget

import (
	"embed"
	"fmt"
	"regexp"
)

//go:embed seats.js note-buttons.js queue.js lang.js style.js
var sources embed.FS

// Names are the widget scripts served under /widget/.
var Names = []string{"seats.js", "note-buttons.js", "queue.js"}

// includeLine is a line of a script that names a part to put in its place.
var includeLine = regexp.MustCompile(`(?m)^[ \t]*// @include ([a-z-]+\.js)\n`)

// scripts are the widget scripts as served, by name.
var scripts = assemble()

// Script returns the widget script name as served, and whether there is
// one of that name.
func Script(name string) ([]byte, bool) {
	b, ok := scripts[name]
	return b, ok
}

// assemble builds the served scripts from their sources. A script that
// names a part that is not embedded is a fault of this package's files,
// found by any test that loads it.
func assemble() map[string][]byte {
	out := make(map[string][]byte, len(Names))
	for _, name := range Names {
		src, err := sources.ReadFile(name)
		if err != nil {
			panic(fmt.Sprintf("widget: %v", err))
		}
		out[name] = includeLine.ReplaceAllFunc(src, func(line []byte) []byte {
			part := includeLine.FindSubmatch(line)[1]
			b, err := sources.ReadFile(string(part))
			if err != nil || includeLine.Match(b) {
				panic(fmt.Sprintf("widget: %s includes %s, which is not a part of package widget (or includes another)", name, part))
			}
			return b
		})
	}
	return out
}

// StyleHashes are the Content-Security-Policy hash sources of the <style>
// elements that seats.js and note-buttons.js add to a page (their default
// look), for a page whose policy lets styles in by hash, as the demo
// page's does. TestStyleHashes checks them against the scripts.
var StyleHashes = []string{
	"'sha256-gzTFCKMeKEvbXLbst2mJ0Y8E0TMX501OXeq3oxNEu+8='",
	"'sha256-wKmuK2GmLDZx8TcI+EX/gTOwckkabTOEdVxWWN/jpvg='",
}
