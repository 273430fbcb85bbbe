// Builds the dashboard: web/src/main.ts (and the CSS it imports) into
// web/dist/assets/ with content-hashed names, and web/index.html into
// web/dist/index.html pointing at them. Minified and deterministic: the
// same sources give the same bytes, so the committed web/dist can be
// checked for staleness by building again elsewhere and comparing.
//
//   node web/build.mjs                 # into web/dist
//   node web/build.mjs --outdir DIR    # into DIR (the staleness check)
import * as esbuild from 'esbuild';
import { mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const args = process.argv.slice(2);
const at = args.indexOf('--outdir');
const outdir = at >= 0 ? path.resolve(args[at + 1]) : path.join(here, 'dist');

await rm(path.join(outdir, 'assets'), { recursive: true, force: true });
await mkdir(outdir, { recursive: true });

const result = await esbuild.build({
  absWorkingDir: here,
  entryPoints: { app: 'src/main.ts' },
  outdir,
  entryNames: 'assets/[name]-[hash]',
  assetNames: 'assets/[name]-[hash]',
  bundle: true,
  minify: true,
  format: 'esm',
  target: ['es2022', 'chrome120', 'firefox120', 'safari17'],
  platform: 'browser',
  legalComments: 'none',
  sourcemap: false,
  metafile: true,
  charset: 'utf8',
  logLevel: 'warning',
});

const outputs = Object.keys(result.metafile.outputs).map((p) => path.relative(outdir, path.resolve(here, p)));
const js = outputs.find((p) => p.endsWith('.js'));
const css = outputs.find((p) => p.endsWith('.css'));
if (!js || !css) {
  throw new Error(`build produced no ${js ? 'css' : 'js'} output: ${outputs.join(', ')}`);
}
const page = (await readFile(path.join(here, 'index.html'), 'utf8'))
  .replace('%APP_JS%', '/' + js.split(path.sep).join('/'))
  .replace('%APP_CSS%', '/' + css.split(path.sep).join('/'));
await writeFile(path.join(outdir, 'index.html'), page);
