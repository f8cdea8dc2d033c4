// Package argocd runs Argo CD resource health checks (Lua, as Argo CD's
// resource.customizations.health takes them) over Kubernetes objects, so Poolsmith's
// check in config/argocd is tested against real WorkloadClass status.
package argocd

import (
	"fmt"
	"os"

	lua "github.com/yuin/gopher-lua"
)

// Health is what a health check returns.
type Health struct {
	Status  string
	Message string
}

// Evaluate runs script with obj (an object as JSON-decoded maps) bound to the global
// `obj`, as Argo CD does, and returns the table it returns.
func Evaluate(script string, obj map[string]any) (Health, error) {
	src, err := os.ReadFile(script)
	if err != nil {
		return Health{}, err
	}
	L := lua.NewState(lua.Options{SkipOpenLibs: false})
	defer L.Close()
	L.SetGlobal("obj", toLua(L, obj))
	if err := L.DoString(string(src)); err != nil {
		return Health{}, fmt.Errorf("running %s: %w", script, err)
	}
	ret, ok := L.Get(-1).(*lua.LTable)
	if !ok {
		return Health{}, fmt.Errorf("%s returned %s, not a table", script, L.Get(-1).Type())
	}
	return Health{Status: lua.LVAsString(ret.RawGetString("status")), Message: lua.LVAsString(ret.RawGetString("message"))}, nil
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
