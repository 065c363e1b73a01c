package http_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	nethttp "net/http"
	"net/http/httptest"

	"github.com/buddy-run/buddy/hostfns/allow"
	buddyhttp "github.com/buddy-run/buddy/hostfns/http"
	"github.com/buddy-run/buddy/internal/base/errs"
)

func ExampleFetcher_Check() {
	f, err := buddyhttp.New(buddyhttp.Policy{Domains: allow.Intersect(
		[]string{"*"}, // the skill declares: any host the operator allows
		[]string{"example.com", "*.wikipedia.org"}, // the operator grants (buddy.toml)
	)})
	if err != nil {
		panic(err)
	}
	for _, u := range []string{
		"HTTPS://EN.Wikipedia.ORG./wiki/Go#History",
		"https://wikipedia.org/",
		"http://0x7f.1/",
		"http://[::ffff:169.254.169.254]/",
		"http://user@example.com/",
		"file:///etc/passwd",
	} {
		checked, err := f.Check(u)
		if err != nil {
			fmt.Println(errs.KindOf(err), "-", err)
			continue
		}
		fmt.Println("ok -", checked)
	}
	// Output:
	// ok - https://en.wikipedia.org/wiki/Go
	// forbidden - forbidden: https://wikipedia.org/: host wikipedia.org is not in the allowlist
	// forbidden - forbidden: http://0x7f.1/: address 127.0.0.1 is loopback
	// forbidden - forbidden: http://[::ffff:169.254.169.254]/: address 169.254.169.254 is a cloud metadata endpoint
	// forbidden - forbidden: http://user@example.com/: userinfo (user:password@) is not allowed
	// forbidden - forbidden: file:///etc/passwd: scheme "file" is not allowed; only http and https
}

func ExampleFetcher_Get() {
	srv := httptest.NewServer(nethttp.HandlerFunc(func(w nethttp.ResponseWriter, r *nethttp.Request) {
		w.Header().Set("Content-Type", "text/plain")
		io.WriteString(w, "hello from a local service")
	}))
	defer srv.Close()

	// A local service must be listed exactly by the operator: here by its IP
	// literal.
	domains := allow.Intersect([]string{"*"}, []string{"127.0.0.1"})
	f, err := buddyhttp.New(buddyhttp.Policy{Domains: domains, MaxBodyBytes: 1 << 20})
	if err != nil {
		panic(err)
	}
	defer f.CloseIdleConnections()

	resp, err := f.Get(context.Background(), srv.URL+"/greeting")
	if err != nil {
		panic(err)
	}
	fmt.Println(resp.Status, resp.Headers["Content-Type"], string(resp.Body))

	// Anything else on the machine is not.
	_, err = f.Get(context.Background(), "http://localhost:22/")
	fmt.Println(errors.Is(err, errs.ErrForbidden))
	// Output:
	// 200 text/plain hello from a local service
	// true
}
