package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd/internal/test/testenv"
)

// servicesEnv is the environment of scripts/services.sh (or make) in a
// test: the four URLs it reads as given (empty ones unset) and its env
// file at envFile instead of .data/env.
func servicesEnv(envFile string, urls map[string]string) []string {
	var env []string
	for _, kv := range os.Environ() {
		switch name, _, _ := strings.Cut(kv, "="); name {
		case "DATABASE_URL", "TEST_DATABASE_URL", "REDIS_URL", "TEST_REDIS_URL", "CAPACITYD_SERVICES":
		default:
			env = append(env, kv)
		}
	}
	for name, v := range urls {
		if v != "" {
			env = append(env, name+"="+v)
		}
	}
	return append(env, "CAPACITYD_SERVICES_ENV="+envFile)
}

// servicesUp runs scripts/services.sh up with env and returns its output
// and exit code.
func servicesUp(t *testing.T, env []string) (string, int) {
	t.Helper()
	testenv.SkipShort(t, "PostgreSQL and Redis for scripts/services.sh")
	script, err := filepath.Abs("../../scripts/services.sh")
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", script, "up")
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	return string(out), exitCode(t, err, out)
}

func exitCode(t *testing.T, err error, out []byte) int {
	t.Helper()
	if err == nil {
		return 0
	}
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit, "%s", out)
	return exit.ExitCode()
}

// missingDatabase returns the URL of a database, on the tests' server,
// that does not exist.
func missingDatabase(t *testing.T) string {
	t.Helper()
	u, err := url.Parse(testenv.DatabaseURL())
	require.NoError(t, err)
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	u.Path = "/does_not_exist_" + hex.EncodeToString(b)
	return u.String()
}

// TestServicesStopsOnASettingThatDoesNotWork runs scripts/services.sh up
// with one of the URLs it reads set to a server that does not answer, a
// database that does not exist or a password Redis refuses: it stops
// with status 1 naming the variable and the URL (without its password),
// says why and what to do, and writes no env file: no other server or
// database takes the setting's place.
func TestServicesStopsOnASettingThatDoesNotWork(t *testing.T) {
	t.Parallel()
	closed := "127.0.0.1:" + strconv.Itoa(testenv.FreePort(t))
	missing := missingDatabase(t)
	redisURL, err := url.Parse(testenv.RedisURL())
	require.NoError(t, err)
	for _, c := range []struct {
		name, value, shown string
		says               []string
	}{
		{"DATABASE_URL", missing, missing, []string{"does not exist", "Create that database"}},
		{"DATABASE_URL", "postgres://postgres:hunter2@" + closed + "/capacityd", "postgres://postgres:***@" + closed + "/capacityd",
			[]string{"Connection refused", "Start that server or correct DATABASE_URL"}},
		{"TEST_DATABASE_URL", missing, missing, []string{"does not exist"}},
		{"REDIS_URL", "redis://" + closed + "/0", "redis://" + closed + "/0",
			[]string{"Connection refused", "Start that server or correct REDIS_URL"}},
		{"TEST_REDIS_URL", "redis://:hunter2@" + redisURL.Host + "/0", "redis://:***@" + redisURL.Host + "/0", []string{"WRONGPASS"}},
	} {
		t.Run(c.name+" "+c.shown, func(t *testing.T) {
			t.Parallel()
			urls := map[string]string{
				"DATABASE_URL": testenv.DatabaseURL(), "REDIS_URL": testenv.RedisURL(),
				"TEST_DATABASE_URL": "", "TEST_REDIS_URL": "",
			}
			urls[c.name] = c.value
			envFile := filepath.Join(t.TempDir(), "env")
			out, code := servicesUp(t, servicesEnv(envFile, urls))
			require.Equal(t, 1, code, "%s", out)
			require.Contains(t, out, "services: "+c.name+" is set to "+c.shown+", which does not work:")
			for _, s := range c.says {
				require.Contains(t, out, s)
			}
			require.Contains(t, out, "or unset "+c.name+" to let scripts/services.sh find or start a local server")
			require.NotContains(t, out, "hunter2")
			require.NoFileExists(t, envFile, "nothing written")
		})
	}
}

// TestServicesKeepsTheURLsGiven runs scripts/services.sh up with working
// URLs: it writes them as given, the test ones defaulting to the others.
func TestServicesKeepsTheURLsGiven(t *testing.T) {
	t.Parallel()
	db := testenv.NewDatabase(t) + "&pool_max_conns=3"
	envFile := filepath.Join(t.TempDir(), "env")
	out, code := servicesUp(t, servicesEnv(envFile, map[string]string{"DATABASE_URL": db, "REDIS_URL": testenv.RedisURL()}))
	require.Equal(t, 0, code, "%s", out)
	written, err := os.ReadFile(envFile)
	require.NoError(t, err)
	require.Equal(t, "export DATABASE_URL='"+db+"'\nexport TEST_DATABASE_URL='"+db+"'\n"+
		"export REDIS_URL='"+testenv.RedisURL()+"'\nexport TEST_REDIS_URL='"+testenv.RedisURL()+"'\n", string(written),
		"pgx's own parameters (pool_max_conns) are no reason to refuse a URL")
}

// TestMakeRunStopsOnADatabaseURLThatDoesNotExist runs make run with
// DATABASE_URL naming a database that does not exist: it stops before
// building or serving, with a non-zero status and the reason, and does
// not serve from another database.
func TestMakeRunStopsOnADatabaseURLThatDoesNotExist(t *testing.T) {
	testenv.SkipShort(t, "PostgreSQL for make run")
	t.Parallel()
	root, err := filepath.Abs("../..")
	require.NoError(t, err)
	missing := missingDatabase(t)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "make", "--no-print-directory", "-C", root, "run")
	cmd.Env = append(servicesEnv(filepath.Join(t.TempDir(), "env"), map[string]string{"DATABASE_URL": missing, "REDIS_URL": testenv.RedisURL()}),
		"LISTEN_ADDR=127.0.0.1:"+strconv.Itoa(testenv.FreePort(t)))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	out, err := cmd.CombinedOutput()
	require.NotEqual(t, 0, exitCode(t, err, out), "%s", out)
	require.Contains(t, string(out), "services: DATABASE_URL is set to "+missing+", which does not work:")
	require.Contains(t, string(out), "does not exist")
	require.NotContains(t, string(out), "go build", "stopped before building")
	require.NotContains(t, string(out), "capacityd is running")
}
