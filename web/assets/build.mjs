// Bundles the UI's browser code into dist/ (or the directory given as the
// first argument): node build.mjs [OUTDIR]. svclab embeds dist/.
import * as esbuild from "esbuild";

await esbuild.build({
  entryPoints: ["src/terminal.js", "src/panels.js", "src/class.js", "src/workspace.js", "src/confirm.js"],
  bundle: true,
  minify: true,
  target: "es2020",
  format: "iife",
  outdir: process.argv[2] || "dist",
  loader: { ".css": "css" },
  logLevel: "warning",
});
