package testenv

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
)

// placeholder is a place of a deployment in a file of deploy/: ${NAME}.
var placeholder = regexp.MustCompile(`\$\{([A-Z][A-Z0-9_]*)\}`)

// deployFile returns the file of deploy/ at rel (e.g.
// "haproxy/haproxy.cfg") as the tests run it: rendered with vars, as the
// file's header says (see renderDeployFile).
func deployFile(t T, rel string, vars map[string]string) string {
	t.Helper()
	b, err := os.ReadFile(deployPath(t, rel))
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	out, err := renderDeployFile(string(b), vars)
	if err != nil {
		t.Fatalf("testenv: deploy/%s: %v", rel, err)
	}
	return out
}

// deployPath is the path of the file of deploy/ at rel.
func deployPath(t T, rel string) string {
	t.Helper()
	return filepath.Join(ModuleRoot(t), "deploy", filepath.FromSlash(rel))
}

// renderDeployFile replaces each ${NAME} of text by vars[NAME], as
// envsubst does, with three rules that keep the tests to the file as it
// is: comment lines (starting with # or ;) stay as they are; a `server`
// line (an HAProxy instance) whose address is not in vars is left out,
// for tests that run fewer instances than the file lists; and any other
// ${NAME} without a value, or a value that no line uses, is an error.
func renderDeployFile(text string, vars map[string]string) (string, error) {
	used := map[string]bool{}
	var missing []string
	var out strings.Builder
	for line := range strings.Lines(text) {
		trimmed := strings.TrimSpace(line)
		if strings.HasPrefix(trimmed, "#") || strings.HasPrefix(trimmed, ";") {
			out.WriteString(line)
			continue
		}
		var unset []string
		rendered := placeholder.ReplaceAllStringFunc(line, func(m string) string {
			name := placeholder.FindStringSubmatch(m)[1]
			v, ok := vars[name]
			if !ok {
				unset = append(unset, name)
				return m
			}
			used[name] = true
			return v
		})
		switch {
		case len(unset) == 0:
			out.WriteString(rendered)
		case strings.HasPrefix(trimmed, "server "):
			// An instance the test does not run.
		default:
			missing = append(missing, unset...)
		}
	}
	if len(missing) > 0 {
		return "", fmt.Errorf("no value for %s", strings.Join(missing, ", "))
	}
	var unused []string
	for name := range vars {
		if !used[name] {
			unused = append(unused, name)
		}
	}
	if len(unused) > 0 {
		slices.Sort(unused)
		return "", fmt.Errorf("no place for %s", strings.Join(unused, ", "))
	}
	return out.String(), nil
}
