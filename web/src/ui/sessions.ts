// Sessions: a live list (polled) with workers nested under their
// planner, a filter, and a form to create a session.
import { html } from 'htm/preact';
import type { VNode } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { signal } from '@preact/signals';
import type { SessionSummary } from '../client/index';
import { api } from './api';
import { ago, shortId, usd } from './format';
import { go, href } from './route';

/** The list, shared with the palette; refreshed while the page shows. */
export const sessions = signal<SessionSummary[]>([]);
export const listError = signal<string>('');
export const POLL_MS = 2000;

export async function refreshSessions(): Promise<void> {
  try {
    sessions.value = await api.listSessions();
    listError.value = '';
  } catch (e) {
    listError.value = 'Could not list sessions: ' + (e as Error).message;
  }
}

/**
 * The server's title (the first user message, cut at 80 characters),
 * or a placeholder before the first turn.
 */
export function titleOf(s: SessionSummary): string {
  return s.title || (s.parent_session_id ? 'worker' : 'untitled');
}

interface Node {
  s: SessionSummary;
  depth: number;
}

/** Planners first (newest first), each followed by its workers (nested). */
export function nest(list: SessionSummary[]): Node[] {
  const byParent = new Map<string, SessionSummary[]>();
  const ids = new Set(list.map((s) => s.id));
  const roots: SessionSummary[] = [];
  for (const s of list) {
    const p = s.parent_session_id;
    if (p && ids.has(p)) {
      if (!byParent.has(p)) byParent.set(p, []);
      byParent.get(p)!.push(s);
    } else roots.push(s);
  }
  const newest = (a: SessionSummary, b: SessionSummary) => (a.created_at < b.created_at ? 1 : -1);
  roots.sort(newest);
  const out: Node[] = [];
  const walk = (s: SessionSummary, depth: number) => {
    out.push({ s, depth });
    for (const w of (byParent.get(s.id) ?? []).sort((a, b) => (a.created_at < b.created_at ? -1 : 1))) walk(w, depth + 1);
  };
  for (const r of roots) walk(r, 0);
  return out;
}

function status(s: SessionSummary): string {
  return s.current_turn_status ?? 'idle';
}

export function SessionsPage(): VNode {
  const [filter, setFilter] = useState('');
  const [, setNow] = useState(0);
  useEffect(() => {
    void refreshSessions();
    const t = setInterval(() => {
      void refreshSessions();
      setNow(Date.now());
    }, POLL_MS);
    return () => clearInterval(t);
  }, []);
  const q = filter.trim().toLowerCase();
  const rows = nest(sessions.value).filter(
    ({ s }) =>
      !q ||
      [s.id, s.active_model, s.workspace_path, titleOf(s), status(s)].some((x) => (x ?? '').toLowerCase().includes(q)),
  );
  return html`<div class="sessions-page">
    <${NewSession} />
    <div class="toolbar">
      <input type="search" id="session-filter" placeholder="Filter by title, id, model, workspace or status" value=${filter}
        onInput=${(e: Event) => setFilter((e.target as HTMLInputElement).value)} aria-label="filter sessions" />
      <span class="muted">${rows.length} of ${sessions.value.length}</span>
    </div>
    ${listError.value ? html`<div class="notice error">${listError.value}</div>` : null}
    <table class="sessions" aria-label="sessions">
      <thead><tr><th>title</th><th>id</th><th>status</th><th>model</th><th class="num">turns</th><th class="num">cost</th><th>last activity</th><th>workspace</th></tr></thead>
      <tbody>
        ${rows.map(
          ({ s, depth }) => html`<tr key=${s.id} class=${depth ? 'worker-row' : ''} data-session=${s.id}
              onClick=${() => go({ page: 'session', id: s.id, tab: 'chat' })}>
            <td class="title" style=${{ paddingLeft: 8 + depth * 20 + 'px' }}>
              ${depth ? html`<span class="nest">↳ </span>` : null}<a href=${href({ page: 'session', id: s.id, tab: 'chat' })}>${titleOf(s)}</a>
            </td>
            <td class="mono">${shortId(s.id)}</td>
            <td><span class=${'badge st-' + status(s)}>${status(s).replace('_', ' ')}</span></td>
            <td>${s.active_model}</td>
            <td class="num">${s.turn_count}</td>
            <td class="num">${usd(s.cost_so_far_usd)}</td>
            <td>${ago(lastActivity(s))}</td>
            <td class="mono path" title=${s.workspace_path}>${s.workspace_path}</td>
          </tr>`,
        )}
      </tbody>
    </table>
    ${sessions.value.length === 0 && !listError.value ? html`<div class="empty">No sessions yet. Create one above.</div>` : null}
  </div>`;
}

/** Now while a turn runs; else the server's last activity (the newest event). */
function lastActivity(s: SessionSummary): string {
  return s.current_turn_id ? new Date().toISOString() : s.last_activity_at;
}

export const showNew = signal(false);

export function NewSession(): VNode {
  const [ws, setWs] = useState(() => {
    try {
      return localStorage.getItem('metis.workspace') || sessions.value[0]?.workspace_path || '';
    } catch {
      return sessions.value[0]?.workspace_path ?? '';
    }
  });
  const [model, setModel] = useState('');
  const [err, setErr] = useState('');
  // Suggest the workspace of the newest session once the list arrives.
  const known = sessions.value[0]?.workspace_path;
  useEffect(() => {
    if (!ws && known) setWs(known);
  }, [known]);
  const [busy, setBusy] = useState(false);
  const create = async (e: Event) => {
    e.preventDefault();
    setBusy(true);
    setErr('');
    try {
      const s = await api.createSession({ workspace_path: ws.trim(), model: model.trim() || undefined });
      try {
        localStorage.setItem('metis.workspace', ws.trim());
      } catch {
        /* storage disabled */
      }
      showNew.value = false;
      void refreshSessions();
      go({ page: 'session', id: s.id, tab: 'chat' });
    } catch (x) {
      setErr((x as Error).message);
    } finally {
      setBusy(false);
    }
  };
  return html`<form class="new-session" onSubmit=${create}>
    <strong>New session</strong>
    <input id="new-workspace" required placeholder="/absolute/path/to/workspace" value=${ws}
      onInput=${(e: Event) => setWs((e.target as HTMLInputElement).value)} aria-label="workspace path" />
    <input id="new-model" placeholder="model (default: the server's)" value=${model}
      onInput=${(e: Event) => setModel((e.target as HTMLInputElement).value)} aria-label="model" />
    <button class="primary" type="submit" disabled=${busy || !ws.trim()}>Create</button>
    ${err ? html`<span class="error-line">${err}</span>` : null}
  </form>`;
}
