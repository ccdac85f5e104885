package testenv

import (
	"os"
	"path/filepath"
)

// ArtifactsDir is where tests leave what a person reads after a run
// (screenshots, histories): $ARTIFACTS_DIR, else artifacts/ at the
// module's root.
func ArtifactsDir(t T) string {
	t.Helper()
	if d := os.Getenv("ARTIFACTS_DIR"); d != "" {
		return d
	}
	return filepath.Join(ModuleRoot(t), "artifacts")
}

// ModuleRoot is the directory of go.mod above the test's working
// directory.
func ModuleRoot(t T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatalf("testenv: no go.mod above the test")
		}
		dir = parent
	}
}
