package mcpserver

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"regexp"
	"slices"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Stdio is the transport of `buddy mcp`: newline-delimited JSON-RPC read
// from r and written to w, as the SDK's mcp.IOTransport, except for the
// lines the SDK would end the session on. A line over MaxMessageBytes, a
// line that is not JSON, and a JSON value that is not a JSON-RPC message are
// answered with a JSON-RPC error (-32600 Invalid Request, -32700 Parse
// error; id null unless the line's own id can be read) and dropped; the
// session reads on. A blank line is skipped.
//
// The lines are split here, with a bounded buffer, before the SDK decodes
// them: its decoder stops for good at the first frame it cannot read.
// Answers written here go through the SDK's writer, one whole line at a
// time under one lock, so they never interleave with its own.
func (s *Server) Stdio(r io.Reader, w io.Writer) mcp.Transport {
	out := &lockedWriter{w: w}
	return &mcp.IOTransport{
		Reader: io.NopCloser(&lineReader{
			in:      bufio.NewReaderSize(r, 64<<10),
			max:     int(s.opts.MaxMessageBytes),
			out:     out,
			log:     s.log,
			batches: true,
		}),
		Writer: out,
		// Every line handed on is within the cap already.
		MaxLineLength: -1,
	}
}

// lockedWriter writes whole lines, one writer at a time.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func (*lockedWriter) Close() error { return nil }

// lineReader hands the SDK one valid JSON-RPC line at a time (with its
// "\n") and answers the others itself.
type lineReader struct {
	in   *bufio.Reader
	max  int // bytes of one line, its "\r\n" left out
	out  *lockedWriter
	log  *slog.Logger
	line []byte // the line being read, reused
	next []byte // what is left to hand on of the current line
	err  error  // the input's end or failure, once next is handed on
	// batches is whether a JSON-RPC batch is taken: before initialize, or
	// on a protocol before 2025-06-18 (read from the initialize request).
	// The SDK ends a later session on a batch.
	batches bool
}

func (r *lineReader) Read(p []byte) (int, error) {
	for len(r.next) == 0 {
		if r.err != nil {
			return 0, r.err
		}
		line, size, over, err := r.readLine()
		r.err = err
		switch {
		case over:
			r.refuse(jsonrpc.CodeInvalidRequest, idOfLong(line),
				fmt.Sprintf("the message is %d bytes, over the limit of %d ([server] max_message_bytes): it was not read", size, r.max),
				"an MCP message over the limit was dropped", "bytes", size)
		case len(bytes.TrimSpace(line)) == 0:
		case r.check(line):
			r.next = append(line, '\n')
		}
	}
	n := copy(p, r.next)
	r.next = r.next[n:]
	return n, nil
}

// readLine reads up to the next "\n" or the input's end: the line without
// its "\r\n", and its size. A line over max is read to its end but not
// kept: line then holds its first and last idWindow bytes (where its id
// may be), joined by idGap. At the input's end err is io.EOF, with the last
// line if it had no "\n".
func (r *lineReader) readLine() (line []byte, size int, over bool, err error) {
	r.line = r.line[:0]
	var head, tail []byte
	for {
		chunk, rerr := r.in.ReadSlice('\n')
		size += len(chunk)
		switch {
		case over:
			tail = keepTail(tail, chunk)
		case len(r.line)+len(chunk) > r.max+2: // over, whatever ends it
			over = true
			r.line = append(r.line, chunk...)
			head = slices.Clone(r.line[:min(len(r.line), idWindow)])
			tail = slices.Clone(r.line[max(0, len(r.line)-idWindow):])
		default:
			r.line = append(r.line, chunk...)
		}
		if errors.Is(rerr, bufio.ErrBufferFull) {
			continue
		}
		if rerr != nil && size == 0 {
			return nil, 0, false, rerr
		}
		if errors.Is(rerr, io.EOF) {
			rerr = nil // the last line is read; the next read ends
		}
		if !over {
			line = trimEOL(r.line)
			if len(line) <= r.max {
				return line, len(line), false, rerr
			}
			// Over by its last byte or two: kept whole, then cut as below.
			head = slices.Clone(line[:min(len(line), idWindow)])
			return append(append(head, idGap...), line[max(0, len(line)-idWindow):]...), len(line), true, rerr
		}
		end := trimEOL(tail)
		size -= len(tail) - len(end)
		return append(append(head, idGap...), end...), size, true, rerr
	}
}

func trimEOL(b []byte) []byte {
	b = bytes.TrimSuffix(b, []byte("\n"))
	return bytes.TrimSuffix(b, []byte("\r"))
}

// idWindow is how much of the start and of the end of a line over the limit
// is kept to look for its id in.
const idWindow = 4 << 10

// idGap joins the start and the end of a long line: no JSON reads across it.
var idGap = []byte("\x00")

// keepTail appends chunk to tail, keeping at least the last idWindow bytes.
func keepTail(tail, chunk []byte) []byte {
	tail = append(tail, chunk...)
	if len(tail) > 2*idWindow {
		tail = append(tail[:0], tail[len(tail)-idWindow:]...)
	}
	return tail
}

// check reports whether line is a JSON-RPC message the SDK takes; it
// answers those it does not.
func (r *lineReader) check(line []byte) bool {
	if !json.Valid(line) {
		r.refuse(jsonrpc.CodeParseError, nil, "the message is not valid JSON (one JSON-RPC message per line)",
			"an MCP message that is not JSON", "bytes", len(line))
		return false
	}
	if line = bytes.TrimSpace(line); line[0] != '[' {
		msg, err := jsonrpc.DecodeMessage(line)
		if err != nil {
			r.refuse(jsonrpc.CodeInvalidRequest, idOf(line), "the message is not a JSON-RPC 2.0 request, notification or response: "+err.Error(),
				"an MCP message that is not JSON-RPC", "err", err)
			return false
		}
		if req, ok := msg.(*jsonrpc.Request); ok && req.Method == "initialize" {
			// The server answers with the version asked for when it
			// serves it, else with a later one.
			var params struct {
				ProtocolVersion string `json:"protocolVersion"`
			}
			_ = json.Unmarshal(req.Params, &params)
			r.batches = slices.Contains(protocolVersions, params.ProtocolVersion) && params.ProtocolVersion < "2025-06-18"
		}
		return true
	}
	var batch []json.RawMessage
	_ = json.Unmarshal(line, &batch) // valid JSON, an array
	why := ""
	switch {
	case len(batch) == 0:
		why = "an empty batch"
	case !r.batches:
		why = "a batch: JSON-RPC batches are not part of MCP from protocol 2025-06-18"
	}
	ids := map[jsonrpc.ID]bool{}
	for _, raw := range batch {
		if why != "" {
			break
		}
		msg, err := jsonrpc.DecodeMessage(raw)
		if err != nil {
			why = "a batch with a member that is not a JSON-RPC message: " + err.Error()
			break
		}
		if req, ok := msg.(*jsonrpc.Request); ok && req.IsCall() {
			if ids[req.ID] {
				why = fmt.Sprintf("a batch with the id %v twice", req.ID.Raw())
			}
			ids[req.ID] = true
		}
	}
	if why != "" {
		r.refuse(jsonrpc.CodeInvalidRequest, nil, "the message is "+why, "an MCP batch refused", "why", why)
		return false
	}
	return true
}

// refuse answers a message it drops with a JSON-RPC error (id null when
// id is nil), and logs it.
func (r *lineReader) refuse(code int64, id json.RawMessage, msg, logMsg string, attrs ...any) {
	if id == nil {
		id = json.RawMessage("null")
	}
	b, err := json.Marshal(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   jsonrpc.Error   `json:"error"`
	}{"2.0", id, jsonrpc.Error{Code: code, Message: msg}})
	if err != nil {
		return
	}
	r.log.Warn(logMsg, append(attrs, "id", string(id))...)
	_, _ = r.out.Write(append(b, '\n'))
}

// idOf is the id of a JSON object, if it has a valid one (a string or a
// number).
func idOf(line []byte) json.RawMessage {
	var m struct {
		ID json.RawMessage `json:"id"`
	}
	if json.Unmarshal(line, &m) != nil || !validID(m.ID) {
		return nil
	}
	return m.ID
}

func validID(raw json.RawMessage) bool {
	var v any
	if len(raw) == 0 || json.Unmarshal(raw, &v) != nil {
		return false
	}
	switch v.(type) {
	case string, float64:
		return true
	}
	return false
}

// idAtEnd is an id that is the last member of the line's object, as the
// TypeScript SDK writes requests ({"method":…,"params":…,"jsonrpc":"2.0","id":7}).
var idAtEnd = regexp.MustCompile(`[,{]\s*"id"\s*:\s*(-?[0-9][0-9.eE+-]*|"(?:[^"\\\x00-\x1f]|\\.)*")\s*}\s*$`)

// idOfLong reads the id of a line over the limit from what is left of it
// (its start, then its end): a top-level "id" before the first value too
// long to scan, or an id that ends the object.
func idOfLong(line []byte) json.RawMessage {
	start, end, _ := bytes.Cut(line, idGap)
	dec := json.NewDecoder(bytes.NewReader(start))
	if t, err := dec.Token(); err == nil && t == json.Delim('{') {
		for dec.More() {
			key, err := dec.Token()
			if err != nil {
				break
			}
			var v json.RawMessage
			if err := dec.Decode(&v); err != nil {
				break
			}
			if key == "id" {
				if validID(v) {
					return v
				}
				return nil
			}
		}
	}
	if m := idAtEnd.FindSubmatch(end); m != nil && validID(m[1]) {
		return m[1]
	}
	return nil
}
