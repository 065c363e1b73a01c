package instructions

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"text/template"
	"text/template/parse"
	"time"

	"github.com/buddy-run/buddy/internal/errs"
)

// Template limits.
const (
	MaxTemplateOutput = 64 << 10
	TemplateTimeout   = 2 * time.Second
	maxRangeDepth     = 2
)

// templateSlots bounds the templates being rendered at once, including any
// left running past their deadline (text/template cannot be stopped).
var templateSlots = make(chan struct{}, 4)

// parseTemplate parses a template skill's text. text/template's built-in
// functions touch nothing on the host; this adds none. It refuses what could
// run long without writing: {{template}}/{{define}}/{{block}}, and ranges
// over anything but the caller's data (so never over an integer, which
// Go 1.22's range would count to) nested deeper than two.
func parseTemplate(name, text string) (*template.Template, error) {
	t, err := template.New(name).Option("missingkey=zero").Parse(text)
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
		if err := checkNode(n.List, depth); err != nil {
			return err
		}
		return checkNode(n.ElseList, depth)
	case *parse.WithNode:
		if err := checkNode(n.List, depth); err != nil {
			return err
		}
		return checkNode(n.ElseList, depth)
	}
	return nil
}

// capWriter fails a write past max bytes or after the deadline.
type capWriter struct {
	buf      bytes.Buffer
	max      int
	deadline time.Time
}

var errOutputCap = errors.New("output cap")

func (w *capWriter) Write(p []byte) (int, error) {
	if w.buf.Len()+len(p) > w.max {
		return 0, errOutputCap
	}
	if time.Now().After(w.deadline) {
		return 0, context.DeadlineExceeded
	}
	return w.buf.Write(p)
}

// RenderTemplate renders a template skill with the caller's parameters,
// capped at MaxTemplateOutput bytes and TemplateTimeout.
func RenderTemplate(ctx context.Context, s *Skill, params map[string]any) (string, error) {
	t, err := parseTemplate(s.Name, s.Template)
	if err != nil {
		return "", errs.Wrap(errs.ErrInvalidInput, "template skill "+s.Name, err)
	}
	ctx, cancel := context.WithTimeout(ctx, TemplateTimeout)
	defer cancel()
	select {
	case templateSlots <- struct{}{}:
	case <-ctx.Done():
		return "", errs.Wrap(errs.ErrTimeout, "template skill "+s.Name+": waiting for a free slot", ctx.Err())
	}
	deadline, _ := ctx.Deadline()
	w := &capWriter{max: MaxTemplateOutput, deadline: deadline}
	done := make(chan error, 1)
	go func() {
		defer func() { <-templateSlots }()
		done <- t.Execute(w, params)
	}()
	select {
	case err := <-done:
		switch {
		case errors.Is(err, errOutputCap):
			return "", errs.New(errs.ErrTooLarge, fmt.Sprintf("template skill %s: output over %d bytes", s.Name, MaxTemplateOutput))
		case errors.Is(err, context.DeadlineExceeded):
			return "", errs.New(errs.ErrTimeout, fmt.Sprintf("template skill %s: rendering took over %s", s.Name, TemplateTimeout))
		case err != nil:
			return "", errs.Wrap(errs.ErrInvalidInput, "template skill "+s.Name, err)
		}
		return w.buf.String(), nil
	case <-ctx.Done():
		if errors.Is(ctx.Err(), context.Canceled) {
			return "", errs.Wrap(errs.ErrCanceled, "template skill "+s.Name, ctx.Err())
		}
		return "", errs.New(errs.ErrTimeout, fmt.Sprintf("template skill %s: rendering took over %s", s.Name, TemplateTimeout))
	}
}
