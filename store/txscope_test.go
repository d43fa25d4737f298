package store_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

// The guard on the writer pool (poolGuard) knows that a statement belongs inside a transaction by its context: the
// context the transaction hands its function. A closure that runs in a transaction — a function taking a
// context.Context and a bun.Tx or bun.IDB — and reaches for a context of the function around it (the request's)
// would slip a pool write past the guard, and on SQLite wait forever for the writer its own transaction holds. So
// no such closure of the product's code names a context from outside: it uses its own, or one made from it.
func TestTransactionsUseTheirContext(t *testing.T) {
	fset := token.NewFileSet()
	var found []string
	err := filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case "gen", "node_modules", "testdata", ".git":
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		for _, decl := range f.Decls {
			if fn, ok := decl.(*ast.FuncDecl); ok && fn.Body != nil {
				found = append(found, outerContexts(fset, fn.Type, fn.Body, nil, nil)...)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range found {
		t.Error(f)
	}
}

// outerContexts walks a function with the contexts its enclosing functions declare (visible) and those it must not
// use, being inside a transaction's closure (foreign; nil outside any), and reports each use of a foreign one.
func outerContexts(fset *token.FileSet, typ *ast.FuncType, body *ast.BlockStmt, visible, foreign map[string]bool) []string {
	mine := contextsOf(typ, body)
	if isTxBody(typ) {
		foreign = merge(foreign, visible)
	}
	foreign = without(foreign, mine)
	visible = merge(visible, mine)
	var found []string
	var inspect func(n ast.Node) bool
	inspect = func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.FuncLit:
			found = append(found, outerContexts(fset, n.Type, n.Body, visible, foreign)...)
			return false
		case *ast.SelectorExpr:
			ast.Inspect(n.X, inspect) // n.Sel names a field or method, not a variable
			return false
		case *ast.Ident:
			if foreign[n.Name] {
				found = append(found, fset.Position(n.Pos()).String()+
					": a transaction's closure uses the context "+n.Name+" of a function around it; use its own")
			}
		}
		return true
	}
	ast.Inspect(body, inspect)
	return found
}

// contextsOf names the contexts a function declares: its context.Context parameters and the variables it assigns
// from context.With… calls.
func contextsOf(typ *ast.FuncType, body *ast.BlockStmt) map[string]bool {
	names := map[string]bool{}
	for _, p := range typ.Params.List {
		if isSelector(p.Type, "context", "Context") {
			for _, n := range p.Names {
				names[n.Name] = true
			}
		}
	}
	ast.Inspect(body, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.FuncLit:
			return false
		case *ast.AssignStmt:
			if len(n.Rhs) == 1 && len(n.Lhs) > 0 {
				if call, ok := n.Rhs[0].(*ast.CallExpr); ok {
					if sel, ok := call.Fun.(*ast.SelectorExpr); ok && isIdent(sel.X, "context") && strings.HasPrefix(sel.Sel.Name, "With") {
						if id, ok := n.Lhs[0].(*ast.Ident); ok {
							names[id.Name] = true
						}
					}
				}
			}
		}
		return true
	})
	delete(names, "_")
	return names
}

// isTxBody reports whether a function is the body of a transaction: it takes a context.Context and a bun.Tx or
// bun.IDB.
func isTxBody(typ *ast.FuncType) bool {
	var ctx, tx bool
	for _, p := range typ.Params.List {
		ctx = ctx || isSelector(p.Type, "context", "Context")
		tx = tx || isSelector(p.Type, "bun", "Tx") || isSelector(p.Type, "bun", "IDB")
	}
	return ctx && tx
}

func merge(a, b map[string]bool) map[string]bool {
	out := map[string]bool{}
	for k := range a {
		out[k] = true
	}
	for k := range b {
		out[k] = true
	}
	return out
}

func without(a, b map[string]bool) map[string]bool {
	out := map[string]bool{}
	for k := range a {
		if !b[k] {
			out[k] = true
		}
	}
	return out
}

func isSelector(e ast.Expr, pkg, name string) bool {
	sel, ok := e.(*ast.SelectorExpr)
	return ok && isIdent(sel.X, pkg) && sel.Sel.Name == name
}

func isIdent(e ast.Expr, name string) bool {
	id, ok := e.(*ast.Ident)
	return ok && id.Name == name
}
