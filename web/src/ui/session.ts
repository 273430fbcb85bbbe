// The session page: header (title, model, status, cost and tokens,
// connection), the connection banner and notices, the tabs
// (conversation, workers, trace), and export.
import { html } from 'htm/preact';
import type { VNode } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { signal } from '@preact/signals';
import { ApiError, type Mode } from '../client/index';
import { api } from './api';
import { Conversation, cancelTurn } from './conversation';
import { shortId, tokens, usd } from './format';
import { LiveSession } from './live';
import { href, type Tab } from './route';
import { TracePage, eventJSON } from './trace';
import { WorkersPage } from './workers';

/** The open session page's LiveSession (for the palette). */
export const current = signal<LiveSession | null>(null);

export function SessionPage(p: { id: string; tab: Tab }): VNode {
  const [live, setLive] = useState<LiveSession | null>(null);
  useEffect(() => {
    const l = new LiveSession(p.id);
    setLive(l);
    current.value = l;
    l.start();
    return () => {
      l.stop();
      if (current.value === l) current.value = null;
    };
  }, [p.id]);
  if (!live || live.sessionId !== p.id) return html`<div class="empty">Connecting…</div>`;
  return html`<div class="session-page">
    <${Header} live=${live} tab=${p.tab} />
    <${ConnBanner} live=${live} />
    ${p.tab === 'chat' ? html`<${Conversation} live=${live} />` : null}
    ${p.tab === 'workers' ? html`<${WorkersPage} live=${live} />` : null}
    ${p.tab === 'trace' ? html`<${TracePage} live=${live} />` : null}
  </div>`;
}

function Header(p: { live: LiveSession; tab: Tab }): VNode {
  const { live } = p;
  live.ticker.tick.value;
  const v = live.view;
  const s = v.session;
  // The server's title as is: the summary's (the snapshot's, kept current
  // by session.updated, so any client's rename shows at once), else the
  // one fetched when the first turn started after the snapshot or this
  // page's rename, else a placeholder.
  const title = s?.title || live.title.value || (s?.parent_session_id ? 'worker session' : 'new session');
  const waiting = v.pendingApprovals.length;
  useEffect(() => {
    const was = document.title;
    document.title = (waiting ? `(${waiting}) waiting · ` : '') + title + ' · metis';
    return () => {
      document.title = was;
    };
  }, [title, waiting]);
  const tab = (t: Tab, label: string, extra = '') =>
    html`<a class=${'tab' + (p.tab === t ? ' active' : '')} id=${'tab-' + t} href=${href({ page: 'session', id: live.sessionId, tab: t })}>${label}${extra}</a>`;
  const nw = v.workers.size;
  const turn = v.turn;
  return html`<header class="session-head">
    <div class="row">
      ${s?.parent_session_id
        ? html`<a class="back" id="back-to-planner" href=${href({ page: 'session', id: s.parent_session_id, tab: 'workers' })}>← planner</a>`
        : html`<a class="back" href="#/">← sessions</a>`}
      <${Title} live=${live} title=${title} />
      ${s?.archived ? html`<span class="badge st-archived" id="archived-badge" title="archived: listed apart, still works">archived</span>` : null}
      ${waiting ? html`<span class="badge st-waiting" id="waiting-badge" title="tool calls wait for your answer">${waiting} waiting</span>` : null}
      <span class="spacer"></span>
      <${ConnBadge} live=${live} />
    </div>
    <div class="row meta">
      <span class="mono" title=${live.sessionId}>${shortId(live.sessionId)}</span>
      ${s?.forked_from
        ? html`<a class="forked-from" id="forked-from" href=${href({ page: 'session', id: s.forked_from.session_id, tab: 'chat' })}
            title=${`forked from ${s.forked_from.session_id} at message ${s.forked_from.message_id}`}>forked from ${shortId(s.forked_from.session_id)}</a>`
        : null}
      <span class="model-name">${s?.active_model ?? ''}</span>
      <span class=${'badge st-' + turn.status} id="turn-status">${turn.status.replace('_', ' ')}${turn.reason ? ' · ' + turn.reason : ''}</span>
      <span title="session cost, workers included" id="session-cost">${usd(v.costUsd)}</span>
      <${ModeSelect} live=${live} />
      <${ContextGauge} live=${live} />
      <span class="spacer"></span>
      ${turn.status === 'in_flight' && p.tab !== 'chat'
        ? html`<button class="danger small" id="cancel-turn" onClick=${() => cancelTurn(live)} title="Cancel the running turn">Cancel turn</button>`
        : null}
      <button class="small" id="export" onClick=${() => exportEvents(live)} title="Download the events this page received as JSON lines">Export</button>
    </div>
    <nav class="tabs">
      ${tab('chat', 'Conversation')} ${tab('workers', 'Workers', nw ? ` (${nw})` : '')} ${tab('trace', 'Trace')}
    </nav>
  </header>`;
}

/** The title; click (or the pencil) to rename it. */
function Title(p: { live: LiveSession; title: string }): VNode {
  const [editing, setEditing] = useState(false);
  const [text, setText] = useState('');
  const save = async (): Promise<void> => {
    const t = text.trim();
    setEditing(false);
    if (!t || t === p.title) return;
    try {
      const s = await api.renameSession(p.live.sessionId, t);
      p.live.title.value = s.title;
    } catch (e) {
      p.live.say('error', 'Could not rename: ' + (e as Error).message);
    }
  };
  if (editing) {
    return html`<form class="rename" onSubmit=${(e: Event) => (e.preventDefault(), void save())}>
      <input id="rename-input" value=${text} aria-label="session title" maxLength=${80}
        onInput=${(e: Event) => setText((e.target as HTMLInputElement).value)}
        onKeyDown=${(e: KeyboardEvent) => e.key === 'Escape' && setEditing(false)}
        onBlur=${() => void save()} ref=${(el: HTMLInputElement | null) => el && document.activeElement !== el && el.focus()} />
    </form>`;
  }
  return html`<h1 title=${p.title}>${p.title}</h1>
    <button class="small ghost icon" id="rename" aria-label="rename" title="Rename" onClick=${() => (setText(p.title), setEditing(true))}>✎</button>`;
}

// Each mode under its own name (the API's, the TUI's /mode): 'default' is a
// mode, not "whatever the server defaults to" (--default-mode may be another).
const MODES: { id: Mode; label: string; hint: string }[] = [
  { id: 'default', label: 'default (asks)', hint: 'reads run; edits, commands and fetches ask' },
  { id: 'accept_edits', label: 'accept edits', hint: 'edits inside the workspace run; commands ask' },
  { id: 'plan', label: 'plan (read-only)', hint: 'edits and commands are refused' },
  { id: 'auto', label: 'auto', hint: 'everything runs (commands in the sandbox)' },
];

/** The permission mode, switchable (PATCH /sessions/{id}). */
function ModeSelect(p: { live: LiveSession }): VNode | null {
  // The mode the session has (the snapshot's, then session.mode_changed): nothing is shown before it is known.
  const mode = p.live.view.mode as Mode;
  if (!mode) return null;
  const hint = MODES.find((m) => m.id === mode)?.hint ?? '';
  const change = async (e: Event): Promise<void> => {
    const sel = e.target as HTMLSelectElement;
    const next = sel.value as Mode;
    try {
      await api.setMode(p.live.sessionId, next);
    } catch (x) {
      sel.value = mode;
      p.live.say('error', 'Could not change the mode: ' + (x as Error).message);
    }
  };
  return html`<label class=${'mode mode-' + mode} title=${'Permission mode: ' + hint}>
    <span class="muted">mode</span>
    <select id="mode-select" value=${mode} onChange=${change} aria-label="permission mode">
      ${MODES.map((m) => html`<option key=${m.id} value=${m.id}>${m.label}</option>`)}
    </select>
  </label>`;
}

/** The conversation's size against the window, and the Compact button. */
function ContextGauge(p: { live: LiveSession }): VNode {
  const { live } = p;
  const c = live.view.context;
  const pct = c.window > 0 ? Math.min(100, (c.tokens / c.window) * 100) : 0;
  const level = pct >= 85 ? 'hot' : pct >= 60 ? 'warm' : 'ok';
  const compact = async (): Promise<void> => {
    try {
      await api.compact(live.sessionId);
    } catch (e) {
      live.say(e instanceof ApiError && e.code === 'turn_in_flight' ? 'warn' : 'error',
        e instanceof ApiError && e.code === 'turn_in_flight' ? 'A turn is running: compact when it ends.' : 'Could not compact: ' + (e as Error).message);
    }
  };
  const label = c.window > 0 ? `${tokens(c.tokens)} / ${tokens(c.window)}` : `${tokens(c.tokens)} tokens`;
  return html`<span class="context" id="context-gauge" title=${(c.window > 0 ? `context: ${c.tokens} of ${c.window} tokens (${Math.round(pct)}%)` : 'context: the window of this model is unknown') + (c.last ? '; ' + c.last : '')}>
    ${c.window > 0 ? html`<span class=${'gauge ' + level}><span class="gauge-fill" style=${{ width: pct + '%' }}></span></span>` : null}
    <span>${label}</span>
    ${c.compacting
      ? html`<span class="badge st-running" id="compacting">compacting…</span>`
      : html`<button class="small ghost" id="compact" onClick=${compact} disabled=${live.view.turn.status === 'in_flight'} title="Summarise the older conversation now (/compact)">Compact</button>`}
  </span>`;
}

function ConnBadge(p: { live: LiveSession }): VNode {
  const s = p.live.conn.value;
  return html`<span class=${'conn conn-' + s} id="conn-state" data-state=${s}>${s === 'live' ? '● live' : s}</span>`;
}

function ConnBanner(p: { live: LiveSession }): VNode | null {
  const { live } = p;
  const info = live.connInfo.value;
  const n = live.notice.value;
  return html`<div class="banners">
    ${live.banner.value
      ? html`<div class="banner reconnecting" id="reconnecting" role="status">
          Reconnecting…${info.closeReason ? ` (${info.closeReason.replace(/_/g, ' ')})` : info.closeCode ? ` (close ${info.closeCode})` : ''}
          ${info.delayMs ? html`<span class="muted"> next try in ${Math.ceil(info.delayMs / 100) / 10}s</span>` : null}
          <button class="link" onClick=${() => live.follower.reconnect()}>retry now</button>
        </div>`
      : null}
    ${n ? html`<div class=${'notice ' + n.kind} id="notice" role="status">${n.text}</div>` : null}
  </div>`;
}

/** Download the events the page received as JSON lines. */
export function exportEvents(live: LiveSession): void {
  const lines = live.events.map((e) => eventJSON(e)).join('\n') + (live.events.length ? '\n' : '');
  const url = URL.createObjectURL(new Blob([lines], { type: 'application/x-ndjson' }));
  const a = document.createElement('a');
  a.href = url;
  a.download = `${live.sessionId}.events.jsonl`;
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 1000);
}
