import { defineConfig } from "vite"

// Preact's automatic JSX runtime through esbuild: no framework plugin needed. `pnpm dev` proxies
// the API to a server on :8787 (start one with `pnpm start` at the repository root).
export default defineConfig({
  esbuild: { jsx: "automatic", jsxImportSource: "preact" },
  build: { outDir: "dist", assetsDir: "assets", emptyOutDir: true, sourcemap: true, target: "es2022" },
  server: { proxy: { "/v1": "http://127.0.0.1:8787" } }
})
