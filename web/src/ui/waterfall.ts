// The waterfall: a timeline of one turn built from its events'
// timestamps: the turn, each model call, each tool, each delegation as a
// bar; routing decisions and policy reloads as markers. Spans are built
// incrementally as events arrive.
import { html } from 'htm/preact';
import type { VNode } from 'preact';
import { useRef, useState } from 'preact/hooks';
import type { RawEnvelope } from '../client/index';
import { ms, shortId } from './format';

export interface Span {
  key: string;
  kind: 'turn' | 'llm' | 'tool' | 'delegate' | 'route' | 'policy';
  label: string;
  session: string;
  start: number;
  end?: number; // open while running; markers have none
  status: string;
  first: RawEnvelope;
}

interface TurnSpans {
  id: string;
  start: number;
  spans: Span[];
}

export class SpanBuilder {
  turns: TurnSpans[] = [];
  private open = new Map<string, Span>();
  private seen = 0;
  private head: RawEnvelope | undefined;
  private lastTurn: TurnSpans | undefined;
  private epoch = 0;

  update(all: RawEnvelope[], epoch = 0): void {
    if (all[0] !== this.head || all.length < this.seen || epoch !== this.epoch) {
      this.epoch = epoch;
      this.turns = [];
      this.open.clear();
      this.seen = 0;
      this.head = all[0];
      this.lastTurn = undefined;
    }
    for (let i = this.seen; i < all.length; i++) this.add(all[i]);
    this.seen = all.length;
  }

  private turnFor(e: RawEnvelope): TurnSpans | undefined {
    if (!e.turn_id) return this.lastTurn;
    let t = this.turns.find((x) => x.id === e.turn_id);
    if (!t) {
      // A worker's turn belongs to the planner turn that delegated it.
      if (this.lastTurn && this.open.has('d:' + e.session_id)) return this.lastTurn;
      t = { id: e.turn_id, start: Date.parse(e.ts), spans: [] };
      this.turns.push(t);
      if (this.turns.length > 50) this.turns.shift();
    }
    return t;
  }

  private begin(e: RawEnvelope, key: string, kind: Span['kind'], label: string): void {
    const t = this.turnFor(e);
    if (!t) return;
    const s: Span = { key, kind, label, session: e.session_id, start: Date.parse(e.ts), status: 'running', first: e };
    t.spans.push(s);
    this.open.set(key, s);
    if (kind === 'turn') this.lastTurn = t;
  }

  private end(e: RawEnvelope, key: string, status: string): void {
    const s = this.open.get(key);
    if (!s) return;
    s.end = Date.parse(e.ts);
    s.status = status;
    this.open.delete(key);
  }

  private mark(e: RawEnvelope, kind: Span['kind'], label: string): void {
    const t = this.turnFor(e);
    if (!t) return;
    t.spans.push({ key: e.id, kind, label, session: e.session_id, start: Date.parse(e.ts), status: 'mark', first: e });
  }

  private add(e: RawEnvelope): void {
    const p = (e.payload ?? {}) as Record<string, any>;
    switch (e.type) {
      case 'turn.started':
        this.begin(e, 't:' + e.turn_id, 'turn', e.session_id === this.head?.session_id ? 'turn' : 'worker turn ' + shortId(e.session_id));
        break;
      case 'turn.completed':
        this.end(e, 't:' + e.turn_id, p.outcome ?? 'completed');
        break;
      case 'turn.cancelled':
        this.end(e, 't:' + e.turn_id, 'cancelled');
        break;
      case 'llm.call_started':
        this.begin(e, 'l:' + p.message_id, 'llm', `model call ${(p.call_index ?? 0) + 1} · ${p.model ?? ''}`);
        break;
      case 'llm.call_completed':
        this.end(e, 'l:' + p.message_id, 'completed');
        break;
      case 'llm.call_failed':
        this.end(e, 'l:' + p.message_id, p.error_class === 'cancelled' ? 'cancelled' : 'failed');
        break;
      case 'tool.called':
        this.begin(e, 'x:' + p.tool_use_id, 'tool', `tool ${p.tool_name}`);
        break;
      case 'tool.completed':
        this.end(e, 'x:' + p.tool_use_id, 'completed');
        break;
      case 'tool.failed':
        this.end(e, 'x:' + p.tool_use_id, p.error_class === 'cancelled' ? 'cancelled' : 'failed');
        break;
      case 'delegate.started':
        this.begin(e, 'd:' + p.worker_session_id, 'delegate', `delegate → ${shortId(p.worker_session_id)}`);
        break;
      case 'delegate.completed':
        this.end(e, 'd:' + p.worker_session_id, p.success === false ? 'failed' : 'completed');
        break;
      case 'delegate.failed':
        this.end(e, 'd:' + p.worker_session_id, 'failed');
        break;
      case 'route.decided':
        this.mark(e, 'route', `route → ${p.model} (${p.reason})`);
        break;
      case 'routing.policy_reloaded':
        this.mark(e, 'policy', `policy reloaded ${p.policy_version ?? ''}`);
        break;
    }
  }
}

/** Tick positions (ms from the turn's start): a 1-2-5 step giving at most 6 ticks. */
export function ticks(span: number): number[] {
  if (!(span > 0)) return [0];
  let step = 1;
  for (let k = 0; k < 40 && span / step > 5; k++) {
    const d = step.toString()[0];
    step = d === '1' ? step * 2 : d === '2' ? (step / 2) * 5 : step * 2;
  }
  const out: number[] = [];
  for (let t = 0; t <= span + 1e-9 && out.length < 8; t += step) out.push(t);
  return out;
}

function axisLabel(t: number, span: number): string {
  if (t === 0) return '0';
  if (span < 2000) return Math.round(t) + ' ms';
  if (span < 120_000) return (t / 1000).toFixed(t % 1000 ? 1 : 0) + ' s';
  return Math.floor(t / 60000) + 'm' + (t % 60000 ? ' ' + Math.round((t % 60000) / 1000) + 's' : '');
}

/**
 * `events` grows in place, so `version` (bumped on every change) is what
 * tells the signals integration, which skips components whose props are
 * unchanged, to render again.
 */
export function Waterfall(p: { events: RawEnvelope[]; epoch: number; version: number; onPick: (e: RawEnvelope) => void }): VNode {
  const b = useRef(new SpanBuilder()).current;
  b.update(p.events, p.epoch);
  const [pick, setPick] = useState<string | null>(null);
  const turn = (pick && b.turns.find((t) => t.id === pick)) || b.turns[b.turns.length - 1];
  if (!turn) return html`<div class="waterfall empty">The timeline fills in as turns run.</div>`;
  const now = Date.now();
  const t0 = turn.start;
  let t1 = t0 + 1;
  for (const s of turn.spans) t1 = Math.max(t1, s.end ?? (s.status === 'running' ? now : s.start));
  const span = t1 - t0;
  const pct = (t: number) => ((t - t0) / span) * 100;
  return html`<div class="waterfall" aria-label="timeline">
    <div class="toolbar">
      <strong>Timeline</strong>
      <select aria-label="turn" value=${turn.id} onChange=${(e: Event) => setPick((e.target as HTMLSelectElement).value)}>
        ${b.turns.map((t, i) => html`<option key=${t.id} value=${t.id}>turn ${i + 1} · ${shortId(t.id)}</option>`)}
      </select>
      <span class="muted">${ms(span)}</span>
    </div>
    <div class="wf-rows">
      <div class="wf-row wf-axis" aria-hidden="true">
        <span class="wf-label muted">time</span>
        <span class="wf-track wf-ticks">
          ${ticks(span).map((t) => html`<span key=${t} class="wf-tick" style=${{ left: (t / span) * 100 + '%' }}><span>${axisLabel(t, span)}</span></span>`)}
        </span>
        <span></span>
      </div>
      ${turn.spans.slice(0, 60).map(
        (s) => html`<div key=${s.key} class=${'wf-row wf-' + s.kind} onClick=${() => p.onPick(s.first)} title=${s.label}>
          <span class="wf-label">${s.label}</span>
          <span class="wf-track">
            ${s.status === 'mark'
              ? html`<span class=${'wf-mark wf-' + s.kind} style=${{ left: pct(s.start) + '%' }}></span>`
              : html`<span
                  class=${'wf-bar st-' + s.status}
                  style=${{ left: pct(s.start) + '%', width: Math.max(0.5, pct(s.end ?? now) - pct(s.start)) + '%' }}
                ></span>`}
          </span>
          <span class="wf-dur muted">${s.status === 'mark' ? '' : s.end ? ms(s.end - s.start) : '…'}</span>
        </div>`,
      )}
    </div>
  </div>`;
}
