// The markdown renderer: one parser for streaming and finished text.
// Fenced code (with its language label, highlighting and a copy button),
// GFM tables, headings, lists, block quotes, rules, paragraphs, inline
// code, bold, italic, strike-through and links. It builds Preact nodes,
// never HTML strings, so model output cannot inject markup; links open
// only http(s) URLs.
//
// Streaming: splitBlocks cuts the text into top-level blocks (at blank
// lines outside a fence); every block but the last is final, so its nodes
// are cached by source text and only the growing last block is parsed
// again on each frame. A paragraph is never cut mid-way, and the card
// does not jump when the message completes: the same parser rendered it
// all along.
import { h, type ComponentChildren, type VNode } from 'preact';
import { highlight } from './highlight';

/** The whole text as nodes (tests; small texts). */
export function renderMarkdown(src: string): VNode<any>[] {
  const out: VNode<any>[] = [];
  for (const b of splitBlocks(src)) out.push(...blockNodes(b));
  return out;
}

/**
 * The top-level blocks of src: cut at blank lines outside a fenced code
 * block; a table or list separated by blank lines becomes two blocks.
 * Joined with "\n\n" they render as src does.
 */
export function splitBlocks(src: string): string[] {
  const lines = src.replace(/\r\n?/g, '\n').split('\n');
  const out: string[] = [];
  let cur: string[] = [];
  let fence = '';
  for (const line of lines) {
    if (fence) {
      cur.push(line);
      if (line.trim().startsWith(fence)) fence = '';
      continue;
    }
    const f = FENCE.exec(line);
    if (f) {
      fence = f[1]!;
      cur.push(line);
      continue;
    }
    if (!line.trim()) {
      if (cur.length) out.push(cur.join('\n'));
      cur = [];
      continue;
    }
    cur.push(line);
  }
  if (cur.length) out.push(cur.join('\n'));
  return out;
}

const cache = new Map<string, VNode<any>[]>();
const CACHE_MAX = 2000;

/**
 * The nodes of one block, cached by its source (a finished block never
 * changes). The growing last block of a streaming message is parsed
 * without caching (keep false): its every prefix would fill the cache.
 */
export function blockNodes(src: string, keep = true): VNode<any>[] {
  let v = cache.get(src);
  if (v) return v;
  v = parseBlock(src);
  if (!keep) return v;
  if (cache.size >= CACHE_MAX) cache.delete(cache.keys().next().value!);
  cache.set(src, v);
  return v;
}

const FENCE = /^\s*(```+|~~~+)\s*([\w+#.-]*)\s*$/;
const ITEM = /^(\s*)([-*+]|\d+[.)])\s+(\[[ xX]\]\s+)?/;
const RULE = /^\s*([-*_])(\s*\1){2,}\s*$/;
const TABLE_SEP = /^\s*\|?\s*:?-{1,}:?\s*(\|\s*:?-{1,}:?\s*)*\|?\s*$/;

function parseBlock(src: string): VNode<any>[] {
  const out: VNode<any>[] = [];
  const lines = src.split('\n');
  let i = 0;
  let key = 0;
  while (i < lines.length) {
    const line = lines[i]!;
    const fence = FENCE.exec(line);
    if (fence) {
      const body: string[] = [];
      i++;
      let closed = false;
      while (i < lines.length) {
        if (lines[i]!.trim().startsWith(fence[1]!)) {
          closed = true;
          i++;
          break;
        }
        body.push(lines[i++]!);
      }
      out.push(codeBlock(key++, fence[2] ?? '', body.join('\n'), closed));
      continue;
    }
    if (RULE.test(line)) {
      out.push(h('hr', { key: key++ }));
      i++;
      continue;
    }
    const head = /^(#{1,6})\s+(.*?)\s*#*\s*$/.exec(line);
    if (head) {
      const level = Math.min(head[1]!.length + 2, 6);
      out.push(h('h' + level, { key: key++, class: 'md-h' }, inline(head[2]!)));
      i++;
      continue;
    }
    if (line.includes('|') && i + 1 < lines.length && TABLE_SEP.test(lines[i + 1]!) && lines[i + 1]!.includes('-')) {
      const rows: string[] = [];
      const start = i;
      i += 2;
      while (i < lines.length && lines[i]!.includes('|') && lines[i]!.trim()) rows.push(lines[i++]!);
      out.push(table(key++, lines[start]!, lines[start + 1]!, rows));
      continue;
    }
    if (/^\s*>/.test(line)) {
      const body: string[] = [];
      while (i < lines.length && /^\s*>/.test(lines[i]!)) body.push(lines[i++]!.replace(/^\s*>\s?/, ''));
      out.push(h('blockquote', { key: key++ }, parseBlock(body.join('\n'))));
      continue;
    }
    if (ITEM.test(line)) {
      const [node, next] = list(lines, i, key++);
      out.push(node);
      i = next;
      continue;
    }
    const para: string[] = [];
    while (i < lines.length && lines[i]!.trim() && !(para.length && startsBlock(lines, i))) para.push(lines[i++]!);
    if (para.length === 0) para.push(lines[i++]!);
    out.push(h('p', { key: key++ }, runs(para.join('\n'))));
  }
  return out;
}

function startsBlock(lines: string[], i: number): boolean {
  const l = lines[i]!;
  return FENCE.test(l) || /^#{1,6}\s/.test(l) || /^\s*>/.test(l) || ITEM.test(l) || RULE.test(l);
}

/** A list starting at line i; nested by indentation. Returns the node and the next line. */
function list(lines: string[], i: number, key: number): [VNode<any>, number] {
  const first = ITEM.exec(lines[i]!)!;
  const indent = first[1]!.length;
  const ordered = /\d/.test(first[2]!);
  const items: ComponentChildren[] = [];
  while (i < lines.length) {
    const m = ITEM.exec(lines[i]!);
    if (!m || m[1]!.length !== indent || /\d/.test(m[2]!) !== ordered) break;
    let text = lines[i++]!.slice(m[0].length);
    const children: ComponentChildren[] = [];
    while (i < lines.length && lines[i]!.trim()) {
      const sub = ITEM.exec(lines[i]!);
      if (sub && sub[1]!.length > indent) {
        const [node, next] = list(lines, i, children.length);
        children.push(node);
        i = next;
        continue;
      }
      if (sub || !/^\s+\S/.test(lines[i]!)) break;
      text += ' ' + lines[i++]!.trim();
    }
    const task = m[3] ? h('input', { type: 'checkbox', checked: /x/i.test(m[3]), disabled: true, class: 'md-task' }) : null;
    items.push(h('li', { key: items.length }, task, inline(text), children));
  }
  return [h(ordered ? 'ol' : 'ul', { key }, items), i];
}

function cells(row: string): string[] {
  let r = row.trim();
  if (r.startsWith('|')) r = r.slice(1);
  if (r.endsWith('|') && !r.endsWith('\\|')) r = r.slice(0, -1);
  const out: string[] = [];
  let cur = '';
  let code = false;
  for (let k = 0; k < r.length; k++) {
    const c = r[k]!;
    if (c === '\\' && r[k + 1] === '|') {
      cur += '|';
      k++;
    } else if (c === '`') {
      code = !code;
      cur += c;
    } else if (c === '|' && !code) {
      out.push(cur.trim());
      cur = '';
    } else cur += c;
  }
  out.push(cur.trim());
  return out;
}

function table(key: number, head: string, sep: string, rows: string[]): VNode<any> {
  const align = cells(sep).map((c) => (c.startsWith(':') && c.endsWith(':') ? 'center' : c.endsWith(':') ? 'right' : c.startsWith(':') ? 'left' : undefined));
  const hs = cells(head);
  const cls = (j: number) => (align[j] ? 'al-' + align[j] : undefined);
  return h('div', { key, class: 'md-table' },
    h('table', null,
      h('thead', null, h('tr', null, hs.map((c, j) => h('th', { key: j, class: cls(j) }, inline(c))))),
      h('tbody', null, rows.map((r, k) => h('tr', { key: k }, hs.map((_, j) => h('td', { key: j, class: cls(j) }, inline(cells(r)[j] ?? ''))))))));
}

/**
 * A fenced code block: its language label, a copy button (the page's
 * delegated click handler copies the block's code, see copy.ts) and the
 * highlighted code.
 */
function codeBlock(key: number, lang: string, code: string, closed: boolean): VNode<any> {
  return h('div', { key, class: 'md-codeblock' + (closed ? '' : ' open'), 'data-lang': lang || undefined },
    h('div', { class: 'md-codehead' },
      // The label and the button's text come from CSS (attr()), so the
      // block's text is its code alone (selecting, innerText).
      h('span', { class: 'md-lang', 'data-label': lang || 'text' }),
      h('button', { type: 'button', class: 'copy-btn small ghost', 'data-copy': 'code', 'aria-label': 'Copy the code', title: 'Copy the code' })),
    h('pre', { class: 'md-code' }, h('code', null, highlight(code, lang))));
}

/**
 * A paragraph's inline content. A long one (a streaming answer with no
 * blank line) is cut at sentence or word ends into runs of about RUN
 * characters, inline elements in the same paragraph (the text flows on,
 * no break), each parsed once: as the text grows only the last run is
 * parsed and laid out again. Emphasis spanning a cut shows its markers.
 */
const RUN = 2000;
const runCache = new Map<string, ComponentChildren[]>();

function runs(text: string): ComponentChildren {
  if (text.length <= RUN) return inline(text);
  const out: ComponentChildren[] = [];
  let at = 0;
  let k = 0;
  while (text.length - at > RUN) {
    let cut = text.lastIndexOf('. ', at + RUN);
    if (cut <= at + RUN / 2) cut = text.lastIndexOf(' ', at + RUN);
    if (cut <= at) cut = at + RUN;
    const run = text.slice(at, cut + 1);
    let nodes = runCache.get(run);
    if (!nodes) {
      nodes = inline(run);
      if (runCache.size >= 500) runCache.delete(runCache.keys().next().value!);
      runCache.set(run, nodes);
    }
    out.push(h('span', { key: k++, class: 'md-run' }, nodes));
    at = cut + 1;
  }
  out.push(h('span', { key: k++, class: 'md-run' }, inline(text.slice(at))));
  return out;
}

// Underscore emphasis only at word boundaries: ANTHROPIC_API_KEY stays as is.
const INLINE = /(`+)([\s\S]*?)\1|\*\*([^*]+)\*\*|(?<!\w)__([^_]+)__(?!\w)|\*([^*\s][^*]*)\*|(?<!\w)_([^_\s][^_]*)_(?!\w)|~~([^~]+)~~|\[([^\]]+)\]\(([^)\s]+)\)|(https?:\/\/[^\s<>()]+[^\s<>().,;:!?'"])/g;

function inline(text: string): ComponentChildren[] {
  const out: ComponentChildren[] = [];
  let last = 0;
  let k = 0;
  for (const m of text.matchAll(INLINE)) {
    const at = m.index ?? 0;
    if (at > last) out.push(text.slice(last, at));
    if (m[1]) out.push(h('code', { key: k++ }, m[2]));
    else if (m[3] || m[4]) out.push(h('strong', { key: k++ }, inline(m[3] || m[4]!)));
    else if (m[5] || m[6]) out.push(h('em', { key: k++ }, inline(m[5] || m[6]!)));
    else if (m[7]) out.push(h('del', { key: k++ }, inline(m[7])));
    else if (m[8]) {
      const url = m[9]!;
      out.push(
        /^https?:\/\//i.test(url)
          ? h('a', { key: k++, href: url, target: '_blank', rel: 'noopener noreferrer' }, m[8])
          : h('span', { key: k++ }, m[8]),
      );
    } else if (m[10]) out.push(h('a', { key: k++, href: m[10], target: '_blank', rel: 'noopener noreferrer' }, m[10]));
    last = at + m[0].length;
  }
  if (last < text.length) out.push(text.slice(last));
  return out;
}
