package web

import (
	"embed"
	"io/fs"
)

//go:embed assets/dist static
var assetFS embed.FS

// Assets are the UI's static files: the bundles esbuild made from
// web/assets (terminal.js, panels.js, terminal.css) and static/app.css.
func Assets() fs.FS {
	return assetFS
}
