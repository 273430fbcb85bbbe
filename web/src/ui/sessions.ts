// Sessions: a live list (polled) with workers nested under their
// planner, a filter, and a form to create a session.
import { html } from 'htm/preact';
import type { VNode } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { signal } from '@preact/signals';
import { ApiError, type ModelList, type SessionSummary } from '../client/index';
import { api } from './api';
import { McpServers } from './mcp';
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
 * A session.updated seen on an open session page, applied to the listed
 * row at once (the list's next poll says the same): its title, and
 * archived, which moves it between the list and the archived view.
 */
export function editListed(id: string, edit: Record<string, unknown>): void {
  const title = edit['title'];
  const archived = edit['archived'];
  const i = sessions.value.findIndex((s) => s.id === id);
  if (i < 0 || (typeof title !== 'string' && typeof archived !== 'boolean')) return;
  const row: SessionSummary = { ...sessions.value[i]! };
  if (typeof title === 'string') row.title = title;
  if (archived === true) row.archived = true;
  else if (archived === false) delete row.archived;
  const next = [...sessions.value];
  next[i] = row;
  sessions.value = next;
}

/** The title as shown: the server's as is (it derives a short clean one, and keeps a rename as typed), or a placeholder before the first turn. */
export function titleOf(s: SessionSummary): string {
  return s.title || (s.parent_session_id ? 'worker' : 'untitled');
}

interface Node {
  s: SessionSummary;
  depth: number;
  /** The top session of its tree (archived goes by it). */
  root: SessionSummary;
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
  const walk = (s: SessionSummary, depth: number, root: SessionSummary) => {
    out.push({ s, depth, root });
    for (const w of (byParent.get(s.id) ?? []).sort((a, b) => (a.created_at < b.created_at ? -1 : 1))) walk(w, depth + 1, root);
  };
  for (const r of roots) walk(r, 0, r);
  return out;
}

function status(s: SessionSummary): string {
  return s.current_turn_status ?? 'idle';
}

export function SessionsPage(): VNode {
  const [filter, setFilter] = useState('');
  const [archived, setArchived] = useState(false);
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
  const all = sessions.value;
  const nArchived = all.filter((s) => s.archived && !s.parent_session_id).length;
  const waiting = all.reduce((n, s) => n + (s.parent_session_id ? 0 : (s.pending_approvals?.length ?? 0)), 0);
  useEffect(() => {
    document.title = (waiting ? `(${waiting}) waiting · ` : '') + 'metis';
  }, [waiting]);
  const rows = nest(all).filter(
    ({ s, root }) =>
      !!root.archived === archived &&
      (!q || [s.id, s.active_model, s.workspace_path, titleOf(s), status(s)].some((x) => (x ?? '').toLowerCase().includes(q))),
  );
  return html`<div class="sessions-page">
    <${NewSession} />
    <div class="toolbar">
      <input type="search" id="session-filter" placeholder="Filter by title, id, model, workspace or status" value=${filter}
        onInput=${(e: Event) => setFilter((e.target as HTMLInputElement).value)} aria-label="filter sessions" />
      <label class="toggle" title="Show the archived sessions instead">
        <input type="checkbox" id="show-archived" checked=${archived} onChange=${(e: Event) => setArchived((e.target as HTMLInputElement).checked)} />
        archived (${nArchived})
      </label>
      <span class="muted">${rows.length} of ${all.length}</span>
    </div>
    ${listError.value ? html`<div class="notice error">${listError.value}</div>` : null}
    <table class="sessions" aria-label="sessions">
      <thead><tr><th>title</th><th class="c-id">id</th><th>status</th><th class="c-model">model</th><th class="num c-turns">turns</th><th class="num c-cost">cost</th><th class="c-last">last activity</th><th class="c-ws">workspace</th><th class="c-act"></th></tr></thead>
      <tbody>
        ${rows.map(({ s, depth }) => html`<${SessionRow} key=${s.id} s=${s} depth=${depth} />`)}
      </tbody>
    </table>
    ${all.length === 0 && !listError.value ? html`<div class="empty">No sessions yet. Create one above.</div>` : null}
    ${all.length > 0 && rows.length === 0 && archived ? html`<div class="empty">No archived sessions.</div>` : null}
    <${McpServers} />
  </div>`;
}

function SessionRow(p: { s: SessionSummary; depth: number }): VNode {
  const { s, depth } = p;
  const waiting = s.pending_approvals?.length ?? 0;
  const open = () => go({ page: 'session', id: s.id, tab: 'chat' });
  const stop = (e: Event) => e.stopPropagation();
  const archive = async (e: Event): Promise<void> => {
    stop(e);
    try {
      await api.archiveSession(s.id, !s.archived);
    } catch (x) {
      listError.value = 'Could not archive: ' + (x as Error).message;
    }
    void refreshSessions();
  };
  const remove = async (e: Event): Promise<void> => {
    stop(e);
    if (!confirm(`Delete "${titleOf(s)}" and its workers for good? Its history and trace go too.`)) return;
    try {
      await api.deleteSession(s.id);
    } catch (x) {
      listError.value =
        x instanceof ApiError && x.code === 'turn_in_flight' ? 'A turn of that session is running: cancel it first, then delete.' : 'Could not delete: ' + (x as Error).message;
    }
    void refreshSessions();
  };
  return html`<tr class=${(depth ? 'worker-row' : '') + (s.archived ? ' archived' : '')} data-session=${s.id} onClick=${open}>
    <td class="title" style=${{ paddingLeft: 8 + depth * 16 + 'px' }}>
      ${depth ? html`<span class="nest">↳ </span>` : null}<a href=${href({ page: 'session', id: s.id, tab: 'chat' })} title=${s.title}>${titleOf(s)}</a>
      ${waiting ? html` <span class="badge st-waiting" title="tool calls wait for your answer">${waiting} waiting</span>` : null}
      <div class="row-sub">${s.active_model} · ${ago(lastActivity(s))}</div>
    </td>
    <td class="mono c-id">${shortId(s.id)}</td>
    <td><span class=${'badge st-' + status(s)}>${status(s).replace('_', ' ')}</span></td>
    <td class="c-model">${s.active_model}</td>
    <td class="num c-turns">${s.turn_count}</td>
    <td class="num c-cost">${usd(s.cost_so_far_usd)}</td>
    <td class="c-last">${ago(lastActivity(s))}</td>
    <td class="mono path c-ws" title=${s.workspace_path}>${s.workspace_path}</td>
    <td class="c-act" onClick=${stop}>
      ${depth
        ? null
        : html`<button class="small ghost" data-action="archive" onClick=${archive} title=${s.archived ? 'Bring back to the list' : 'Archive: hide from the list, keep everything'}>${s.archived ? 'Unarchive' : 'Archive'}</button>
          <button class="small ghost danger-text" data-action="delete" onClick=${remove} title="Delete for good">Delete</button>`}
    </td>
  </tr>`;
}

/** Now while a turn runs; else the server's last activity (the newest event). */
function lastActivity(s: SessionSummary): string {
  return s.current_turn_id ? new Date().toISOString() : s.last_activity_at;
}

export const showNew = signal(false);

/** Workspaces already used, newest first (the list's and this browser's). */
function knownWorkspaces(): string[] {
  const out: string[] = [];
  try {
    const saved = JSON.parse(localStorage.getItem('metis.workspaces') || '[]') as unknown;
    if (Array.isArray(saved)) for (const w of saved) if (typeof w === 'string' && w) out.push(w);
  } catch {
    /* storage disabled */
  }
  for (const s of [...sessions.value].sort((a, b) => (a.last_activity_at < b.last_activity_at ? 1 : -1))) {
    if (!s.parent_session_id && s.workspace_path) out.push(s.workspace_path);
  }
  return [...new Set(out)].slice(0, 20);
}

function remember(ws: string): void {
  try {
    localStorage.setItem('metis.workspaces', JSON.stringify([ws, ...knownWorkspaces().filter((w) => w !== ws)].slice(0, 20)));
  } catch {
    /* storage disabled */
  }
}

/** The server's model list, loaded once per page. */
const models = signal<ModelList | null>(null);
async function loadModels(): Promise<void> {
  if (models.value) return;
  try {
    models.value = await api.models();
  } catch {
    models.value = { default: '', models: [], unavailable: [] };
  }
}

const OTHER = '__other__';

export function NewSession(): VNode {
  const known = knownWorkspaces();
  const [pick, setPick] = useState('');
  const [typed, setTyped] = useState('');
  const [model, setModel] = useState('');
  const [err, setErr] = useState('');
  const [busy, setBusy] = useState(false);
  useEffect(() => {
    void loadModels();
  }, []);
  const choice = pick || known[0] || OTHER;
  const ws = choice === OTHER ? typed.trim() : choice;
  const m = models.value;
  const create = async (e: Event) => {
    e.preventDefault();
    setBusy(true);
    setErr('');
    try {
      const s = await api.createSession({ workspace_path: ws, model: model || undefined });
      remember(ws);
      showNew.value = false;
      void refreshSessions();
      go({ page: 'session', id: s.id, tab: 'chat' });
    } catch (x) {
      setErr((x as Error).message);
    } finally {
      setBusy(false);
    }
  };
  const base = (p: string) => p.replace(/\/+$/, '').split('/').pop() || p;
  return html`<form class="new-session" onSubmit=${create}>
    <strong>New session</strong>
    ${known.length
      ? html`<select id="new-workspace-pick" aria-label="workspace" value=${choice} onChange=${(e: Event) => setPick((e.target as HTMLSelectElement).value)}>
          ${known.map((w) => html`<option key=${w} value=${w} title=${w}>${base(w)} — ${w}</option>`)}
          <option value=${OTHER}>Another directory…</option>
        </select>`
      : null}
    ${choice === OTHER
      ? html`<input id="new-workspace" required placeholder="/absolute/path/to/the/project" value=${typed}
          onInput=${(e: Event) => setTyped((e.target as HTMLInputElement).value)} aria-label="workspace path" />`
      : null}
    <select id="new-model" aria-label="model" value=${model} onChange=${(e: Event) => setModel((e.target as HTMLSelectElement).value)}
      title=${m?.unavailable.length ? 'Not available: ' + m.unavailable.map((u) => u.provider + ' (' + u.reason + ')').join('; ') : ''}>
      <option value="">${m?.default ? 'default: ' + m.default : 'default model'}</option>
      ${(m?.models ?? []).filter((x) => x.id !== m?.default).map((x) => html`<option key=${x.id} value=${x.id}>${x.id}</option>`)}
    </select>
    <button class="primary" type="submit" id="create-session" disabled=${busy || !ws}>Create</button>
    ${err ? html`<span class="error-line">${err}</span>` : null}
  </form>`;
}
