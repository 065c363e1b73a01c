package server

import (
	"embed"
	"net/http"
	"path"
)

// The page at / (index.html, app.js, markdown.js, app.css and two icons):
// plain files, embedded, no build step. docs/PROTOCOL.md is its only contract with the
// server.
//
//go:embed web/index.html web/app.js web/markdown.js web/app.css web/favicon.svg web/favicon-alert.svg
var webFS embed.FS

// PageCSP is the Content-Security-Policy of the page and its files: scripts,
// styles and connections to this origin only (no inline script, no eval),
// images only from this origin or data: URLs, no base URL, no form
// submission, no framing.
const PageCSP = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; " +
	"base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// webTypes are the page's files and their content types.
var webTypes = map[string]string{
	"index.html":        "text/html; charset=utf-8",
	"app.js":            "text/javascript; charset=utf-8",
	"markdown.js":       "text/javascript; charset=utf-8",
	"app.css":           "text/css; charset=utf-8",
	"favicon.svg":       "image/svg+xml",
	"favicon-alert.svg": "image/svg+xml",
}

// webFile serves one embedded file of the page (GET / is index.html). The
// files need no token: they hold no data; everything they show comes from
// the authenticated API.
func (s *Server) webFile(name string) http.HandlerFunc {
	data, err := webFS.ReadFile(path.Join("web", name))
	if err != nil {
		panic("server: embedded page file missing: " + name) // a build without the files is a bug
	}
	ctype := webTypes[name]
	return func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", PageCSP)
		h.Set("Content-Type", ctype)
		h.Set("Cross-Origin-Opener-Policy", "same-origin")
		h.Set("Cross-Origin-Resource-Policy", "same-origin")
		if r.Method == http.MethodHead {
			return
		}
		_, _ = w.Write(data)
	}
}

// webRoutes adds the page's routes to m.
func (s *Server) webRoutes(m *http.ServeMux) {
	m.HandleFunc("GET /{$}", s.webFile("index.html"))
	for name := range webTypes {
		if name != "index.html" {
			m.HandleFunc("GET /"+name, s.webFile(name))
		}
	}
}
