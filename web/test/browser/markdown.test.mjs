// The markdown renderer takes model output, which is untrusted: whatever
// the input, it must return element types from a fixed list, links only
// to http(s), and never throw. A seeded random property test plus cases.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { after, before, test } from 'node:test';
import * as esbuild from 'esbuild';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
let md;
let dir;
before(async () => {
  dir = mkdtempSync(path.join(tmpdir(), 'metis-md-'));
  const out = path.join(dir, 'markdown.mjs');
  await esbuild.build({ entryPoints: [path.join(root, 'src/ui/markdown.ts')], bundle: true, format: 'esm', platform: 'node', outfile: out, logLevel: 'warning' });
  md = await import(pathToFileURL(out).href);
});
after(() => rmSync(dir, { recursive: true, force: true }));

const ALLOWED = new Set(['p', 'pre', 'code', 'h3', 'h4', 'h5', 'h6', 'blockquote', 'ul', 'ol', 'li', 'strong', 'em', 'a', 'span']);

function walk(node, visit) {
  if (node == null || typeof node === 'boolean' || typeof node === 'string' || typeof node === 'number') return;
  if (Array.isArray(node)) return node.forEach((n) => walk(n, visit));
  visit(node);
  walk(node.props?.children, visit);
}

function check(src) {
  const tree = md.renderMarkdown(src);
  walk(tree, (n) => {
    assert.equal(typeof n.type, 'string', 'only elements');
    assert.ok(ALLOWED.has(n.type), `element <${n.type}> from ${JSON.stringify(src)}`);
    for (const k of Object.keys(n.props)) {
      assert.ok(!/^on|^dangerously|^style$|^src$/i.test(k), `attribute ${k} from ${JSON.stringify(src)}`);
    }
    if (n.type === 'a') assert.match(n.props.href, /^https?:\/\//i);
  });
  return tree;
}

test('markup in model output stays text', () => {
  const tree = check('<script>alert(1)</script> <img src=x onerror=alert(1)> [x](javascript:alert(1)) [ok](https://example.com)');
  const texts = [];
  walk(tree, (n) => typeof n.props.children === 'string' && texts.push(n.props.children));
  const flat = JSON.stringify(tree);
  assert.ok(flat.includes('<script>alert(1)</script>'), 'the tag is text');
  assert.ok(!flat.includes('"href":"javascript'), 'no javascript: link');
});

test('intraword underscores are not emphasis', () => {
  const flat = JSON.stringify(check('Set ANTHROPIC_API_KEY or _this_.'));
  assert.ok(flat.includes('ANTHROPIC_API_KEY'));
  assert.ok(flat.includes('"type":"em"'));
});

test('random input never throws and yields only allowed elements', () => {
  let seed = 42;
  const rnd = () => ((seed = (seed * 1103515245 + 12345) & 0x7fffffff) / 0x7fffffff);
  const atoms = ['`', '```', '*', '**', '_', '__', '[', ']', '(', ')', 'http://a.b', 'javascript:x', '#', '> ', '- ', '1. ', '\n', '\n\n', ' ', 'word', '<b>', '~~~', '\\', 'é', '\u0000'];
  for (let i = 0; i < 3000; i++) {
    let s = '';
    const n = Math.floor(rnd() * 40);
    for (let j = 0; j < n; j++) s += atoms[Math.floor(rnd() * atoms.length)];
    check(s);
  }
});
