package main

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
)

// header opens the generated page.
const header = "<!-- Generated from api/openapi.yaml by `go generate ./api`. Do not edit: edit the description. -->\n\n"

// methods is the order in which a path's operations are listed.
var methods = []string{"POST", "GET", "PATCH", "PUT", "DELETE"}

// Render returns the Markdown reference of the OpenAPI description spec.
func Render(spec []byte) (string, error) {
	loader := openapi3.NewLoader()
	loader.IncludeOrigin = true
	doc, err := loader.LoadFromData(spec)
	if err != nil {
		return "", err
	}
	if err := doc.Validate(loader.Context); err != nil {
		return "", err
	}
	var b strings.Builder
	b.WriteString(header)
	fmt.Fprintf(&b, "# %s HTTP API (version %s)\n\n", doc.Info.Title, doc.Info.Version)
	b.WriteString("The machine-readable description is [api/openapi.yaml](../api/openapi.yaml), " +
		"also served by the service at `GET /openapi.yaml`.\n\n")
	b.WriteString(strings.TrimSpace(doc.Info.Description) + "\n")
	ops := operations(doc)
	renderIndex(&b, doc, ops)
	for _, tag := range doc.Tags {
		fmt.Fprintf(&b, "\n## %s\n\n", tag.Name)
		if tag.Description != "" {
			b.WriteString(strings.TrimSpace(tag.Description) + "\n")
		}
		for _, op := range ops {
			if slices.Contains(op.op.Tags, tag.Name) {
				renderOperation(&b, doc, op)
			}
		}
	}
	renderSchemas(&b, doc)
	return b.String(), nil
}

// operation is one method of one path.
type operation struct {
	method, path string
	item         *openapi3.PathItem
	op           *openapi3.Operation
}

// operations lists every operation in the order of the description's
// paths.
func operations(doc *openapi3.T) []operation {
	paths := doc.Paths.Map()
	keys := make([]string, 0, len(paths))
	for p := range paths {
		keys = append(keys, p)
	}
	sort.Slice(keys, func(i, j int) bool { return line(paths[keys[i]].Origin) < line(paths[keys[j]].Origin) })
	var ops []operation
	for _, p := range keys {
		item := paths[p]
		for _, m := range methods {
			if op := item.GetOperation(m); op != nil {
				ops = append(ops, operation{method: m, path: p, item: item, op: op})
			}
		}
	}
	return ops
}

func line(o *openapi3.Origin) int {
	if o == nil || o.Key == nil {
		return 0
	}
	return o.Key.Line
}

// renderIndex writes the table of every route.
func renderIndex(b *strings.Builder, doc *openapi3.T, ops []operation) {
	b.WriteString("\n## Routes\n\n| route | who | what |\n|---|---|---|\n")
	for _, tag := range doc.Tags {
		for _, op := range ops {
			if slices.Contains(op.op.Tags, tag.Name) {
				fmt.Fprintf(b, "| [`%s %s`](#%s) | %s | %s |\n", op.method, op.path, anchor(op), who(doc, op), op.op.Summary)
			}
		}
	}
}

// anchor is the id of an operation's heading.
func anchor(op operation) string { return "op-" + strings.ToLower(op.op.OperationID) }

// who says who may call an operation, from its security and its
// description's first words.
func who(doc *openapi3.T, op operation) string {
	sec := op.op.Security
	if sec == nil {
		sec = &doc.Security
	}
	if len(*sec) == 0 {
		return "public"
	}
	d := op.op.Description
	switch {
	case strings.HasPrefix(d, "Admin only"):
		return "admin"
	case strings.HasPrefix(d, "The owner or an admin"):
		return "owner or admin"
	case strings.HasPrefix(d, "An admin, or a door role"):
		return "admin or door role"
	}
	return "user"
}

func renderOperation(b *strings.Builder, doc *openapi3.T, op operation) {
	fmt.Fprintf(b, "\n<a id=\"%s\"></a>\n### `%s %s`\n\n**%s.** %s\n", anchor(op), op.method, op.path, op.op.Summary,
		strings.TrimSpace(op.op.Description))
	params := append(slices.Clone(op.item.Parameters), op.op.Parameters...)
	if len(params) > 0 {
		b.WriteString("\n| parameter | in | type | required | description |\n|---|---|---|---|---|\n")
		for _, p := range params {
			v := p.Value
			fmt.Fprintf(b, "| `%s` | %s | %s | %s | %s |\n", v.Name, v.In, typeOf(v.Schema), yesNo(v.Required), cell(v.Description))
		}
	}
	query := 0
	for _, p := range params {
		if p.Value.In == openapi3.ParameterInQuery {
			query++
		}
	}
	if query == 0 {
		b.WriteString("\nNo query parameters: any is refused with `400`.\n")
	}
	if rb := op.op.RequestBody; rb != nil && rb.Value != nil {
		req := "optional"
		if rb.Value.Required {
			req = "required"
		}
		for _, ct := range sortedKeys(rb.Value.Content) {
			mt := rb.Value.Content[ct]
			fmt.Fprintf(b, "\nRequest body (`%s`, %s): %s. %s\n", ct, req, typeOf(mt.Schema), rb.Value.Description)
			writeExample(b, mt.Example)
		}
	}
	b.WriteString("\n| status | content | meaning |\n|---|---|---|\n")
	responses := op.op.Responses.Map()
	for _, code := range sortedKeys(responses) {
		r := responses[code].Value
		var contents []string
		for _, ct := range sortedKeys(r.Content) {
			contents = append(contents, fmt.Sprintf("`%s` %s", ct, typeOf(r.Content[ct].Schema)))
		}
		meaning := ""
		if r.Description != nil {
			meaning = cell(*r.Description)
		}
		for _, h := range sortedKeys(r.Headers) {
			meaning += fmt.Sprintf(" Header `%s`%s.", h, map[bool]string{true: "", false: " (sometimes)"}[r.Headers[h].Value.Required])
		}
		fmt.Fprintf(b, "| %s | %s | %s |\n", code, strings.Join(contents, "<br>"), meaning)
	}
	for _, code := range sortedKeys(responses) {
		if !strings.HasPrefix(code, "2") {
			continue
		}
		for _, ct := range sortedKeys(responses[code].Value.Content) {
			if ex := responses[code].Value.Content[ct].Example; ex != nil {
				fmt.Fprintf(b, "\nExample `%s`:\n", code)
				writeExample(b, ex)
			}
		}
	}
	for name, cb := range op.op.Callbacks {
		for _, expr := range sortedKeys(cb.Value.Map()) {
			item := cb.Value.Value(expr)
			for _, m := range methods {
				if cop := item.GetOperation(m); cop != nil {
					fmt.Fprintf(b, "\nCallback `%s`: `%s %s`. %s\n", name, m, expr, strings.TrimSpace(cop.Description))
					b.WriteString("\n| header | description |\n|---|---|\n")
					for _, p := range cop.Parameters {
						fmt.Fprintf(b, "| `%s` | %s |\n", p.Value.Name, cell(p.Value.Description))
					}
					if cop.RequestBody != nil {
						for _, ct := range sortedKeys(cop.RequestBody.Value.Content) {
							fmt.Fprintf(b, "\nBody (`%s`): %s.\n", ct, typeOf(cop.RequestBody.Value.Content[ct].Schema))
						}
					}
				}
			}
		}
	}
}

// renderSchemas writes every component schema in the order of the
// description.
func renderSchemas(b *strings.Builder, doc *openapi3.T) {
	b.WriteString("\n## Schemas\n")
	names := sortedKeys(doc.Components.Schemas)
	sort.SliceStable(names, func(i, j int) bool {
		return line(doc.Components.Schemas[names[i]].Value.Origin) < line(doc.Components.Schemas[names[j]].Value.Origin)
	})
	for _, name := range names {
		s := doc.Components.Schemas[name].Value
		fmt.Fprintf(b, "\n<a id=\"schema-%s\"></a>\n### %s\n\n", strings.ToLower(name), name)
		if s.Description != "" {
			b.WriteString(strings.TrimSpace(s.Description) + "\n\n")
		}
		if len(s.Properties) == 0 {
			fmt.Fprintf(b, "%s.\n", typeOf(&openapi3.SchemaRef{Value: s}))
			continue
		}
		if s.AdditionalProperties.Has != nil && !*s.AdditionalProperties.Has {
			b.WriteString("An object with exactly these fields (any other is refused in a request, never sent in a response).\n\n")
		}
		writeFields(b, s)
	}
}

// writeFields writes the table of an object's fields: the required ones
// in their order, then the others by name.
func writeFields(b *strings.Builder, s *openapi3.Schema) {
	b.WriteString("| field | type | required | description |\n|---|---|---|---|\n")
	names := slices.Clone(s.Required)
	for _, n := range sortedKeys(s.Properties) {
		if !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	for _, n := range names {
		p := s.Properties[n]
		if p == nil {
			continue
		}
		fmt.Fprintf(b, "| `%s` | %s | %s | %s |\n", n, typeOf(p), yesNo(slices.Contains(s.Required, n)), cell(p.Value.Description))
	}
}

// typeOf describes a schema in a few words: a link for a named one.
func typeOf(ref *openapi3.SchemaRef) string {
	if ref == nil {
		return ""
	}
	if ref.Ref != "" {
		name := ref.Ref[strings.LastIndex(ref.Ref, "/")+1:]
		link := fmt.Sprintf("[%s](#schema-%s)", name, strings.ToLower(name))
		if ref.Value != nil && ref.Value.Nullable {
			link += " or null"
		}
		return link
	}
	s := ref.Value
	var parts []string
	switch {
	case len(s.OneOf) > 0:
		parts = append(parts, "one of "+joinTypes(s.OneOf, ", "))
	case len(s.AllOf) > 0:
		parts = append(parts, joinTypes(s.AllOf, " with "))
	case s.Type.Is("array"):
		parts = append(parts, "array of "+typeOf(s.Items))
	case len(s.Enum) > 0:
		var vs []string
		for _, e := range s.Enum {
			if e != nil { // a nullable enum lists null, said by "or null"
				vs = append(vs, fmt.Sprintf("`%v`", e))
			}
		}
		parts = append(parts, strings.Join(vs, " \\| "))
	case s.Type != nil && len(*s.Type) > 0:
		parts = append(parts, (*s.Type)[0])
	case code(s) != "":
		parts = append(parts, "`error.code` = `"+code(s)+"`")
	}
	if s.Format != "" {
		parts = append(parts, "("+s.Format+")")
	}
	parts = append(parts, constraints(s)...)
	if s.Nullable {
		parts = append(parts, "or null")
	}
	return strings.Join(parts, " ")
}

// code returns the error code an inline error restriction fixes.
func code(s *openapi3.Schema) string {
	e := s.Properties["error"]
	if e == nil || e.Value.Properties["code"] == nil || len(e.Value.Properties["code"].Value.Enum) != 1 {
		return ""
	}
	return fmt.Sprint(e.Value.Properties["code"].Value.Enum[0])
}

func joinTypes(refs openapi3.SchemaRefs, sep string) string {
	var ts []string
	for _, r := range refs {
		ts = append(ts, typeOf(r))
	}
	return strings.Join(ts, sep)
}

// constraints lists a schema's ranges, lengths, pattern and default.
func constraints(s *openapi3.Schema) []string {
	var c []string
	num := func(f *float64) string { return strconv.FormatFloat(*f, 'f', -1, 64) }
	switch {
	case s.Min != nil && s.Max != nil:
		c = append(c, num(s.Min)+"–"+num(s.Max))
	case s.Min != nil:
		c = append(c, "≥ "+num(s.Min))
	case s.Max != nil:
		c = append(c, "≤ "+num(s.Max))
	}
	switch {
	case s.MinLength > 0 && s.MaxLength != nil:
		c = append(c, fmt.Sprintf("%d–%d characters", s.MinLength, *s.MaxLength))
	case s.MinLength > 0:
		c = append(c, fmt.Sprintf("at least %d character(s)", s.MinLength))
	}
	if s.Pattern != "" && s.Format == "" {
		c = append(c, "matching `"+s.Pattern+"`")
	}
	if s.MinItems > 0 {
		c = append(c, fmt.Sprintf("at least %d item(s)", s.MinItems))
	}
	if s.Default != nil {
		c = append(c, fmt.Sprintf("default `%v`", s.Default))
	}
	return c
}

// writeExample writes an example as a JSON block, or as text when it is a
// string (CSV, event streams).
func writeExample(b *strings.Builder, ex any) {
	if ex == nil {
		return
	}
	if s, ok := ex.(string); ok {
		fmt.Fprintf(b, "\n```text\n%s\n```\n", strings.TrimRight(s, "\n"))
		return
	}
	j, _ := json.MarshalIndent(ex, "", "  ")
	fmt.Fprintf(b, "\n```json\n%s\n```\n", j)
}

// cell makes text fit in a table cell.
func cell(s string) string {
	return strings.ReplaceAll(strings.Join(strings.Fields(s), " "), "|", "\\|")
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
