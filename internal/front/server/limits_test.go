package server_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/buddy-run/buddy/internal/front/server"
)

// TestSlowClientDisconnected: a client that stops reading fills its send
// queue and is disconnected; another client on the same conversation keeps
// working and is never blocked by it.
func TestSlowClientDisconnected(t *testing.T) {
	s := newStack(t, stackOpts{server: func(o *server.Options) { o.SendQueue = 8 }})
	// The slow client's socket buffers hold little, so its queue fills soon.
	d := websocket.Dialer{NetDialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if err == nil {
			_ = c.(*net.TCPConn).SetReadBuffer(4096)
		}
		return c, err
	}}
	slowWS, _, err := d.DialContext(t.Context(), s.wsURL(), authHeader())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { slowWS.Close() })
	// The slow client opens a conversation, reads its first frames, then
	// stops reading.
	if err := slowWS.WriteMessage(websocket.TextMessage, []byte(`{"type":"invoke","skill":"write_file","arguments":{"path":"a","content":"b"}}`)); err != nil {
		t.Fatal(err)
	}
	var conv string
	for {
		var f frame
		if err := slowWS.ReadJSON(&f); err != nil {
			t.Fatal(err)
		}
		if f.typ() == "approval_request" {
			conv = f.str("conversation_id")
			break
		}
	}

	fast := s.dial(t)
	fast.send(map[string]any{"type": "subscribe", "conversation_id": conv})
	fast.expect("approval_request") // the slow client's open question
	// Each call sends its 256 KiB arguments twice (tool_call and
	// approval_request) to both clients: far more than the slow one's
	// socket buffers and queue hold.
	big := fmt.Sprintf(`{"path":"big.txt","content":%q}`, strings.Repeat("x", 256<<10))
	const calls = 30
	for i := range calls {
		start := time.Now()
		fast.invoke(conv, "write_file", big)
		fast.expect("tool_call")
		fast.expect("approval_request")
		if d := time.Since(start); d > 5*time.Second {
			t.Fatalf("call %d took %s: the fast client is held up", i, d)
		}
	}
	// The slow client was cut: reading now yields what was buffered, then
	// the end of the connection, not the 80 frames sent since.
	_ = slowWS.SetReadDeadline(time.Now().Add(frameWait))
	n := 0
	for {
		_, _, err := slowWS.ReadMessage()
		if err == nil {
			n++
			continue
		}
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			t.Fatalf("the slow client is still connected after %d frames", n)
		}
		break
	}
	if n >= 2*calls {
		t.Errorf("the slow client got %d frames, want fewer than the %d sent: it was not cut", n, 2*calls)
	}
	// The fast client still works.
	fast.send(`{"type":"subscribe"}`)
	fast.expect("error")
	fast.invoke(conv, "read_file", readArgs)
	fast.expect("tool_call")
	wantOK(t, fast.expect("tool_result"))
}

func TestConnectionCap(t *testing.T) {
	s := newStack(t, stackOpts{server: func(o *server.Options) { o.MaxConnections = 3 }})
	var open []*client
	for range 3 {
		open = append(open, s.dial(t))
	}
	if st := s.dialStatus(t, "/api/ws", authHeader()); st != http.StatusServiceUnavailable {
		t.Fatalf("4th connection: %d, want 503", st)
	}
	// A slot frees when a connection ends.
	open[0].ws.Close()
	deadline := time.Now().Add(frameWait)
	for {
		st := s.dialStatus(t, "/api/ws", authHeader())
		if st == http.StatusSwitchingProtocols {
			break
		}
		if st != http.StatusServiceUnavailable || time.Now().After(deadline) {
			t.Fatalf("after a close: %d", st)
		}
		time.Sleep(20 * time.Millisecond)
	}
	for _, c := range open[1:] {
		c.send(`{"type":"subscribe"}`)
		c.expect("error")
	}
}

func TestPingPong(t *testing.T) {
	s := newStack(t, stackOpts{server: func(o *server.Options) { o.PingInterval = 100 * time.Millisecond }})

	// A client that answers pings (gorilla does while it reads) stays.
	c := s.dial(t)
	time.Sleep(1200 * time.Millisecond)
	select {
	case <-c.closed:
		t.Fatalf("a client answering pings was disconnected: %v", c.err)
	default:
	}
	c.send(`{"type":"subscribe"}`)
	c.expect("error")

	// A raw TCP client that upgrades and then never answers is cut.
	conn, err := net.Dial("tcp", s.host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	fmt.Fprintf(conn, "GET /api/ws HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"+
		"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\nAuthorization: Bearer %s\r\n\r\n", s.host, testToken)
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("raw upgrade: %d", resp.StatusCode)
	}
	start := time.Now()
	_ = conn.SetReadDeadline(time.Now().Add(frameWait))
	_, err = io.Copy(io.Discard, br) // pings, a close frame, then EOF
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatal("a client that never answers pings is still connected")
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("cut after %s, want about two ping intervals", d)
	}
	// The answering client is still up.
	c.send(`{"type":"subscribe"}`)
	c.expect("error")
}
