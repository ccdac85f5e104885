//go:build brokenexactness

package store

// trustCachedCounts: a deliberately broken build, for the test that proves
// the history checker catches an oversell. Never build a release with the
// brokenexactness tag.
const trustCachedCounts = true
