package main

import (
	"io"
	"maps"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"
)

// composeFile is the part of a Compose file the checks read.
type composeFile struct {
	Services map[string]struct {
		Image       string
		Build       string
		Ports       []string
		Environment map[string]string
		Healthcheck struct{ Test []string }
		Volumes     []string
		Profiles    []string
		DependsOn   map[string]struct{ Condition string } `yaml:"depends_on"`
	}
	Volumes map[string]any
}

func readCompose(t *testing.T, name string) composeFile {
	t.Helper()
	b, err := os.ReadFile("../../" + name)
	require.NoError(t, err)
	var f composeFile
	require.NoError(t, yaml.Unmarshal(b, &f), name)
	return f
}

// composeValue interpolates ${VAR}, ${VAR:-default} and ${VAR:?message} as
// Compose does, with vars as the environment.
func composeValue(s string, vars map[string]string) string {
	return os.Expand(s, func(ref string) string {
		name, def, _ := strings.Cut(strings.Replace(ref, ":?", ":-", 1), ":-")
		if v, ok := vars[name]; ok {
			return v
		}
		if strings.Contains(ref, ":?") {
			return ""
		}
		return def
	})
}

// versionLess reports whether dotted version a is below b ("1.26.5" <
// "1.26.8").
func versionLess(a, b string) bool {
	as, bs := strings.Split(a, "."), strings.Split(b, ".")
	for i := 0; i < max(len(as), len(bs)); i++ {
		var x, y int
		if i < len(as) {
			x, _ = strconv.Atoi(as[i])
		}
		if i < len(bs) {
			y, _ = strconv.Atoi(bs[i])
		}
		if x != y {
			return x < y
		}
	}
	return false
}

// versionedImage is an image reference with an explicit version tag, pinned
// by digest: never bare or :latest.
var versionedImage = regexp.MustCompile(`^[a-z0-9./-]+:[0-9][A-Za-z0-9._-]*@sha256:[0-9a-f]{64}$`)

func TestComposeFileMatchesTheSettings(t *testing.T) {
	t.Parallel()
	f := readCompose(t, "docker-compose.yml")
	require.ElementsMatch(t, []string{"postgres", "redis", "capacityd"}, slices.Collect(maps.Keys(f.Services)))

	for _, name := range []string{"postgres", "redis"} {
		s := f.Services[name]
		require.Regexp(t, versionedImage, composeValue(s.Image, nil), name)
		require.Empty(t, s.Ports, "%s publishes no host port by default (docker-compose.ports.yml does)", name)
		require.NotEmpty(t, s.Healthcheck.Test, "%s has a healthcheck", name)
	}
	require.Contains(t, f.Services["postgres"].Volumes, "pgdata:/var/lib/postgresql/data")
	require.Contains(t, f.Volumes, "pgdata", "a named volume for PostgreSQL's data")

	app := f.Services["capacityd"]
	require.Equal(t, ".", app.Build)
	require.Empty(t, app.Healthcheck.Test, "capacityd's healthcheck is the image's")
	for dep, d := range app.DependsOn {
		require.Contains(t, f.Services, dep)
		require.Equal(t, "service_healthy", d.Condition)
	}
	for _, p := range app.Ports {
		require.True(t, strings.HasPrefix(composeValue(p, nil), "127.0.0.1:8080:"), "published on loopback only: %s", p)
	}
	// Every variable is a setting of capacityd serve, and together they
	// load as serve loads them.
	known := map[string]bool{}
	for _, s := range serveSettings {
		known[s.env] = true
	}
	env := map[string]string{}
	for k, v := range app.Environment {
		require.True(t, known[k], "%s is not a capacityd setting", k)
		env[k] = composeValue(v, map[string]string{"CAPACITY_JWT_SECRET": goodSecret})
	}
	require.Empty(t, composeValue(app.Environment["CAPACITY_JWT_SECRET"], nil), "the secret comes from the caller, with no default")
	cfg, err := loadConfig("serve", serveSettings, nil, envOf(env), io.Discard, nil)
	require.NoError(t, err)
	for setting, service := range map[string]string{cfg.DatabaseURL: "postgres", cfg.RedisURL: "redis"} {
		u, err := url.Parse(setting)
		require.NoError(t, err)
		require.Equal(t, service, u.Hostname())
	}
	require.Equal(t, ":8080", cfg.ListenAddr, "the port the image's healthcheck and EXPOSE use")

	ports := readCompose(t, "docker-compose.ports.yml")
	for name, s := range ports.Services {
		require.Contains(t, f.Services, name)
		for _, p := range s.Ports {
			require.True(t, strings.HasPrefix(p, "127.0.0.1:"), "%s: %s", name, p)
		}
	}
}

func TestDockerfileAndIgnoreFile(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("../../Dockerfile")
	require.NoError(t, err)
	df := string(b)
	require.Contains(t, df, `HEALTHCHECK`)
	require.Regexp(t, `CMD \["/capacityd", "health", "http://127\.0\.0\.1:8080/readyz"\]`, df)
	require.Contains(t, df, "EXPOSE 8080")
	require.Contains(t, df, "ENV LISTEN_ADDR=:8080")
	require.Contains(t, df, "USER nonroot:nonroot")
	// Base images are build arguments, one line each, with a tag and
	// pinned by digest; the Go image is at least go.mod's Go.
	args := regexp.MustCompile(`(?m)^ARG (GO_IMAGE|RUNTIME_IMAGE)=(\S+)$`).FindAllStringSubmatch(df, -1)
	require.Len(t, args, 2)
	for _, a := range args {
		require.Regexp(t, `^[a-z0-9./-]+:[A-Za-z0-9._-]+@sha256:[0-9a-f]{64}$`, a[2], a[1])
		require.NotContains(t, a[2], ":latest")
	}
	goMod, err := os.ReadFile("../../go.mod")
	require.NoError(t, err)
	want := regexp.MustCompile(`(?m)^go (\d+\.\d+(\.\d+)?)$`).FindStringSubmatch(string(goMod))
	got := regexp.MustCompile(`ARG GO_IMAGE=golang:(\d+\.\d+\.\d+)-`).FindStringSubmatch(df)
	require.NotNil(t, want)
	require.NotNil(t, got, "the Go image names its exact version")
	require.False(t, versionLess(got[1], want[1]), "the Go image %s builds go.mod's go %s", got[1], want[1])
	require.Regexp(t, `(?m)^FROM \$\{GO_IMAGE\} AS build$`, df)
	require.Regexp(t, `(?m)^FROM \$\{RUNTIME_IMAGE\}$`, df)

	b, err = os.ReadFile("../../.dockerignore")
	require.NoError(t, err)
	ignored := strings.Fields(string(regexp.MustCompile(`(?m)#.*$`).ReplaceAll(b, nil)))
	for _, must := range []string{".git", "bin", ".data", "artifacts"} {
		require.Contains(t, ignored, must)
	}
}
