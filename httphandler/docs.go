package httphandler

import (
	"io"
	"net/http"
	"strconv"

	"github.com/swaggest/swgui"
	"github.com/swaggest/swgui/v5emb"
)

// docsPage is the interactive API page of GET /docs: Swagger UI over GET
// /openapi.json, as the hosted service serves one. Its scripts, styles and
// icons are embedded in the github.com/swaggest/swgui module (v5emb) and
// served below /docs/, so the page needs no network beyond this server.
// basePath is Options.BasePath: the page's links and the document's URL
// are under it, while the handler sees the paths without it.
func docsPage(basePath string) http.Handler {
	h := v5emb.NewHandlerWithConfig(swgui.Config{
		Title:            "deployplane API",
		SwaggerJSON:      basePath + "/openapi.json",
		BasePath:         basePath + "/docs/",
		InternalBasePath: "/docs/",
		HideCurl:         false,
	})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(&jsonNotFound{ResponseWriter: w}, r)
	})
}

// notFoundBody is the contract's 404 answer for an unknown path.
const notFoundBody = `{"detail":"Not Found"}` + "\n"

// jsonNotFound passes an answer through, except a 404, which it answers
// as every unknown path of the API is (JSON, {"detail": "Not Found"})
// instead of the file server's plain text.
type jsonNotFound struct {
	http.ResponseWriter
	notFound bool
}

func (w *jsonNotFound) WriteHeader(code int) {
	if code != http.StatusNotFound {
		w.ResponseWriter.WriteHeader(code)
		return
	}
	w.notFound = true
	h := w.Header()
	h.Del("X-Content-Type-Options")
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(notFoundBody)))
	w.ResponseWriter.WriteHeader(code)
	_, _ = io.WriteString(w.ResponseWriter, notFoundBody)
}

func (w *jsonNotFound) Write(b []byte) (int, error) {
	if w.notFound {
		return len(b), nil // the file server's text, replaced
	}
	return w.ResponseWriter.Write(b)
}

// servedBy is an answer written by an http.Handler (the docs page and its
// assets).
type servedBy struct{ http.Handler }

// serveDocs answers GET /docs and GET /docs/{asset...}.
func (h *handler) serveDocs(c *call) (int, any, error) {
	return http.StatusOK, servedBy{h.docs}, nil
}
