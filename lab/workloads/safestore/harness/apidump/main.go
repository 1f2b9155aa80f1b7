// apidump prints a Go package's exported API, one declaration per line, sorted, without
// comments or bodies: what a caller of the package can name. The lab compares a
// candidate's output with the fixture's (safe-store's clause S5).
//
//	apidump DIR
package main

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/parser"
	"go/printer"
	"go/token"
	"os"
	"sort"
	"strings"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: apidump DIR")
		os.Exit(2)
	}
	fset := token.NewFileSet()
	notTest := func(fi os.FileInfo) bool { return !strings.HasSuffix(fi.Name(), "_test.go") }
	pkgs, err := parser.ParseDir(fset, os.Args[1], notTest, 0)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	var lines []string
	for name, pkg := range pkgs {
		lines = append(lines, "package "+name)
		for _, file := range pkg.Files {
			for _, decl := range file.Decls {
				lines = append(lines, exported(fset, decl)...)
			}
		}
	}
	sort.Strings(lines)
	fmt.Println(strings.Join(lines, "\n"))
}

func show(fset *token.FileSet, node any) string {
	var buf bytes.Buffer
	if err := printer.Fprint(&buf, fset, node); err != nil {
		return "<" + err.Error() + ">"
	}
	return strings.Join(strings.Fields(buf.String()), " ")
}

func exported(fset *token.FileSet, decl ast.Decl) []string {
	switch d := decl.(type) {
	case *ast.FuncDecl:
		if !d.Name.IsExported() || (d.Recv != nil && !receiverExported(d.Recv)) {
			return nil
		}
		d.Body, d.Doc = nil, nil
		// parameter names are not part of what a caller depends on
		for _, list := range []*ast.FieldList{d.Recv, d.Type.Params, d.Type.Results} {
			unname(list)
		}
		return []string{show(fset, d)}
	case *ast.GenDecl:
		var out []string
		for _, spec := range d.Specs {
			switch s := spec.(type) {
			case *ast.TypeSpec:
				if s.Name.IsExported() {
					out = append(out, "type "+s.Name.Name+" "+typeShape(fset, s))
				}
			case *ast.ValueSpec:
				for _, n := range s.Names {
					if n.IsExported() {
						out = append(out, fmt.Sprintf("%s %s %s", d.Tok, n.Name, show(fset, s.Type)))
					}
				}
			}
		}
		return out
	}
	return nil
}

func unname(list *ast.FieldList) {
	if list == nil {
		return
	}
	var flat []*ast.Field
	for _, f := range list.List {
		for range f.Names {
			flat = append(flat, &ast.Field{Type: f.Type})
		}
		if len(f.Names) == 0 {
			flat = append(flat, &ast.Field{Type: f.Type})
		}
	}
	list.List = flat
}

func receiverExported(recv *ast.FieldList) bool {
	t := recv.List[0].Type
	if star, ok := t.(*ast.StarExpr); ok {
		t = star.X
	}
	id, ok := t.(*ast.Ident)
	return ok && id.IsExported()
}

// typeShape prints a struct by its exported fields only (unexported ones are the
// implementation's), an interface or any other type whole.
func typeShape(fset *token.FileSet, s *ast.TypeSpec) string {
	st, ok := s.Type.(*ast.StructType)
	if !ok {
		return show(fset, s.Type)
	}
	var fields []string
	hidden := false
	for _, f := range st.Fields.List {
		if len(f.Names) == 0 {
			fields = append(fields, show(fset, f.Type))
			continue
		}
		for _, n := range f.Names {
			if n.IsExported() {
				fields = append(fields, n.Name+" "+show(fset, f.Type))
			} else {
				hidden = true
			}
		}
	}
	shape := "struct { " + strings.Join(fields, "; ") + " }"
	if hidden {
		shape += " // has unexported fields"
	}
	return shape
}
