package clienttest

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd/internal/test/testenv"
)

const clientModule = "github.com/physiciansnet/capacityd/client"

// A program outside this repository that requires the client gets no other
// module: go mod tidy leaves its go.sum empty (or holding the client
// alone) and its module graph is the program and the client.
func TestClientModuleRequiresNothing(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// The client's directory, as the service's go.mod replaces it.
	clientDir := strings.TrimSpace(goRun(ctx, t, ".", "list", "-m", "-f", "{{with .Replace}}{{.Dir}}{{end}}", clientModule))
	require.NotEmpty(t, clientDir, "the service's go.mod replaces %s with a directory", clientModule)
	clientDir, err := filepath.Abs(clientDir)
	require.NoError(t, err)
	require.FileExists(t, filepath.Join(clientDir, "go.mod"))

	dir := t.TempDir()
	goRun(ctx, t, dir, "mod", "init", "example.org/uses-capacityd-client")
	goRun(ctx, t, dir, "mod", "edit", "-require", clientModule+"@v0.0.0", "-replace", clientModule+"="+clientDir)
	main := `package main

import (
	"context"
	"fmt"

	"github.com/physiciansnet/capacityd/client"
)

func main() {
	c := client.New("http://127.0.0.1:8080", "", nil)
	fmt.Println(c.Health(context.Background()))
}
`
	require.NoError(t, os.WriteFile(filepath.Join(dir, "main.go"), []byte(main), 0o644))
	goRun(ctx, t, dir, "mod", "tidy")
	goRun(ctx, t, dir, "build", "-o", filepath.Join(dir, "prog"), ".")

	sum, err := os.ReadFile(filepath.Join(dir, "go.sum"))
	if !os.IsNotExist(err) {
		require.NoError(t, err)
	}
	for line := range strings.Lines(string(sum)) {
		require.True(t, strings.HasPrefix(line, clientModule+" "), "go.sum lists a module besides the client: %q\n%s", line, sum)
	}

	var mods []string
	dec := json.NewDecoder(strings.NewReader(goRun(ctx, t, dir, "list", "-m", "-json", "all")))
	for dec.More() {
		var m struct{ Path string }
		require.NoError(t, dec.Decode(&m))
		mods = append(mods, m.Path)
	}
	require.Equal(t, []string{"example.org/uses-capacityd-client", clientModule}, mods, "the program's module graph")
}

// The client module is built with the service's Go and requires nothing,
// and the container build, which downloads the modules before copying the
// sources, has the client's go.mod that the service's go.mod replaces.
func TestClientModuleBesideTheService(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	root := testenv.ModuleRoot(t)
	type goMod struct {
		Go      string
		Require []struct{ Path, Version string }
		Replace []struct {
			Old, New struct{ Path string }
		}
	}
	read := func(dir string) goMod {
		var m goMod
		require.NoError(t, json.Unmarshal([]byte(goRun(ctx, t, dir, "mod", "edit", "-json")), &m))
		return m
	}
	service, client := read(root), read(filepath.Join(root, "client"))
	require.Equal(t, service.Go, client.Go, "client/go.mod's go is the service's")
	require.Empty(t, client.Require, "the client module requires nothing")
	replaced := ""
	for _, r := range service.Replace {
		if r.Old.Path == clientModule {
			replaced = r.New.Path
		}
	}
	require.Equal(t, "./client", replaced, "the service builds against the client of its tree")

	b, err := os.ReadFile(filepath.Join(root, "Dockerfile"))
	require.NoError(t, err)
	df := string(b)
	copyMod, download := strings.Index(df, "\nCOPY client/go.mod client/\n"), strings.Index(df, "\nRUN go mod download\n")
	require.NotEqual(t, -1, copyMod, "the Dockerfile copies client/go.mod")
	require.Less(t, copyMod, download, "before go mod download")
}

// goRun runs the go command in dir and returns its standard output. It
// uses the environment's module proxy, with no workspace and go.mod
// updates allowed.
func goRun(ctx context.Context, t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOWORK=off")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	require.NoError(t, cmd.Run(), "go %s in %s:\n%s", strings.Join(args, " "), dir, stderr.String())
	return stdout.String()
}
