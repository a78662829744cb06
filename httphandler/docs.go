package httphandler

import (
	"net/http"

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
	return v5emb.NewHandlerWithConfig(swgui.Config{
		Title:            "deployplane API",
		SwaggerJSON:      basePath + "/openapi.json",
		BasePath:         basePath + "/docs/",
		InternalBasePath: "/docs/",
		HideCurl:         false,
	})
}

// servedBy is an answer written by an http.Handler (the docs page and its
// assets).
type servedBy struct{ http.Handler }

// serveDocs answers GET /docs and GET /docs/{asset...}.
func (h *handler) serveDocs(c *call) (int, any, error) {
	return http.StatusOK, servedBy{h.docs}, nil
}
