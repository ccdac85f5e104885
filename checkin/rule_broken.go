//go:build brokendoor

package checkin

// acceptSecondEntries: a deliberately broken build, for the test that
// proves the door check catches a registration let in twice on a "once"
// list. Never build a release with the brokendoor tag.
const acceptSecondEntries = true
