// Command apidoc renders the API description (api/openapi.yaml) as the
// Markdown reference docs/api.md. `go generate ./api` runs it; a test
// fails while docs/api.md differs from what it renders.
//
//	go run ./internal/tools/apidoc -in api/openapi.yaml -out docs/api.md
package main

import (
	"flag"
	"fmt"
	"os"
)

func main() {
	in := flag.String("in", "api/openapi.yaml", "the OpenAPI description")
	out := flag.String("out", "docs/api.md", "the Markdown file to write")
	flag.Parse()
	if err := run(*in, *out); err != nil {
		fmt.Fprintln(os.Stderr, "apidoc:", err)
		os.Exit(1)
	}
}

func run(in, out string) error {
	spec, err := os.ReadFile(in)
	if err != nil {
		return err
	}
	md, err := Render(spec)
	if err != nil {
		return fmt.Errorf("%s: %w", in, err)
	}
	return os.WriteFile(out, []byte(md), 0o644)
}
