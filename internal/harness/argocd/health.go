// Package argocd runs Argo CD resource health checks (Lua, as Argo CD's
// resource.customizations.health takes them) over Kubernetes objects, so Poolsmith's
// check in config/argocd is tested against real WorkloadClass status.
package argocd

import (
	"context"
	"fmt"
	"os"
	"time"

	lua "github.com/yuin/gopher-lua"
)

// Health is what a health check returns.
type Health struct {
	Status  string
	Message string
	// DeletionMessage is what Argo CD shows for an object being deleted; without it
	// Argo CD reports its own "Pending deletion" text instead of the script's.
	DeletionMessage string
}

// Evaluate runs script with obj (an object as JSON-decoded maps) bound to the global
// `obj`, as Argo CD does, and returns the table it returns. Like Argo CD (util/lua, with
// resource.customizations.useOpenLibs off, its default) it opens only the package, base
// and table libraries and stops the script after a second, so a script that calls
// string, math or io fails here as it would there. (Argo CD also loads a reduced os
// library, which this leaves out: a health check has no business with it.)
func Evaluate(script string, obj map[string]any) (Health, error) {
	src, err := os.ReadFile(script)
	if err != nil {
		return Health{}, err
	}
	L := lua.NewState(lua.Options{SkipOpenLibs: true})
	defer L.Close()
	for _, lib := range []struct {
		name string
		open lua.LGFunction
	}{{lua.LoadLibName, lua.OpenPackage}, {lua.BaseLibName, lua.OpenBase}, {lua.TabLibName, lua.OpenTable}} {
		if err := L.CallByParam(lua.P{Fn: L.NewFunction(lib.open), NRet: 0, Protect: true}, lua.LString(lib.name)); err != nil {
			return Health{}, fmt.Errorf("opening Lua library %q: %w", lib.name, err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	L.SetContext(ctx)
	L.SetGlobal("obj", toLua(L, obj))
	if err := L.DoString(string(src)); err != nil {
		return Health{}, fmt.Errorf("running %s: %w", script, err)
	}
	ret, ok := L.Get(-1).(*lua.LTable)
	if !ok {
		return Health{}, fmt.Errorf("%s returned %s, not a table", script, L.Get(-1).Type())
	}
	return Health{
		Status:          lua.LVAsString(ret.RawGetString("status")),
		Message:         lua.LVAsString(ret.RawGetString("message")),
		DeletionMessage: lua.LVAsString(ret.RawGetString("deletionMessage")),
	}, nil
}

// toLua converts JSON-decoded values: objects to tables, arrays to 1-based tables.
func toLua(L *lua.LState, v any) lua.LValue {
	switch t := v.(type) {
	case map[string]any:
		tbl := L.NewTable()
		for k, val := range t {
			tbl.RawSetString(k, toLua(L, val))
		}
		return tbl
	case []any:
		tbl := L.NewTable()
		for _, val := range t {
			tbl.Append(toLua(L, val))
		}
		return tbl
	case string:
		return lua.LString(t)
	case bool:
		return lua.LBool(t)
	case float64:
		return lua.LNumber(t)
	case int64:
		return lua.LNumber(t)
	case nil:
		return lua.LNil
	default:
		return lua.LString(fmt.Sprint(t))
	}
}
