package workflow

import (
	"errors"
	"fmt"
	"reflect"
	"strings"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/ext"
)

// Signals and policy conditions are CEL expressions (cel-go) over one typed
// activation. They are compiled and type-checked when the registry loads, so
// a misspelt variable or field fails the load, never the run; every signal
// must have type bool.

// Finding is one persona finding as a CEL value (finding_v1 or
// finding_v2). Body is the Markdown explanation; Suggestion, when
// HasSuggestion is set, is the replacement text for exactly the lines
// Line..EndLine of Path (finding_v2 only; "" with HasSuggestion deletes
// them).
type Finding struct {
	ID           string `cel:"id" json:"id"`
	Reviewer     string `cel:"reviewer" json:"reviewer"`
	Severity     string `cel:"severity" json:"severity"`           // P0..P3
	AutofixClass string `cel:"autofix_class" json:"autofix_class"` // safe_auto | gated_auto | manual | advisory
	Confidence   int    `cel:"confidence" json:"confidence"`       // 0, 25, 50, 75, 100
	Title        string `cel:"title" json:"title"`
	Path         string `cel:"path" json:"path,omitempty"`
	Line         int    `cel:"line" json:"line,omitempty"`
	EndLine      int    `cel:"end_line" json:"end_line,omitempty"`
	Rule         string `cel:"rule" json:"rule,omitempty"`
	Body         string `cel:"body" json:"body,omitempty"`
	Suggestion   string `cel:"suggestion" json:"suggestion,omitempty"`
	// HasSuggestion is set by fan-in from the reply, never read from it.
	HasSuggestion bool `cel:"has_suggestion" json:"has_suggestion,omitempty"`
}

// ReviewAggregate is the fan-in result (review_aggregate_v1) as a CEL value.
type ReviewAggregate struct {
	Findings     []Finding `cel:"findings"`
	Suppressed   []Finding `cel:"suppressed"`
	PreExisting  []Finding `cel:"pre_existing"`
	Verdict      string    `cel:"verdict"` // "" until fan-in, then pass | fail
	Coverage     float64   `cel:"coverage"`
	P0Unresolved int       `cel:"p0_unresolved"`
}

// Loop holds a cycle's loop counters; expressions name it `cycle` (`loop`
// is a reserved word in CEL).
type Loop struct {
	Cycle            string `cel:"id"`                // the cycle id
	Generation       int    `cel:"generation"`        // 1-based pass through the cycle
	MaxGenerations   int    `cel:"max_generations"`   // from loop_bounds; 0 when unbounded
	Oscillations     int    `cel:"oscillations"`      // times a phase was re-entered with the same output
	GradeRegressions int    `cel:"grade_regressions"` // passes whose aggregate got worse
}

// Request is what a policy rule is asked about: a persona wanting a tool or
// a path (role-permissions), or the finding being routed.
type Request struct {
	Persona string `cel:"persona"`
	Tool    string `cel:"tool"`
	Action  string `cel:"action"` // read | write | dispatch
	Path    string `cel:"path"`
}

// Activation is the typed input of every expression. Fields not set are
// their zero values.
type Activation struct {
	// Outputs holds each finished phase's output document by phase id.
	Outputs         map[string]map[string]any
	ReviewAggregate ReviewAggregate
	Loop            Loop
	Mode            string // interactive | autofix | report-only | headless
	Phase           string // the current phase id
	Finding         Finding
	Request         Request
}

func (a Activation) vars() map[string]any {
	out := a.Outputs
	if out == nil {
		out = map[string]map[string]any{}
	}
	return map[string]any{
		"outputs":          out,
		"review_aggregate": a.ReviewAggregate,
		"cycle":            a.Loop,
		"mode":             a.Mode,
		"phase":            a.Phase,
		"finding":          a.Finding,
		"request":          a.Request,
	}
}

func newEnv() (*cel.Env, error) {
	return cel.NewEnv(
		ext.NativeTypes(ext.ParseStructTag("cel"),
			reflect.TypeFor[Finding](), reflect.TypeFor[ReviewAggregate](),
			reflect.TypeFor[Loop](), reflect.TypeFor[Request]()),
		ext.Strings(),
		cel.Variable("outputs", cel.MapType(cel.StringType, cel.MapType(cel.StringType, cel.DynType))),
		cel.Variable("review_aggregate", cel.ObjectType("workflow.ReviewAggregate")),
		cel.Variable("cycle", cel.ObjectType("workflow.Loop")),
		cel.Variable("mode", cel.StringType),
		cel.Variable("phase", cel.StringType),
		cel.Variable("finding", cel.ObjectType("workflow.Finding")),
		cel.Variable("request", cel.ObjectType("workflow.Request")),
	)
}

// Expr is a compiled, type-checked boolean expression.
type Expr struct {
	Source string
	prg    cel.Program
}

// costLimit bounds one evaluation (CEL's runtime cost units): expressions
// come from repository files, so a comprehension over a huge list must not
// stall the run.
const costLimit = 100000

// compileBool compiles src and requires a bool result.
func compileBool(env *cel.Env, src string) (*Expr, error) {
	if strings.TrimSpace(src) == "" {
		return nil, errors.New("empty expression")
	}
	ast, iss := env.Compile(src)
	if iss != nil && iss.Err() != nil {
		return nil, fmt.Errorf("does not compile: %s", oneLine(iss.Err().Error()))
	}
	if !ast.OutputType().IsExactType(cel.BoolType) {
		return nil, fmt.Errorf("has type %s, want bool", ast.OutputType())
	}
	prg, err := env.Program(ast, cel.CostLimit(costLimit))
	if err != nil {
		return nil, fmt.Errorf("does not compile: %v", err)
	}
	return &Expr{Source: src, prg: prg}, nil
}

func oneLine(s string) string {
	return strings.Join(strings.Fields(strings.ReplaceAll(s, "\n", " ")), " ")
}

// Eval evaluates the expression. An evaluation error (a missing map key, a
// cost overrun) is returned, never read as true or false: callers fail
// closed on it.
func (e *Expr) Eval(a Activation) (bool, error) {
	if e == nil {
		return false, errors.New("workflow: no expression")
	}
	v, _, err := e.prg.Eval(a.vars())
	if err != nil {
		return false, fmt.Errorf("workflow: evaluating %q: %w", e.Source, err)
	}
	b, ok := v.Value().(bool)
	if !ok {
		return false, fmt.Errorf("workflow: %q evaluated to %v, want bool", e.Source, v)
	}
	return b, nil
}
