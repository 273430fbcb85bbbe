// The session page: header (title, model, status, cost and tokens,
// connection), the connection banner and notices, the tabs
// (conversation, workers, trace), and export.
import { html } from 'htm/preact';
import type { VNode } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { signal } from '@preact/signals';
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
  let tin = 0;
  let tout = 0;
  for (const m of v.messages) {
    if (m.usage) {
      tin += m.usage.input_tokens;
      tout += m.usage.output_tokens;
    }
  }
  const firstUser = v.messages.find((m) => m.role === 'user' && m.session_id === live.sessionId);
  // The snapshot's title; a session whose first turn started after the
  // snapshot takes it from that turn's user message, as shown.
  const title =
    s?.title ||
    firstUser?.blocks.map((b) => b.text ?? '').join(' ').replace(/\s+/g, ' ').trim() ||
    (s?.parent_session_id ? 'worker session' : 'new session');
  const tab = (t: Tab, label: string, extra = '') =>
    html`<a class=${'tab' + (p.tab === t ? ' active' : '')} id=${'tab-' + t} href=${href({ page: 'session', id: live.sessionId, tab: t })}>${label}${extra}</a>`;
  const nw = v.workers.size;
  const turn = v.turn;
  return html`<header class="session-head">
    <div class="row">
      ${s?.parent_session_id
        ? html`<a class="back" id="back-to-planner" href=${href({ page: 'session', id: s.parent_session_id, tab: 'workers' })}>← planner ${shortId(s.parent_session_id)}</a>`
        : html`<a class="back" href="#/">← sessions</a>`}
      <h1 title=${title}>${title}</h1>
      <span class="spacer"></span>
      <${ConnBadge} live=${live} />
    </div>
    <div class="row meta">
      <span class="mono" title=${live.sessionId}>${shortId(live.sessionId)}</span>
      <span>${s?.active_model ?? ''}</span>
      <span class=${'badge st-' + turn.status} id="turn-status">${turn.status.replace('_', ' ')}${turn.reason ? ' · ' + turn.reason : ''}</span>
      <span title="session cost, workers included" id="session-cost">${usd(v.costUsd)}</span>
      <span title="input / output tokens of the messages shown">${tokens(tin)} in · ${tokens(tout)} out</span>
      <span class="spacer"></span>
      ${turn.status === 'in_flight' ? html`<button class="danger small" onClick=${() => cancelTurn(live)}>Cancel turn</button>` : null}
      <button class="small" id="export" onClick=${() => exportEvents(live)} title="Download the events this page received as JSON lines">Export</button>
    </div>
    <nav class="tabs">
      ${tab('chat', 'Conversation')} ${tab('workers', 'Workers', nw ? ` (${nw})` : '')} ${tab('trace', 'Trace')}
    </nav>
  </header>`;
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
