// Parse a Mermaid diagram (standard input) with the real Mermaid parser, in Node with a jsdom window.
// Prints "ok <diagram type>" and exits 0, or "error <first lines of the parser's message>" and exits 1.
// Run by tests/support/mermaid.py with NODE_PATH set to the cached node_modules.
import { createRequire } from "module";
import fs from "fs";

const require = createRequire(process.env.NODE_PATH.split(":")[0] + "/");
const { JSDOM } = require("jsdom");
const dom = new JSDOM("<!DOCTYPE html><html><body></body></html>", { pretendToBeVisual: true });
globalThis.window = dom.window;
globalThis.document = dom.window.document;
globalThis.DOMParser = dom.window.DOMParser;
globalThis.Element = dom.window.Element;

const { default: mermaid } = await import(require.resolve("mermaid"));
mermaid.initialize({ startOnLoad: false });
const text = fs.readFileSync(0, "utf8");
try {
  const result = await mermaid.parse(text);
  console.log(`ok ${result.diagramType}`);
} catch (err) {
  console.log(`error ${String(err.message || err).split("\n").slice(0, 6).join(" | ")}`);
  process.exit(1);
}
