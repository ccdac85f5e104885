// Package launch builds capacityd and runs it as a process of its own on a
// loopback port, waiting until it answers: for the tests that signal it,
// kill it or run several of it, and for the load test, which measures it.
// It returns errors rather than failing a test, so that a program may use
// it too.
package launch

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
)

// BuildOptions choose how capacityd is built.
type BuildOptions struct {
	// Race builds with the race detector.
	Race bool
	// Tags are build tags; none: the release build.
	Tags []string
	// Dir is where the binary is written; empty: a new temporary
	// directory.
	Dir string
}

// key names the build that the options make.
func (o BuildOptions) key() string {
	return fmt.Sprintf("race=%t tags=%s dir=%s", o.Race, strings.Join(o.Tags, ","), o.Dir)
}

var builds sync.Map // BuildOptions.key() → *build

type build struct {
	once sync.Once
	path string
	err  error
}

// Build builds cmd/capacityd once per process for each set of options
// and returns the binary's path; the binary is named capacityd, the name
// the load test counts its processor time under. It must run inside the
// module.
func Build(ctx context.Context, o BuildOptions) (string, error) {
	v, _ := builds.LoadOrStore(o.key(), &build{})
	b := v.(*build)
	b.once.Do(func() { b.path, b.err = goBuild(ctx, o) })
	return b.path, b.err
}

func goBuild(ctx context.Context, o BuildOptions) (string, error) {
	dir := o.Dir
	if dir == "" {
		var err error
		if dir, err = os.MkdirTemp("", "capacityd-bin-"); err != nil {
			return "", fmt.Errorf("launch: %w", err)
		}
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("launch: %w", err)
	}
	bin := filepath.Join(dir, "capacityd")
	args := []string{"build", "-o", bin}
	if o.Race {
		args = append(args, "-race")
	}
	if len(o.Tags) > 0 {
		args = append(args, "-tags", strings.Join(o.Tags, ","))
	}
	cmd := exec.CommandContext(ctx, "go", append(args, "github.com/physiciansnet/capacityd/cmd/capacityd")...)
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("launch: build capacityd %v: %w\n%s", o.Tags, err, out)
	}
	return bin, nil
}
