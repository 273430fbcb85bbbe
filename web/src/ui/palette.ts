// The Ctrl/Cmd+K palette: jump to a session, new session, cancel the
// turn, trace mode, workers, theme. Arrow keys move, Enter runs, Esc
// closes.
import { html } from 'htm/preact';
import type { VNode } from 'preact';
import { useEffect, useRef, useState } from 'preact/hooks';
import { signal } from '@preact/signals';
import { cancelTurn } from './conversation';
import { shortId } from './format';
import { go, route } from './route';
import { current, exportEvents } from './session';
import { refreshSessions, sessions, showNew, titleOf } from './sessions';
import { cycleTheme } from './theme';

export const paletteOpen = signal(false);

interface Cmd {
  id: string;
  label: string;
  hint?: string;
  run: () => void;
}

function commands(): Cmd[] {
  const out: Cmd[] = [];
  const live = current.value;
  const r = route.value;
  out.push({ id: 'new', label: 'New session', run: () => (go({ page: 'sessions' }), (showNew.value = true), setTimeout(() => (document.getElementById('new-workspace-pick') ?? document.getElementById('new-workspace'))?.focus(), 50)) });
  if (live && live.view.turn.status === 'in_flight') out.push({ id: 'cancel', label: 'Cancel the running turn', run: () => cancelTurn(live) });
  if (r.page === 'session') {
    out.push({ id: 'trace', label: 'Trace mode', hint: 'events and timeline', run: () => go({ page: 'session', id: r.id, tab: 'trace' }) });
    out.push({ id: 'chat', label: 'Conversation', run: () => go({ page: 'session', id: r.id, tab: 'chat' }) });
    out.push({ id: 'workers', label: 'Workers', run: () => go({ page: 'session', id: r.id, tab: 'workers' }) });
    if (live) {
      out.push({ id: 'inline', label: (live.inline.value ? 'Hide' : 'Show') + ' worker events inline', run: () => live.setInline(!live.inline.value) });
      out.push({ id: 'export', label: 'Export events as JSON lines', run: () => exportEvents(live) });
    }
  }
  out.push({ id: 'sessions', label: 'All sessions', run: () => go({ page: 'sessions' }) });
  out.push({ id: 'theme', label: 'Toggle light / dark theme', run: cycleTheme });
  for (const s of sessions.value) {
    out.push({ id: 's:' + s.id, label: titleOf(s), hint: shortId(s.id) + ' · ' + s.active_model, run: () => go({ page: 'session', id: s.id, tab: 'chat' }) });
  }
  return out;
}

export function Palette(): VNode | null {
  const [q, setQ] = useState('');
  const [at, setAt] = useState(0);
  const input = useRef<HTMLInputElement>(null);
  useEffect(() => {
    if (paletteOpen.value) {
      setQ('');
      setAt(0);
      void refreshSessions();
      setTimeout(() => input.current?.focus(), 0);
    }
  }, [paletteOpen.value]);
  if (!paletteOpen.value) return null;
  const words = q.toLowerCase().split(/\s+/).filter(Boolean);
  const list = commands().filter((c) => words.every((w) => (c.label + ' ' + (c.hint ?? '')).toLowerCase().includes(w))).slice(0, 12);
  const run = (c: Cmd | undefined) => {
    if (!c) return;
    paletteOpen.value = false;
    c.run();
  };
  const onKey = (e: KeyboardEvent) => {
    if (e.key === 'ArrowDown') (e.preventDefault(), setAt((at + 1) % Math.max(1, list.length)));
    else if (e.key === 'ArrowUp') (e.preventDefault(), setAt((at - 1 + list.length) % Math.max(1, list.length)));
    else if (e.key === 'Enter') (e.preventDefault(), run(list[at]));
    else if (e.key === 'Escape') (e.preventDefault(), (paletteOpen.value = false));
  };
  return html`<div class="palette-backdrop" onClick=${() => (paletteOpen.value = false)}>
    <div class="palette" role="dialog" aria-label="command palette" onClick=${(e: Event) => e.stopPropagation()}>
      <input ref=${input} id="palette-input" placeholder="Jump to a session or run a command" value=${q}
        onInput=${(e: Event) => (setQ((e.target as HTMLInputElement).value), setAt(0))} onKeyDown=${onKey} />
      <ul>
        ${list.map(
          (c, i) => html`<li key=${c.id} class=${i === at ? 'active' : ''} onMouseEnter=${() => setAt(i)} onClick=${() => run(c)}>
            <span>${c.label}</span>${c.hint ? html`<span class="muted">${c.hint}</span>` : null}
          </li>`,
        )}
        ${list.length === 0 ? html`<li class="muted">No match</li>` : null}
      </ul>
    </div>
  </div>`;
}
