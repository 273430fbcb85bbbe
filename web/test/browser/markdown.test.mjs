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

const ALLOWED = new Set(['p', 'pre', 'code', 'h3', 'h4', 'h5', 'h6', 'blockquote', 'ul', 'ol', 'li', 'strong', 'em', 'del', 'a', 'span',
  'div', 'table', 'thead', 'tbody', 'tr', 'th', 'td', 'hr', 'button', 'input']);

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
  const atoms = ['`', '```', '*', '**', '_', '__', '[', ']', '(', ')', 'http://a.b', 'javascript:x', '#', '> ', '- ', '1. ', '\n', '\n\n', ' ', 'word', '<b>', '~~~', '\\', 'é', '\u0000',
    '|', ' | ', '|---|', '---', '~~', '- [ ] ', '- [x] ', '```go\n', '  - '];
  for (let i = 0; i < 3000; i++) {
    let s = '';
    const n = Math.floor(rnd() * 40);
    for (let j = 0; j < n; j++) s += atoms[Math.floor(rnd() * atoms.length)];
    check(s);
  }
});

function texts(tree) {
  const out = [];
  const go = (n) => {
    if (n == null || typeof n === 'boolean') return;
    if (typeof n === 'string' || typeof n === 'number') return void out.push(String(n));
    if (Array.isArray(n)) return n.forEach(go);
    go(n.props?.children);
  };
  go(tree);
  return out.join('');
}

function find(tree, type) {
  const out = [];
  walk(tree, (n) => n.type === type && out.push(n));
  return out;
}

test('GFM tables render as tables with their alignment', () => {
  const tree = check('| a | b |\n| :-- | --: |\n| 1 | `x|y` |\n| 2 | **z** |');
  assert.equal(find(tree, 'table').length, 1);
  assert.equal(find(tree, 'th').length, 2);
  assert.equal(find(tree, 'tr').length, 3);
  assert.equal(find(tree, 'td')[1].props.class, 'al-right');
  assert.equal(texts(find(tree, 'td')[1]), 'x|y', 'a pipe inside code stays in its cell');
});

test('a code block has its language, highlighted tokens and a copy button; its text is the code', () => {
  const code = 'func main() {\n\treturn "hi" // done\n}';
  const tree = check('```go\n' + code + '\n```');
  const block = find(tree, 'div').find((d) => d.props.class?.startsWith('md-codeblock'));
  assert.equal(block.props['data-lang'], 'go');
  assert.equal(find(block, 'button')[0].props['data-copy'], 'code');
  const pre = find(block, 'code')[0];
  assert.equal(texts(pre), code, 'highlighting keeps the text as it is');
  const classes = find(pre, 'span').map((s) => s.props.class);
  for (const c of ['tok-k', 'tok-s', 'tok-c']) assert.ok(classes.includes(c), c);
});

test('streaming: the text is cut into blocks at blank lines outside fences, and a finished block renders the same alone', () => {
  const src = 'para one\nstill one\n\n```\na\n\nb\n```\n\n| x |\n| - |\n| 1 |';
  const blocks = md.splitBlocks(src);
  assert.deepEqual(blocks, ['para one\nstill one', '```\na\n\nb\n```', '| x |\n| - |\n| 1 |']);
  // Every prefix of the text renders without throwing, and the blocks
  // before the last are the final ones (cached by their text).
  for (let i = 0; i <= src.length; i++) check(src.slice(0, i));
  assert.equal(md.blockNodes(blocks[0]), md.blockNodes(blocks[0]), 'a finished block is parsed once');
  assert.equal(JSON.stringify(md.renderMarkdown(src)), JSON.stringify(blocks.flatMap((b) => md.blockNodes(b))));
});

test('an unclosed fence while streaming is an open code block, not text', () => {
  const tree = check('```py\nprint(1)');
  const block = find(tree, 'div').find((d) => d.props.class?.startsWith('md-codeblock'));
  assert.ok(block && block.props.class.includes('open'));
});
