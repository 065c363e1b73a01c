//go:build !tinygo.wasm && !wasm

package skillkit

import "sync"

// TestHost stands in for buddy when skill logic is unit tested with plain
// `go test`: Call gets the host function's name ("fs_read", ...) and its
// arguments and returns a result block (status byte + payload; see Result).
type TestHost struct {
	Input  []byte
	Output []byte
	Error  string
	Logs   []string
	Call   func(fn string, args ...[]byte) []byte
}

// Result builds a result block: OK(payload) for success, or an error kind
// and message.
func Result(kind Kind, payload []byte) []byte {
	code := byte(0)
	for i, k := range statusKinds {
		if k == kind && k != "" {
			code = byte(i)
		}
	}
	return append([]byte{code}, payload...)
}

var (
	testMu   sync.Mutex
	testHost *TestHost
)

// SetTestHost installs h for the calls that follow (nil removes it). Outside
// wasm, host calls without a test host fail with ErrUnavailable.
func SetTestHost(h *TestHost) {
	testMu.Lock()
	testHost = h
	testMu.Unlock()
}

func current() *TestHost {
	testMu.Lock()
	defer testMu.Unlock()
	return testHost
}

func hostInput() []byte {
	if h := current(); h != nil {
		// A copy, as the wasm host's is: decoded strings point into it.
		return append([]byte(nil), h.Input...)
	}
	return nil
}

func hostOutput(b []byte) {
	if h := current(); h != nil {
		h.Output = append([]byte(nil), b...)
	}
}

func hostSetError(msg string) {
	if h := current(); h != nil {
		h.Error = msg
	}
}

func hostLog(level int32, msg string) {
	if h := current(); h != nil {
		h.Logs = append(h.Logs, msg)
	}
}

func call(fn string, args ...[]byte) []byte {
	if h := current(); h != nil && h.Call != nil {
		return h.Call(fn, args...)
	}
	return Result(KindUnavailable, []byte(fn+": not running inside buddy"))
}

func hostFSRead(path []byte) []byte           { return call("fs_read", path) }
func hostFSWrite(path, data []byte) []byte    { return call("fs_write", path, data) }
func hostHTTPGet(url []byte) []byte           { return call("http_get", url) }
func hostHTTPRequest(req, body []byte) []byte { return call("http_request", req, body) }
func hostEnvGet(name []byte) []byte           { return call("env_get", name) }
func hostKVGet(key []byte) []byte             { return call("kv_get", key) }
func hostKVSet(key, value []byte) []byte      { return call("kv_set", key, value) }
func hostKVDelete(key []byte) []byte          { return call("kv_delete", key) }
func hostRemember(req []byte) []byte          { return call("memory_remember", req) }
func hostRecall(req []byte) []byte            { return call("memory_recall", req) }
func hostSchedule(req []byte) []byte          { return call("schedule", req) }
