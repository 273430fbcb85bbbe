// Workers: a card per delegation (from the snapshot's workers and the
// delegate.* events): task, model, status, cost, result. A card opens the
// worker's own session page (its own WebSocket, spec §8); the page of a
// worker links back to its planner. The inline toggle re-subscribes with
// include_worker_sessions: the workers' messages then appear in the
// conversation and their events in trace mode, each marked with its
// session.
import { html } from 'htm/preact';
import type { VNode } from 'preact';
import type { Worker } from '../client/index';
import { oneLine, shortId, usd } from './format';
import type { LiveSession } from './live';
import { McpServers } from './mcp';
import { href } from './route';

export function InlineToggle(p: { live: LiveSession }): VNode {
  const on = p.live.inline.value;
  return html`<label class="toggle" title="Also follow every worker session below this one, marked with its session">
    <input type="checkbox" id="inline-toggle" checked=${on} onChange=${(e: Event) => p.live.setInline((e.target as HTMLInputElement).checked)} />
    inline workers
  </label>`;
}

export function WorkerCard(p: { w: Worker }): VNode {
  const { w } = p;
  return html`<a class=${'card worker st-' + w.status} href=${href({ page: 'session', id: w.session_id, tab: 'chat' })} data-worker=${w.session_id}>
    <div class="card-head">
      <span class=${'badge st-' + w.status}>${w.status}</span>
      <span class="mono">${shortId(w.session_id)}</span>
      <span class="spacer"></span>
      ${w.model ? html`<span class="model">${w.model}</span>` : null}
      <span class="cost">${usd(w.cost_usd)}</span>
    </div>
    <div class="task">${oneLine(w.task || '(no task)', 240)}</div>
    ${w.summary ? html`<div class="result">${oneLine(w.summary, 400)}</div>` : null}
    ${w.failure_mode ? html`<div class="tool-error">${w.failure_mode}</div>` : null}
    <div class="drill">Open the worker's live stream →</div>
  </a>`;
}

export function WorkersPage(p: { live: LiveSession }): VNode {
  const { live } = p;
  live.ticker.tick.value;
  const ws = [...live.view.workers.values()];
  return html`<div class="workers-page">
    <div class="toolbar">
      <span class="muted">${ws.length} worker${ws.length === 1 ? '' : 's'}; running ${ws.filter((w) => w.status === 'running').length}</span>
      <span class="spacer"></span>
      <${InlineToggle} live=${live} />
    </div>
    ${ws.length === 0
      ? html`<div class="empty">No delegations yet. When the agent uses the <code>delegate</code> tool, each worker appears here as it runs.</div>`
      : html`<div class="cards">${ws.map((w) => html`<${WorkerCard} key=${w.session_id} w=${w} />`)}</div>`}
    <${McpServers} sessionId=${live.sessionId} />
  </div>`;
}
