// A small markdown renderer for finished messages: fenced code, headings,
// lists, block quotes, paragraphs, inline code, bold, italic and links.
// It builds Preact nodes, never HTML strings, so model output cannot
// inject markup; links open only http(s) URLs.
import { h, type ComponentChildren, type VNode } from 'preact';

export function renderMarkdown(src: string): VNode<any>[] {
  const out: VNode<any>[] = [];
  const lines = src.replace(/\r\n?/g, '\n').split('\n');
  let i = 0;
  let key = 0;
  while (i < lines.length) {
    const line = lines[i];
    const fence = /^\s*(```|~~~)\s*([\w+-]*)\s*$/.exec(line);
    if (fence) {
      const body: string[] = [];
      i++;
      while (i < lines.length && !lines[i].trim().startsWith(fence[1])) body.push(lines[i++]);
      i++;
      out.push(h('pre', { key: key++, class: 'md-code', 'data-lang': fence[2] || undefined }, h('code', null, body.join('\n'))));
      continue;
    }
    const head = /^(#{1,6})\s+(.*)$/.exec(line);
    if (head) {
      const level = Math.min(head[1].length + 2, 6);
      out.push(h('h' + level, { key: key++, class: 'md-h' }, inline(head[2])));
      i++;
      continue;
    }
    if (/^\s*>/.test(line)) {
      const body: string[] = [];
      while (i < lines.length && /^\s*>/.test(lines[i])) body.push(lines[i++].replace(/^\s*>\s?/, ''));
      out.push(h('blockquote', { key: key++ }, renderMarkdown(body.join('\n'))));
      continue;
    }
    const item = /^\s*([-*+]|\d+[.)])\s+/;
    if (item.test(line)) {
      const ordered = /^\s*\d/.test(line);
      const items: ComponentChildren[] = [];
      while (i < lines.length && item.test(lines[i])) {
        let text = lines[i++].replace(item, '');
        while (i < lines.length && /^\s{2,}\S/.test(lines[i]) && !item.test(lines[i])) text += ' ' + lines[i++].trim();
        items.push(h('li', { key: items.length }, inline(text)));
      }
      out.push(h(ordered ? 'ol' : 'ul', { key: key++ }, items));
      continue;
    }
    if (!line.trim()) {
      i++;
      continue;
    }
    const para: string[] = [];
    while (i < lines.length && lines[i].trim() && !/^\s*(```|~~~|#{1,6}\s|>|[-*+]\s|\d+[.)]\s)/.test(lines[i])) para.push(lines[i++]);
    if (para.length === 0) para.push(lines[i++]);
    out.push(h('p', { key: key++ }, inline(para.join('\n'))));
  }
  return out;
}

// Underscore emphasis only at word boundaries: ANTHROPIC_API_KEY stays as is.
const INLINE = /(`+)([\s\S]*?)\1|\*\*([^*]+)\*\*|(?<!\w)__([^_]+)__(?!\w)|\*([^*\s][^*]*)\*|(?<!\w)_([^_\s][^_]*)_(?!\w)|\[([^\]]+)\]\(([^)\s]+)\)/g;

function inline(text: string): ComponentChildren[] {
  const out: ComponentChildren[] = [];
  let last = 0;
  let k = 0;
  for (const m of text.matchAll(INLINE)) {
    const at = m.index ?? 0;
    if (at > last) out.push(text.slice(last, at));
    if (m[1]) out.push(h('code', { key: k++ }, m[2]));
    else if (m[3] || m[4]) out.push(h('strong', { key: k++ }, inline(m[3] || m[4])));
    else if (m[5] || m[6]) out.push(h('em', { key: k++ }, inline(m[5] || m[6])));
    else if (m[7]) {
      const url = m[8];
      out.push(
        /^https?:\/\//i.test(url)
          ? h('a', { key: k++, href: url, target: '_blank', rel: 'noopener noreferrer' }, m[7])
          : h('span', { key: k++ }, m[7]),
      );
    }
    last = at + m[0].length;
  }
  if (last < text.length) out.push(text.slice(last));
  return out;
}
