package note_test

import (
	"flag"
	"os"
)

func flagLookup(name string) string {
	if f := flag.Lookup(name); f != nil {
		return f.Value.String()
	}
	return ""
}

func writeFile(path, s string) error { return os.WriteFile(path, []byte(s), 0o644) }
