//go:build !brokenexactness

package store

// trustCachedCounts makes an instance decide on the counts it cached after
// its own last commit even when another instance has changed the activity
// since. It is false in every real build; only a build with the tag
// brokenexactness (see exactness_broken.go) sets it, so that a test can
// prove that the history checker catches the oversells that follow.
const trustCachedCounts = false
