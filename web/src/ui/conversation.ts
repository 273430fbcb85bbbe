// The conversation: each user message, then its turn as one block (every
// model call of the turn inside it, not a card each) with the turn's
// total time, tokens and cost, a copy button and the feedback thumbs.
// Text renders as markdown while it streams (markdown.ts: finished blocks
// are cached, only the growing one is parsed again); thinking is
// collapsed; tools are cards a person reads (tools.ts); a call waiting for
// an answer carries its approval card. Older history loads on scroll-up.
import { html } from 'htm/preact';
import type { VNode } from 'preact';
import { memo } from 'preact/compat';
import { useRef, useState } from 'preact/hooks';
import { type PendingApproval, type ToolCall, type TurnInfo, type ViewBlock, type ViewMessage, type Worker } from '../client/index';
import { api } from './api';
import { ApprovalBar } from './approvals';
import { copyText, flash } from './copy';
import { elapsed, shortId, tokens, usd } from './format';
import type { LiveSession } from './live';
import type { LiveOutput } from './liveoutput';
import { blockNodes, splitBlocks } from './markdown';
import { ToolCard } from './tools';
import { VirtualList } from './virtual';
import { BackgroundCommands } from './background';
import { Composer } from './composer';
import { PromptActions, RevertBar, TurnActions } from './turnactions';
import type { TurnInfo as TurnRow } from '../client/protocol.gen';

/** One block of markdown; skipped when its source did not change. */
const MdBlock = memo(
  (p: { src: string; growing: boolean }) => html`<div class="md-block">${blockNodes(p.src, !p.growing)}</div>`,
  (a, b) => a.src === b.src,
);

export function Markdown(p: { text: string; streaming?: boolean }): VNode {
  const blocks = splitBlocks(p.text);
  return html`<div class=${'text md' + (p.streaming ? ' streaming' : '')}>
    ${blocks.map((src, i) => html`<${MdBlock} key=${i} src=${src} growing=${!!p.streaming && i === blocks.length - 1} />`)}
    ${p.streaming ? html`<span class="caret"></span>` : null}
  </div>`;
}

/** What a turn block needs from the view besides its messages. */
interface Ctx {
  tools: ReadonlyMap<string, ToolCall>;
  pending: ReadonlyMap<string, PendingApproval>; // by tool_use_id, this page's session and its workers
  workers: readonly Worker[];
  sessionId: string;
  live: LiveSession;
  /** Running shell calls' live output by tool_use_id. */
  outputs: ReadonlyMap<string, LiveOutput>;
  /** The session this one was forked from (its images serve a fork's copied messages too). */
  forkedFrom?: string;
}

function Block(p: { b: ViewBlock; m: ViewMessage; ctx: Ctx }): VNode | null {
  const { b, m, ctx } = p;
  const streaming = m.status === 'streaming';
  switch (b.type) {
    case 'text':
      return m.role === 'user' ? html`<div class="text plain">${b.text}</div>` : html`<${Markdown} text=${b.text} streaming=${streaming} />`;
    case 'thinking':
      return html`<details class="thinking"><summary>thinking${streaming ? '…' : ''}</summary><div class="plain">${b.thinking}</div></details>`;
    case 'tool_use': {
      const tool = b.id ? ctx.tools.get(b.id) : undefined;
      const task = b.name === 'delegate' && b.input && typeof b.input === 'object' ? String((b.input as Record<string, unknown>)['task'] ?? '') : '';
      const worker = task ? ctx.workers.find((w) => w.task === task) : undefined;
      return html`<${ToolCard} block=${b} tool=${tool} streaming=${streaming} approval=${ctx.pending.get(b.id)} worker=${worker} sessionId=${ctx.sessionId} output=${ctx.outputs.get(b.id)} />`;
    }
    case 'tool_result':
      return html`<div class=${'tool-result-block' + (b.is_error ? ' is-error' : '')}><pre>${b.content}</pre>
        ${b.images?.length ? html`<div class="images">${b.images.map((im, i) => html`<${ImageThumb} key=${i} b=${im} sessionId=${m.session_id || ctx.sessionId} also=${ctx.forkedFrom} />`)}</div>` : null}</div>`;
    case 'image':
      return html`<${ImageThumb} b=${b} sessionId=${m.session_id || ctx.sessionId} also=${ctx.forkedFrom} />`;
    case 'compaction':
      return html`<div class="compaction-mark">Context compacted here: the model sees a summary of what came before.</div>`;
    default:
      return null;
  }
}

/**
 * An image of a message: the bytes come from GET /sessions/{id}/images/{sha256}
 * (same origin, so the page's img-src 'self' allows it); a click opens it whole.
 * A fork's copied message may name an image only the session it was forked
 * from serves: that URL is tried next; when none loads, a placeholder says so.
 */
function ImageThumb(p: { b: ViewBlock; sessionId: string; also?: string }): VNode | null {
  const [attempt, setAttempt] = useState(0);
  if (!p.b.sha256) return null;
  const urls = [p.sessionId, ...(p.also && p.also !== p.sessionId ? [p.also] : [])].map((sid) => api.imageUrl(sid, p.b.sha256!));
  const kind = (p.b.media_type ?? '').replace('image/', '').toUpperCase();
  const what = `${kind} ${p.b.width ?? 0}×${p.b.height ?? 0}, ${Math.max(1, Math.round((p.b.size ?? 0) / 1024))} KB`;
  const url = urls[attempt];
  if (!url) return html`<span class="msg-image missing" title=${what}>image not available (${what})</span>`;
  return html`<a class="msg-image" href=${url} target="_blank" rel="noopener" title=${what}>
    <img key=${url} src=${url} alt=${'image: ' + what} loading="lazy" onError=${() => setAttempt((n) => n + 1)} />
  </a>`;
}

/** One model call's message inside a turn block (or a user message). */
function MessageView(p: { m: ViewMessage; ctx: Ctx; steered?: boolean; actions?: VNode | null }): VNode {
  const { m } = p;
  const foreign = m.session_id && m.session_id !== p.ctx.sessionId;
  return html`<article class=${'msg msg-' + m.role + ' msg-' + m.status + (p.steered ? ' msg-steered' : '')} data-message-id=${m.id} data-session=${m.session_id}>
    ${foreign || m.status !== 'complete' || m.role === 'user'
      ? html`<header class="msg-head">
          ${m.role === 'user' ? html`<span class="who">you</span>` : null}
          ${p.steered ? html`<span class="badge steered" title="sent while the turn ran: the model read it at its next step">steered in</span>` : null}
          ${foreign ? html`<a class="tag worker-tag" href=${'#/s/' + m.session_id}>worker ${shortId(m.session_id)}</a>` : null}
          ${m.status === 'streaming' ? html`<span class="badge st-streaming">streaming</span>` : null}
          ${m.status === 'cancelled' ? html`<span class="badge st-cancelled">(cancelled)</span>` : null}
          ${m.status === 'failed' ? html`<span class="badge st-failed">failed</span>` : null}
          ${m.role === 'user' ? html`<span class="spacer"></span>${p.actions ?? null}<${CopyButton} text=${() => textOf([m])} label="Copy" />` : null}
        </header>`
      : null}
    <div class="msg-body">
      ${m.start_missing
        ? html`<div class="start-missing" title="The server no longer held the first part of this answer when this page attached.">… the start of this answer is no longer held; it is shown whole once it completes</div>`
        : null}
      ${m.blocks.map((b, i) => html`<${Block} key=${i} b=${b} m=${m} ctx=${p.ctx} />`)}
    </div>
  </article>`;
}

function textOf(msgs: readonly ViewMessage[]): string {
  return msgs
    .map((m) => m.blocks.filter((b) => b.type === 'text').map((b) => b.text).join('\n\n'))
    .filter(Boolean)
    .join('\n\n');
}

export function CopyButton(p: { text: () => string; label: string; id?: string }): VNode {
  return html`<button type="button" class="small ghost copy-msg" id=${p.id} title="Copy as markdown"
    onClick=${(e: Event) => {
      const btn = e.currentTarget as HTMLElement;
      void copyText(p.text()).then((ok) => flash(btn, ok));
    }}>${p.label}</button>`;
}

/** A row of the conversation: a user message, a turn's answer, or a lone message. */
type Row =
  | { kind: 'user'; key: string; m: ViewMessage }
  | { kind: 'turn'; key: string; turnId: string; msgs: ViewMessage[] };

/**
 * The rows: each user message, then the assistant messages of its turn
 * grouped (tool-result messages show in their cards). A user message of
 * the turn being grouped was steered into it (turn.steered): it stays
 * inside the turn's block, where the model read it.
 */
export function rows(msgs: readonly ViewMessage[]): Row[] {
  const out: Row[] = [];
  let cur: Extract<Row, { kind: 'turn' }> | undefined;
  for (const m of msgs) {
    if (m.role === 'tool') continue;
    if (m.role === 'user' && cur && m.turn_id && cur.turnId === m.turn_id && cur.msgs[0]!.session_id === m.session_id) {
      cur.msgs.push(m);
      continue;
    }
    if (m.role === 'user') {
      out.push({ kind: 'user', key: m.id, m });
      cur = undefined;
      continue;
    }
    if (cur && cur.turnId === m.turn_id && cur.msgs[0]!.session_id === m.session_id) {
      cur.msgs.push(m);
      continue;
    }
    cur = { kind: 'turn', key: 't:' + m.id, turnId: m.turn_id, msgs: [m] };
    out.push(cur);
  }
  return out;
}

interface TurnProps {
  msgs: ViewMessage[];
  turnId: string;
  info: TurnInfo | undefined;
  rating: string | undefined;
  ctx: Ctx;
  /** The objects the block shows (messages, tools, approvals, workers): unchanged means nothing to render. */
  deps: unknown[];
  /** The turn runs (a message streams, or the view's turn in flight is this one). */
  live: boolean;
  /** The turn list's row (what the turn changed, whether it can be reverted). */
  row: TurnRow | undefined;
}

const TurnBlock = memo(TurnView, (a, b) => a.live === b.live && a.rating === b.rating && a.info === b.info && a.row === b.row && a.deps.length === b.deps.length && a.deps.every((x, i) => x === b.deps[i]));

function TurnView(p: TurnProps): VNode {
  const { msgs, info } = p;
  let tin = 0;
  let tout = 0;
  let cost = 0;
  for (const m of msgs) {
    if (m.usage) {
      tin += m.usage.input_tokens;
      tout += m.usage.output_tokens;
      cost += m.usage.cost_usd;
    }
  }
  if (info?.usage) {
    tin = info.usage.input_tokens;
    tout = info.usage.output_tokens;
    cost = info.usage.cost_usd;
  }
  const running = p.live;
  const calls = info?.llm_calls || msgs.length;
  const model = msgs.find((m) => m.model)?.model ?? '';
  const foreign = msgs[0]!.session_id !== p.ctx.sessionId;
  return html`<section class=${'turn' + (running ? ' running' : '')} data-turn=${p.turnId}>
    <div class="turn-who"><span class="who">assistant</span>${model ? html`<span class="model">${model}</span>` : null}</div>
    ${msgs.map((m) => html`<${MessageView} key=${m.id} m=${m} ctx=${p.ctx} steered=${m.role === 'user'} />`)}
    ${running
      ? null
      : html`<footer class="turn-foot">
          <span class="turn-stats" title="the turn's time, tokens (in / out) and cost, its model calls included">
            ${info?.status && info.status !== 'completed' ? html`<span class=${'badge st-' + info.status}>${info.status}</span>` : null}
            ${info?.duration_ms ? html`<span>${elapsed(info.duration_ms)}</span>` : null}
            <span>${tokens(tin)} in · ${tokens(tout)} out</span>
            <span>${usd(cost)}</span>
            ${calls > 1 ? html`<span>${calls} model calls</span>` : null}
          </span>
          <span class="spacer"></span>
          ${!foreign && p.turnId
            ? html`<${TurnActions} live=${p.ctx.live} turnId=${p.turnId} row=${p.row} running=${running}
                lastMessageId=${[...msgs].reverse().find((m) => m.role === 'assistant' && m.status !== 'streaming')?.id ?? ''} />`
            : null}
          <${CopyButton} text=${() => textOf(msgs)} label="Copy" />
          ${!foreign && p.turnId ? html`<${Thumbs} sessionId=${p.ctx.sessionId} turnId=${p.turnId} rating=${p.rating} />` : null}
        </footer>`}
  </section>`;
}

function Thumbs(p: { sessionId: string; turnId: string; rating: string | undefined }): VNode {
  const [sent, setSent] = useState<string | undefined>(undefined);
  const [err, setErr] = useState('');
  const rating = p.rating ?? sent;
  const rate = async (r: 'up' | 'down'): Promise<void> => {
    setErr('');
    try {
      await api.submitFeedback(p.sessionId, p.turnId, r);
      setSent(r);
    } catch (e) {
      setErr((e as Error).message);
    }
  };
  return html`<span class="thumbs" data-rating=${rating ?? ''}>
    <button type="button" class=${'small ghost thumb' + (rating === 'up' ? ' on' : '')} aria-label="good answer" title="Good answer" aria-pressed=${rating === 'up'} onClick=${() => rate('up')}>▲</button>
    <button type="button" class=${'small ghost thumb' + (rating === 'down' ? ' on' : '')} aria-label="bad answer" title="Bad answer" aria-pressed=${rating === 'down'} onClick=${() => rate('down')}>▼</button>
    ${err ? html`<span class="error-line">${err}</span>` : null}
  </span>`;
}

const UserRow = memo(
  (p: { m: ViewMessage; ctx: Ctx; before: string; running: boolean }) =>
    html`<${MessageView} m=${p.m} ctx=${p.ctx}
      actions=${p.before && p.m.session_id === p.ctx.sessionId
        ? html`<${PromptActions} live=${p.ctx.live} text=${textOf([p.m])} before=${p.before} running=${p.running} />`
        : null} />`,
  (a, b) => a.m === b.m && a.before === b.before && a.running === b.running,
);

/** The objects a turn block shows: identity tells whether it changed. */
function depsOf(msgs: readonly ViewMessage[], ctx: Ctx): unknown[] {
  const out: unknown[] = [...msgs];
  for (const m of msgs) {
    for (const b of m.blocks) {
      if (b.type !== 'tool_use' || !b.id) continue;
      out.push(ctx.tools.get(b.id), ctx.pending.get(b.id), ctx.outputs.get(b.id));
      if (b.name === 'delegate') out.push(...ctx.workers);
    }
  }
  return out;
}

export function Conversation(p: { live: LiveSession }): VNode {
  const { live } = p;
  live.ticker.tick.value; // re-render once per frame while events arrive
  const v = live.view;
  const [loading, setLoading] = useState(false);
  const [atBottom, setAtBottom] = useState(true);
  const [jump, setJump] = useState(0);
  const busy = useRef(false);
  const pendingList = v.pendingApprovals;
  const ctx: Ctx = {
    tools: v.tools,
    pending: new Map(pendingList.map((a) => [a.tool_use_id, a])),
    workers: [...v.workers.values()],
    sessionId: live.sessionId,
    live,
    outputs: live.outputs,
    forkedFrom: v.session?.forked_from?.session_id,
  };
  const turnRows = live.turnRows.value;
  const items = rows(v.messages);
  // Each prompt's message before it: where a fork that edits the prompt ends.
  const before = new Map<string, string>();
  v.messages.forEach((m, i) => {
    if (m.role === 'user' && i > 0) before.set(m.id, v.messages[i - 1]!.id);
  });

  const loadOlder = async (): Promise<void> => {
    if (busy.current || !v.hasOlder || v.messages.length === 0) return;
    busy.current = true;
    setLoading(true);
    try {
      const page = await api.messages(live.sessionId, { before: v.messages[0]!.id, limit: 100 });
      v.prependMessages(page.messages, page.has_more);
      live.ticker.poke();
    } catch (e) {
      live.say('error', 'Could not load older messages: ' + (e as Error).message);
    } finally {
      busy.current = false;
      setLoading(false);
    }
  };

  const render = (r: Row): VNode => {
    if (r.kind === 'user') return html`<${UserRow} m=${r.m} ctx=${ctx} before=${before.get(r.m.id) ?? ''} running=${v.turn.status === 'in_flight'} />`;
    return html`<${TurnBlock} msgs=${r.msgs} turnId=${r.turnId} info=${v.turns.get(r.turnId)} rating=${v.feedback.get(r.turnId)}
      ctx=${ctx} deps=${depsOf(r.msgs, ctx)} row=${turnRows.get(r.turnId)}
      live=${r.msgs.some((m) => m.status === 'streaming') || (v.turn.id === r.turnId && v.turn.status === 'in_flight') || v.turns.get(r.turnId)?.status === 'in_flight'} />`;
  };

  return html`<div class="conversation">
    ${v.hasOlder || loading
      ? html`<div class="older">${loading ? 'Loading older messages…' : html`<button class="link" onClick=${loadOlder}>Load older messages</button>`}</div>`
      : null}
    ${items.length === 0 && live.conn.value === 'live'
      ? html`<div class="empty">No messages yet. Say something below.
          ${v.session?.active_model === 'builtin:demo'
            ? html`<div class="muted small demo-hint">The offline demo model understands <code>/echo TEXT</code>, <code>/long N</code> and <code>/tool NAME {json}</code>; set a provider key for a real model.</div>`
            : null}</div>`
      : null}
    <${VirtualList}
      class="messages"
      label="conversation"
      items=${items}
      keyOf=${(r: Row) => r.key}
      estimate=${120}
      follow=${true}
      scrollToBottom=${jump}
      onAtBottom=${setAtBottom}
      onNearTop=${loadOlder}
      render=${render}
    />
    ${v.errors.length
      ? html`<div class="errors" role="alert">${v.errors.slice(-3).map((e, i) => html`<div key=${i} class="error-line">${e}</div>`)}</div>`
      : null}
    ${!atBottom ? html`<button class="jump" onClick=${() => setJump((n) => n + 1)}>↓ Latest</button>` : null}
    <${ApprovalBar} pending=${pendingList} sessionId=${live.sessionId}
      onPage=${(a: PendingApproval) => a.session_id === live.sessionId && v.tools.has(a.tool_use_id)} />
    <${RevertBar} live=${live} />
    <${BackgroundCommands} live=${live} />
    <${Composer} live=${live} />
  </div>`;
}

export { cancelTurn } from './composer';
