// Syntax highlighting for code blocks: a small tokenizer (comments,
// strings, numbers, keywords, and diff lines) that returns text and
// <span class="tok-…"> nodes, never HTML. Good enough to read code, not
// a grammar: an unknown language gets the common C-like rules.
import { h, type ComponentChildren } from 'preact';

/** Code longer than this is shown plain (the tokenizer is per frame while it streams). */
const MAX = 40_000;

const KEYWORDS = new Set(
  ('break case catch class const continue def default defer delete do elif else enum export extends false finally fn for ' +
    'from func function go if impl import in interface let match mod module new nil none null package pub return ' +
    'select self static struct super switch this throw true try type typeof var void while with yield async await ' +
    'lambda pass raise not and or is as mut use where loop trait range chan map fi then esac done echo local readonly').split(' '),
);

const HASH_COMMENT = new Set(['py', 'python', 'sh', 'bash', 'shell', 'zsh', 'yaml', 'yml', 'toml', 'rb', 'ruby', 'r', 'perl', 'make', 'makefile', 'dockerfile', 'conf', 'ini']);

/** The code as highlighted nodes. */
export function highlight(code: string, lang: string): ComponentChildren {
  const l = lang.toLowerCase();
  if (code.length > MAX || l === 'text' || l === 'txt' || l === 'plain') return code;
  if (l === 'diff' || l === 'patch') return diffLines(code);
  const hash = HASH_COMMENT.has(l);
  const slash = !hash || l === 'conf';
  const re = new RegExp(
    [
      slash ? String.raw`\/\/[^\n]*|\/\*[\s\S]*?(?:\*\/|$)` : '',
      hash ? String.raw`#[^\n]*` : '',
      String.raw`"(?:[^"\\\n]|\\.)*"?|'(?:[^'\\\n]|\\.)*'?|\x60(?:[^\x60\\]|\\.)*\x60?`,
      String.raw`\b\d[\d_]*(?:\.\d+)?(?:e[+-]?\d+)?\b|\b0x[\da-f]+\b`,
      String.raw`\b[A-Za-z_$][\w$]*\b`,
    ]
      .filter(Boolean)
      .join('|'),
    'gi',
  );
  const out: ComponentChildren[] = [];
  let last = 0;
  let k = 0;
  for (const m of code.matchAll(re)) {
    const t = m[0];
    const at = m.index ?? 0;
    let cls = '';
    const c = t[0]!;
    if (c === '/' || c === '#') cls = 'tok-c';
    else if (c === '"' || c === "'" || c === '`') cls = 'tok-s';
    else if (/\d/.test(c)) cls = 'tok-n';
    else if (KEYWORDS.has(t)) cls = 'tok-k';
    else continue;
    if (at > last) out.push(code.slice(last, at));
    out.push(h('span', { key: k++, class: cls }, t));
    last = at + t.length;
  }
  if (last < code.length) out.push(code.slice(last));
  return out;
}

/** A unified diff: each line with its class (added, removed, hunk, file header). */
export function diffLines(diff: string): ComponentChildren[] {
  return diff.split('\n').map((line, i) => {
    let cls = 'dl';
    if (line.startsWith('+++') || line.startsWith('---')) cls += ' dl-file';
    else if (line.startsWith('+')) cls += ' dl-add';
    else if (line.startsWith('-')) cls += ' dl-del';
    else if (line.startsWith('@@')) cls += ' dl-hunk';
    return h('span', { key: i, class: cls }, line + '\n');
  });
}
