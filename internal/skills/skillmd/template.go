package skillmd

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"text/template"
	"text/template/parse"
	"time"

	"github.com/buddy-run/buddy/internal/base/errs"
)

// Template limits.
const (
	// MaxTemplateOutput caps what a render writes.
	MaxTemplateOutput = 64 << 10
	// TemplateTimeout is a render's deadline, waiting for a slot included.
	TemplateTimeout = 2 * time.Second
	// MaxTemplateParams caps a call's parameters, measured as JSON.
	MaxTemplateParams = 256 << 10
	// MaxTemplateWork caps the bytes a render's functions may make, escape,
	// compare or sort (printf, print, html, eq, a range over a map, …),
	// charged before each call from what its arguments can produce.
	MaxTemplateWork = 16 << 20

	maxRangeDepth = 2
	maxParamDepth = 64
)

// templateTimeout and templateWork are TemplateTimeout and MaxTemplateWork;
// tests shorten them.
var (
	templateTimeout = TemplateTimeout
	templateWork    = MaxTemplateWork
)

// templateSlots bounds the templates being rendered at once. A render holds
// its slot until it has stopped: RenderTemplate returns only then.
var templateSlots = make(chan struct{}, 4)

// parseTemplate parses a template skill's text with m's functions (a render
// passes its own meter; nil for a template only checked). It refuses
// {{template}}/{{define}}/{{block}}, ranges over anything but the caller's
// data (so never over an integer, which Go 1.22's range would count to) or
// nested deeper than two, and the names of buddy's own functions; then it
// meters every range (template_meter.go).
func parseTemplate(name, text string, m *meter) (*template.Template, error) {
	if m == nil {
		m = &meter{}
	}
	t, err := template.New(name).Option("missingkey=zero").Funcs(m.funcs()).Parse(text)
	if err != nil {
		return nil, err
	}
	if len(t.Templates()) > 1 {
		return nil, fmt.Errorf("template: {{define}} and {{block}} are not allowed")
	}
	if t.Tree == nil {
		return t, nil
	}
	if err := checkNode(t.Tree.Root, 0); err != nil {
		return nil, fmt.Errorf("template: %w", err)
	}
	meterRanges(t.Tree.Root)
	return t, nil
}

func checkNode(n parse.Node, depth int) error {
	switch n := n.(type) {
	case *parse.ListNode:
		if n == nil {
			return nil
		}
		for _, c := range n.Nodes {
			if err := checkNode(c, depth); err != nil {
				return err
			}
		}
	case *parse.ActionNode:
		return checkPipe(n.Pipe)
	case *parse.TemplateNode:
		return errors.New("{{template}} is not allowed")
	case *parse.RangeNode:
		if depth+1 > maxRangeDepth {
			return fmt.Errorf("ranges nest at most %d deep", maxRangeDepth)
		}
		if len(n.Pipe.Cmds) != 1 || len(n.Pipe.Cmds[0].Args) != 1 {
			return fmt.Errorf("range over a pipeline is not allowed: range over a parameter (.items)")
		}
		switch a := n.Pipe.Cmds[0].Args[0].(type) {
		case *parse.FieldNode, *parse.DotNode:
		case *parse.VariableNode:
			if len(a.Ident) < 2 {
				return fmt.Errorf("range over %s is not allowed: range over a parameter (.items or $.items)", a)
			}
		default:
			return fmt.Errorf("range over %s is not allowed: range over a parameter (.items)", a)
		}
		if err := checkNode(n.List, depth+1); err != nil {
			return err
		}
		return checkNode(n.ElseList, depth)
	case *parse.IfNode:
		return checkBranch(&n.BranchNode, depth)
	case *parse.WithNode:
		return checkBranch(&n.BranchNode, depth)
	}
	return nil
}

func checkBranch(n *parse.BranchNode, depth int) error {
	if err := checkPipe(n.Pipe); err != nil {
		return err
	}
	if err := checkNode(n.List, depth); err != nil {
		return err
	}
	return checkNode(n.ElseList, depth)
}

// checkPipe refuses a call of buddy's own functions: a template may use only
// text/template's.
func checkPipe(p *parse.PipeNode) error {
	if p == nil {
		return nil
	}
	for _, c := range p.Cmds {
		for _, a := range c.Args {
			if err := checkArg(a); err != nil {
				return err
			}
		}
	}
	return nil
}

func checkArg(a parse.Node) error {
	switch a := a.(type) {
	case *parse.IdentifierNode:
		if internalFuncs[a.Ident] {
			return fmt.Errorf("function %q not defined", a.Ident)
		}
	case *parse.PipeNode:
		return checkPipe(a)
	case *parse.ChainNode:
		return checkArg(a.Node)
	}
	return nil
}

// meterRanges makes every range stop a render that must stop: it precedes
// the range with {{if _buddy_sort ARG}}{{end}}, ARG the range's own argument
// (a parameter, so evaluating it twice costs a lookup), to charge the sort of
// a map before text/template sorts it, and heads its body with
// {{if _buddy_tick}}{{end}} to check the deadline on every iteration, whether
// or not the body writes. A range is the only loop a template has (checkNode
// refuses {{template}}, so nothing recurses).
func meterRanges(n parse.Node) {
	switch n := n.(type) {
	case *parse.ListNode:
		if n == nil {
			return
		}
		nodes := make([]parse.Node, 0, len(n.Nodes))
		for _, c := range n.Nodes {
			meterRanges(c)
			if r, ok := c.(*parse.RangeNode); ok {
				nodes = append(nodes, ifCall(r.Pos, r.Line, sortFunc, r.Pipe.Cmds[0].Args[0].Copy()))
			}
			nodes = append(nodes, c)
		}
		n.Nodes = nodes
	case *parse.IfNode:
		meterRanges(n.List)
		meterRanges(n.ElseList)
	case *parse.WithNode:
		meterRanges(n.List)
		meterRanges(n.ElseList)
	case *parse.RangeNode:
		meterRanges(n.List)
		meterRanges(n.ElseList)
		if n.List == nil {
			n.List = &parse.ListNode{NodeType: parse.NodeList, Pos: n.Pos}
		}
		n.List.Nodes = append([]parse.Node{ifCall(n.Pos, n.Line, tickFunc)}, n.List.Nodes...)
	}
}

// ifCall is {{if fn args…}}{{end}}: it calls fn and writes nothing.
func ifCall(pos parse.Pos, line int, fn string, args ...parse.Node) *parse.IfNode {
	cmd := &parse.CommandNode{NodeType: parse.NodeCommand, Pos: pos,
		Args: append([]parse.Node{parse.NewIdentifier(fn).SetPos(pos)}, args...)}
	return &parse.IfNode{BranchNode: parse.BranchNode{
		NodeType: parse.NodeIf, Pos: pos, Line: line,
		Pipe: &parse.PipeNode{NodeType: parse.NodePipe, Pos: pos, Line: line, Cmds: []*parse.CommandNode{cmd}},
		List: &parse.ListNode{NodeType: parse.NodeList, Pos: pos},
	}}
}

// capWriter fails a write past max bytes, or once the render must stop.
type capWriter struct {
	buf bytes.Buffer
	max int
	m   *meter
}

var errOutputCap = errors.New("output cap")

func (w *capWriter) Write(p []byte) (int, error) {
	if w.buf.Len()+len(p) > w.max {
		return 0, errOutputCap
	}
	if err := w.m.charge(0); err != nil {
		return 0, err
	}
	return w.buf.Write(p)
}

// RenderTemplate renders a template skill with the caller's parameters (JSON
// values, as encoding/json decodes them), capped at MaxTemplateParams in,
// MaxTemplateOutput out, MaxTemplateWork done by its functions and
// TemplateTimeout. A render that must stop (its deadline passed, ctx
// canceled, a cap reached) stops at its next range iteration, function call
// or write, and returns then, its slot free.
func RenderTemplate(ctx context.Context, s *Skill, params map[string]any) (string, error) {
	if err := checkParams(params); err != nil {
		return "", fmt.Errorf("template skill %s: %w", s.Name, err)
	}
	m := &meter{left: templateWork}
	t, err := parseTemplate(s.Name, s.Template, m)
	if err != nil {
		return "", errs.Wrap(errs.ErrInvalidInput, "template skill "+s.Name, err)
	}
	ctx, cancel := context.WithTimeout(ctx, templateTimeout)
	defer cancel()
	m.ctx = ctx
	select {
	case templateSlots <- struct{}{}:
	case <-ctx.Done():
		if errors.Is(ctx.Err(), context.Canceled) {
			return "", errs.Wrap(errs.ErrCanceled, "template skill "+s.Name+": waiting for a free slot", ctx.Err())
		}
		return "", errs.Wrap(errs.ErrTimeout, "template skill "+s.Name+": waiting for a free slot", ctx.Err())
	}
	defer func() { <-templateSlots }()
	w := &capWriter{max: MaxTemplateOutput, m: m}
	err = t.Execute(w, params)
	switch {
	case err == nil:
		return w.buf.String(), nil
	case errors.Is(err, errOutputCap):
		return "", errs.New(errs.ErrTooLarge, fmt.Sprintf("template skill %s: output over %d bytes", s.Name, MaxTemplateOutput))
	case errors.Is(err, errWork):
		return "", errs.New(errs.ErrTooLarge, fmt.Sprintf("template skill %s: its functions would make, escape, compare or sort over %d bytes", s.Name, templateWork))
	case errors.Is(err, context.DeadlineExceeded):
		return "", errs.New(errs.ErrTimeout, fmt.Sprintf("template skill %s: rendering took over %s", s.Name, templateTimeout))
	case errors.Is(err, context.Canceled):
		return "", errs.Wrap(errs.ErrCanceled, "template skill "+s.Name, err)
	}
	return "", errs.Wrap(errs.ErrInvalidInput, "template skill "+s.Name, err)
}
