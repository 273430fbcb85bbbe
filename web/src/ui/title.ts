// Short clean titles: a session's title as the list and header show it.
// The server's title is the first prompt as typed; shown, it drops a
// leading slash command (/echo, /tool NAME, /model X) and markdown
// syntax, keeps the first sentence-ish part, and is cut at a word.

const MAX = 60;

/** A readable title from a raw one ('' stays ''). */
export function cleanTitle(raw: string): string {
  let t = raw.trim();
  // A leading slash command: "/tool delegate {…}" → the JSON's task or the rest.
  const cmd = /^\/([a-z][\w-]*)\s*/i.exec(t);
  if (cmd) {
    t = t.slice(cmd[0].length);
    if (cmd[1] === 'tool') t = t.replace(/^[\w.-]+\s*/, '');
    else if (cmd[1] === 'model') t = t.replace(/^\S+\s*/, '');
    else if (cmd[1] === 'long') t = t ? `long answer (${t.split(/\s/)[0]})` : 'long answer';
    const task = /"(?:task|command|path|query)"\s*:\s*"((?:[^"\\]|\\.)*)"/.exec(t);
    if (task) t = task[1]!.replace(/\\"/g, '"');
  }
  t = t
    .replace(/```[\s\S]*?(```|$)/g, ' ') // code blocks
    .replace(/`([^`]*)`/g, '$1')
    .replace(/!?\[([^\]]*)\]\([^)]*\)/g, '$1') // links and images
    .replace(/^\s{0,3}(#{1,6}|>|[-*+]|\d+[.)])\s+/gm, '') // headings, quotes, list markers
    .replace(/(\*\*|__|\*|_|~~)(\S[\s\S]*?)\1/g, '$2')
    .replace(/[{}[\]"]+/g, ' ')
    .replace(/\s+/g, ' ')
    .trim();
  if (t.length <= MAX) return t;
  const cut = t.slice(0, MAX);
  const sp = cut.lastIndexOf(' ');
  return (sp > MAX / 2 ? cut.slice(0, sp) : cut).replace(/[\s,.;:–-]+$/, '') + '…';
}
