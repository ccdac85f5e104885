//go:build !brokendoor

package checkin

// acceptSecondEntries makes a "once" list accept an entry again. It is
// false in every real build; only a build with the tag brokendoor (see
// rule_broken.go) sets it, so that a test can prove that the door check
// catches the second entries that follow.
const acceptSecondEntries = false
