package catalog

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// Target kinds.
const (
	TargetFile       = "file"       // a path read_file or write_file would touch
	TargetURL        = "url"        // a URL fetch_url would fetch
	TargetCapability = "capability" // what an installed skill's grant lets it touch
)

// Target is one thing a call would touch, resolved before it runs by the
// same code its host functions use (hostfns/fs, hostfns/http), with no side
// effect. The user approves exactly the targets shown; the gate resolves
// them again just before the call and asks again if they changed.
type Target struct {
	Kind string `json:"kind"`

	// File targets.
	Path   string `json:"path,omitempty"`   // canonical, inside Dir
	Dir    string `json:"dir,omitempty"`    // the allowed directory it is in
	Action string `json:"action,omitempty"` // "read", "create" or "overwrite"
	Exists bool   `json:"exists,omitempty"`
	Size   int64  `json:"size,omitempty"`  // of the existing file
	Bytes  int64  `json:"bytes,omitempty"` // a write's new content
	// Diff summarises an overwrite of a text file ("+3 -1 lines"), or "".
	Diff string `json:"diff,omitempty"`

	// URL targets.
	// Method is the HTTP method ("GET" for fetch_url); BodyBytes the size
	// of the request body, if any.
	Method    string          `json:"method,omitempty"`
	BodyBytes int64           `json:"body_bytes,omitempty"`
	URL       string          `json:"url,omitempty"` // canonical: what is fetched
	Scheme    string          `json:"scheme,omitempty"`
	Host      string          `json:"host,omitempty"`
	Port      int             `json:"port,omitempty"`
	Addresses []TargetAddress `json:"addresses,omitempty"` // what Host resolves to now, sorted
	// Unresolved says why Host did not resolve now.
	Unresolved string `json:"unresolved,omitempty"`

	// Capability targets: a grant in plain words ("read files in /home/u/docs").
	Capability string `json:"capability,omitempty"`

	// Refused, when not "", is why the call would be refused: the gate fails
	// it as forbidden without asking.
	Refused string `json:"refused,omitempty"`
}

// TargetAddress is one address a URL's host resolves to.
type TargetAddress struct {
	IP      string `json:"ip"`
	Allowed bool   `json:"allowed"`
	Reason  string `json:"reason,omitempty"` // why it is refused
}

// Resolver is implemented by a catalog that can say what a call would touch
// (the registry does). The gate uses it when its catalog has it.
type Resolver interface {
	// Resolve returns the targets of c without running anything. A skill
	// whose targets cannot be known returns none.
	Resolve(ctx context.Context, c Call) ([]Target, error)
}

// String renders t in one line for a person (escape it before showing it).
func (t Target) String() string {
	var b strings.Builder
	switch t.Kind {
	case TargetFile:
		fmt.Fprintf(&b, "%s %s", t.Action, t.Path)
		switch {
		case t.Action == "create":
			fmt.Fprintf(&b, " (new file, %d bytes)", t.Bytes)
		case t.Action == "overwrite":
			fmt.Fprintf(&b, " (%d bytes now, %d bytes after", t.Size, t.Bytes)
			if t.Diff != "" {
				b.WriteString("; " + t.Diff)
			}
			b.WriteString(")")
		case t.Exists:
			fmt.Fprintf(&b, " (%d bytes)", t.Size)
		default:
			b.WriteString(" (does not exist)")
		}
	case TargetURL:
		if t.Method == "" || t.Method == "GET" {
			fmt.Fprintf(&b, "fetch %s (%s, host %s, port %d", t.URL, t.Scheme, t.Host, t.Port)
		} else {
			fmt.Fprintf(&b, "%s %s (%d-byte body, %s, host %s, port %d", t.Method, t.URL, t.BodyBytes, t.Scheme, t.Host, t.Port)
		}
		if len(t.Addresses) > 0 {
			b.WriteString(", addresses")
			for _, a := range t.Addresses {
				if a.Allowed {
					fmt.Fprintf(&b, " %s allowed", a.IP)
				} else {
					fmt.Fprintf(&b, " %s refused", a.IP)
				}
			}
		}
		if t.Unresolved != "" {
			b.WriteString(", not resolved now: " + t.Unresolved)
		}
		b.WriteString(")")
	default:
		b.WriteString(t.Capability)
	}
	if t.Refused != "" {
		b.WriteString(" — REFUSED: " + t.Refused)
	}
	return b.String()
}

// SameTargets reports whether two resolutions of a call show the same
// things: the call may run on what was approved only if they do.
func SameTargets(a, b []Target) bool {
	return slices.EqualFunc(a, b, func(x, y Target) bool {
		jx, _ := json.Marshal(x)
		jy, _ := json.Marshal(y)
		return string(jx) == string(jy)
	})
}

// Refused returns the first target that is refused, if any.
func Refused(ts []Target) (Target, bool) {
	for _, t := range ts {
		if t.Refused != "" {
			return t, true
		}
	}
	return Target{}, false
}

// Usage is what one call's host functions actually touched.
type Usage struct {
	BytesRead    int64    `json:"bytes_read"`
	BytesWritten int64    `json:"bytes_written"`
	Paths        []string `json:"paths,omitempty"`     // canonical
	Hosts        []string `json:"hosts,omitempty"`     // normalised
	Addresses    []string `json:"addresses,omitempty"` // ip:port dialled or reused
	// Credentials are the names of the credentials buddy added to its
	// requests.
	Credentials []string `json:"credentials,omitempty"`
}

// UsageError is a failed call's error with what its host functions touched
// before it failed. It unwraps to the error.
type UsageError struct {
	Err   error
	Usage Usage
}

func (e *UsageError) Error() string { return e.Err.Error() }
func (e *UsageError) Unwrap() error { return e.Err }

// Empty reports whether u recorded nothing.
func (u Usage) Empty() bool {
	return u.BytesRead == 0 && u.BytesWritten == 0 && len(u.Paths) == 0 && len(u.Hosts) == 0 && len(u.Addresses) == 0 &&
		len(u.Credentials) == 0
}
