// `python3.14 -m compileall` for machines without a native CPython 3.14 (infra/bytecode.py):
// Pyodide's CPython 3.14 (WebAssembly, pinned in package.json, installed by `npm ci`).
// Usage: node pyodide_compileall.mjs DIR [compileall arguments...]
// DIR (absolute) is mounted at the same path inside Pyodide, so the arguments name its files
// as the host does. Exits with compileall's status (0: every file compiled).
import { loadPyodide } from "pyodide";

const [directory, ...args] = process.argv.slice(2);
const pyodide = await loadPyodide({
  stdout: (line) => process.stdout.write(`${line}\n`),
  stderr: (line) => process.stderr.write(`${line}\n`),
});
pyodide.FS.mkdirTree(directory);
pyodide.mountNodeFS(directory, directory);
pyodide.globals.set("compileall_args", pyodide.toPy(args));
const status = pyodide.runPython(`
import compileall, sys
sys.argv = ["compileall", *compileall_args]
int(not compileall.main())
`);
process.exit(status);
