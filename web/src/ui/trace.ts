// Trace mode: every event the page received on its preset:full
// subscription, in id order, with filters by type, family and session, a
// text search, follow-tail, and each event's JSON; above it, the
// waterfall of turns, model calls, tools and delegations.
import { html } from 'htm/preact';
import type { VNode } from 'preact';
import { useEffect, useMemo, useRef, useState } from 'preact/hooks';
import { EVENT_FAMILY, type RawEnvelope } from '../client/index';
import { clock, oneLine, shortId } from './format';
import type { LiveSession } from './live';
import { VirtualList } from './virtual';
import { Waterfall } from './waterfall';
import { InlineToggle } from './workers';

export const ROW_HEIGHT = 26;

const jsonCache = new WeakMap<RawEnvelope, string>();
/** The event's JSON, encoded once. */
export function eventJSON(e: RawEnvelope): string {
  let s = jsonCache.get(e);
  if (s === undefined) {
    s = JSON.stringify(e);
    jsonCache.set(e, s);
  }
  return s;
}

function familyOf(t: string): string {
  return (EVENT_FAMILY as Record<string, string>)[t] ?? 'unknown';
}

/** A one-line gist of an event's payload for its row. */
function gist(e: RawEnvelope): string {
  const p = (e.payload ?? {}) as Record<string, unknown>;
  switch (e.type) {
    case 'text.delta':
    case 'thinking.delta':
      return JSON.stringify(p.text ?? '');
    case 'tool.use_input_delta':
      return String(p.partial_json ?? '');
    case 'turn.started': {
      const m = p.user_message as { content?: { text?: string }[] } | undefined;
      return JSON.stringify(m?.content?.map((b) => b.text ?? '').join(' ') ?? '');
    }
    case 'route.decided':
      return `${p.model} (${p.reason}; policy ${p.policy_version})`;
    case 'tool.called':
    case 'tool.completed':
    case 'tool.failed':
      return `${p.tool_name} ${p.tool_use_id}${p.error_class ? ' ' + p.error_class : ''}${p.summary ? ' · ' + p.summary : ''}`;
    case 'llm.call_started':
    case 'llm.call_completed':
    case 'llm.call_failed':
      return `${p.model ?? ''} ${p.message_id ?? ''}${p.stop_reason ? ' ' + p.stop_reason : ''}${p.error_class ? ' ' + p.error_class : ''}`;
    case 'delegate.started':
      return `${p.worker_session_id} ${JSON.stringify(p.task ?? '')}`;
    default:
      return oneLine(JSON.stringify(p), 160);
  }
}

interface Filters {
  type: string;
  family: string;
  session: string;
  q: string;
  /** Show the streaming deltas (one row per token): off by default. */
  deltas: boolean;
  /** Show the bus's meta events (clients attaching, slow handlers): off by default. */
  meta: boolean;
}

/** The streaming deltas folded by default: the message.start / message.complete rows stay. */
const DELTAS = new Set(['text.delta', 'thinking.delta', 'tool.use_input_delta']);

export function isMeta(type: string): boolean {
  return type.startsWith('bus.');
}

/**
 * The filtered view of the event log, extended incrementally: new events
 * are tested once; a filter change or a trimmed log rebuilds it.
 */
class Filtered {
  rows: RawEnvelope[] = [];
  private seen = 0;
  private head: RawEnvelope | undefined;
  private key = '';

  update(all: RawEnvelope[], f: Filters, epoch: number): RawEnvelope[] {
    const key = JSON.stringify(f) + '#' + epoch;
    if (key !== this.key || all[0] !== this.head || all.length < this.seen) {
      this.key = key;
      this.rows = [];
      this.seen = 0;
      this.head = all[0];
    }
    if (this.seen === all.length) return this.rows;
    const q = f.q.toLowerCase();
    const next = this.rows; // extended in place: the list reads its length
    for (let i = this.seen; i < all.length; i++) {
      const e = all[i];
      if (f.type && e.type !== f.type) continue;
      if (!f.type && !f.deltas && DELTAS.has(e.type)) continue;
      if (!f.type && !f.meta && isMeta(e.type)) continue;
      if (f.family && familyOf(e.type) !== f.family) continue;
      if (f.session && e.session_id !== f.session) continue;
      if (q && !eventJSON(e).toLowerCase().includes(q)) continue;
      next.push(e);
    }
    this.seen = all.length;
    this.rows = next;
    return next;
  }
}

/** Counts the deltas and meta events of the log, incrementally (the fold note). */
class FoldCount {
  deltas = 0;
  meta = 0;
  private seen = 0;
  private head: RawEnvelope | undefined;

  update(all: RawEnvelope[]): this {
    if (all[0] !== this.head || all.length < this.seen) {
      this.deltas = this.meta = this.seen = 0;
      this.head = all[0];
    }
    for (let i = this.seen; i < all.length; i++) {
      const t = all[i]!.type;
      if (DELTAS.has(t)) this.deltas++;
      else if (isMeta(t)) this.meta++;
    }
    this.seen = all.length;
    return this;
  }
}

function foldNote(c: FoldCount, f: Filters): VNode | null {
  if (f.type) return null;
  const parts = [!f.deltas && c.deltas ? `${c.deltas} deltas` : '', !f.meta && c.meta ? `${c.meta} meta` : ''].filter(Boolean);
  if (!parts.length) return null;
  return html`<span class="muted small" id="trace-folded">(${parts.join(', ')} folded)</span>`;
}

export function TracePage(p: { live: LiveSession }): VNode {
  const { live } = p;
  live.ticker.tick.value;
  const [f, setF] = useState<Filters>({ type: '', family: '', session: '', q: '', deltas: false, meta: false });
  const [follow, setFollow] = useState(true);
  const [sel, setSel] = useState<RawEnvelope | null>(null);
  const [showWaterfall, setShowWaterfall] = useState(true);
  const filtered = useRef(new Filtered()).current;
  const counts = useRef(new FoldCount()).current;
  useEffect(() => {
    void live.loadHistory();
  }, [live]);
  const rows = filtered.update(live.events, f, live.eventsEpoch);
  const types = useMemo(() => new Set<string>(), []);
  const sessions = useMemo(() => new Set<string>(), []);
  const scanned = useRef(0);
  const epoch = useRef(0);
  if (scanned.current > live.events.length || epoch.current !== live.eventsEpoch) scanned.current = 0;
  epoch.current = live.eventsEpoch;
  for (let i = scanned.current; i < live.events.length; i++) {
    types.add(live.events[i].type);
    sessions.add(live.events[i].session_id);
  }
  scanned.current = live.events.length;
  const set = (k: keyof Filters) => (e: Event) => setF({ ...f, [k]: (e.target as HTMLInputElement).value });

  return html`<div class="trace-page">
    ${showWaterfall ? html`<${Waterfall} events=${live.events} epoch=${live.eventsEpoch} version=${live.eventsVersion} onPick=${setSel} />` : null}
    <div class="toolbar trace-filters">
      <select aria-label="type" id="trace-type" value=${f.type} onChange=${set('type')}>
        <option value="">all types</option>
        ${[...types].sort().map((t) => html`<option key=${t} value=${t}>${t}</option>`)}
      </select>
      <select aria-label="family" id="trace-family" value=${f.family} onChange=${set('family')}>
        <option value="">both families</option>
        <option value="catalog">catalog</option>
        <option value="streaming">streaming</option>
      </select>
      <select aria-label="session" id="trace-session" value=${f.session} onChange=${set('session')}>
        <option value="">all sessions</option>
        ${[...sessions].map((s) => html`<option key=${s} value=${s}>${s === live.sessionId ? 'this session' : 'worker ' + shortId(s)}</option>`)}
      </select>
      <input type="search" id="trace-search" placeholder="search events" value=${f.q} onInput=${set('q')} aria-label="search" />
      <label class="toggle" title="One row per streamed token"><input type="checkbox" id="trace-deltas" checked=${f.deltas} onChange=${(e: Event) => setF({ ...f, deltas: (e.target as HTMLInputElement).checked })} /> deltas</label>
      <label class="toggle" title="bus.* events: clients attaching and leaving, slow handlers"><input type="checkbox" id="trace-meta" checked=${f.meta} onChange=${(e: Event) => setF({ ...f, meta: (e.target as HTMLInputElement).checked })} /> meta</label>
      <label class="toggle"><input type="checkbox" checked=${follow} onChange=${(e: Event) => setFollow((e.target as HTMLInputElement).checked)} /> follow tail</label>
      <label class="toggle"><input type="checkbox" checked=${showWaterfall} onChange=${(e: Event) => setShowWaterfall((e.target as HTMLInputElement).checked)} /> timeline</label>
      <${InlineToggle} live=${live} />
      <span class="spacer"></span>
      ${live.historyNote.value ? html`<span class="muted" id="trace-history">${live.historyNote.value} ·</span>` : null}
      <span class="muted" id="trace-count">${rows.length} of ${live.events.length} events</span>
      ${foldNote(counts.update(live.events), f)}
    </div>
    ${live.gaps.length
      ? html`<div class="notice warn">The log restarted from a fresh snapshot ${live.gaps.length} time${live.gaps.length === 1 ? '' : 's'} (${live.gaps.map((g) => g.why).join(', ')}): events in between are not listed.</div>`
      : null}
    <div class="trace-body">
      <div class="trace-log">
        <div class="trow trow-head"><span>id</span><span>time</span><span>session</span><span>type</span><span>actor</span><span>payload</span></div>
        <${VirtualList}
          class="events"
          label="events"
          items=${rows}
          version=${live.eventsVersion}
          fixed=${true}
          estimate=${ROW_HEIGHT}
          follow=${follow}
          overscan=${10}
          keyOf=${(e: RawEnvelope) => e.id + e.session_id}
          render=${(e: RawEnvelope) => html`<div
            class=${'trow fam-' + familyOf(e.type) + (sel === e ? ' selected' : '')}
            data-event-id=${e.id}
            data-type=${e.type}
            onClick=${() => setSel(e)}
          >
            <span class="mono">${e.id.slice(-8)}</span>
            <span class="mono">${clock(e.ts)}</span>
            <span class=${e.session_id === live.sessionId ? 'muted' : 'tag'}>${e.session_id === live.sessionId ? '·' : shortId(e.session_id)}</span>
            <span class="etype">${e.type}</span>
            <span class="muted">${e.actor}</span>
            <span class="gist">${gist(e)}</span>
          </div>`}
        />
      </div>
      ${sel
        ? html`<aside class="json-panel" aria-label="event JSON">
            <div class="toolbar"><strong>${sel.type}</strong><span class="spacer"></span><button class="link" onClick=${() => setSel(null)}>close</button></div>
            <pre id="event-json">${JSON.stringify(sel, null, 2)}</pre>
          </aside>`
        : null}
    </div>
  </div>`;
}
