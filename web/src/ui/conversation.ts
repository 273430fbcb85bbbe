// The conversation: messages as they stream (text live, markdown once a
// message completes, thinking collapsed, tool cards with their streaming
// input, then the final input and the result), "(cancelled)" messages,
// struck-through cancelled tools, failed calls inline; older history on
// scroll-up; and the composer.
import { html } from 'htm/preact';
import type { VNode } from 'preact';
import { memo } from 'preact/compat';
import { useRef, useState } from 'preact/hooks';
import { ApiError, type ToolCall, type ViewBlock, type ViewMessage } from '../client/index';
import { api } from './api';
import { shortId, tokens, usd } from './format';
import type { LiveSession } from './live';
import { renderMarkdown } from './markdown';
import { VirtualList } from './virtual';

// Markdown is parsed once per finished message object (a changed message
// is a new object, so identity is the cache key).
const mdCache = new WeakMap<object, VNode<any>[]>();
function markdownOf(b: ViewBlock): VNode<any>[] {
  let v = mdCache.get(b);
  if (!v) {
    v = renderMarkdown(b.text ?? '');
    mdCache.set(b, v);
  }
  return v;
}

function pretty(input: unknown): string {
  if (input === undefined || input === null) return '';
  try {
    return JSON.stringify(typeof input === 'string' ? JSON.parse(input) : input, null, 2);
  } catch {
    return String(input);
  }
}

function ToolCard(p: { block: ViewBlock; tool: ToolCall | undefined; streaming: boolean }): VNode {
  const { block, tool } = p;
  const status = tool?.status ?? (p.streaming ? 'streaming' : 'pending');
  const cancelled = status === 'cancelled' || tool?.error_class === 'cancelled';
  // While the input streams, partial_input holds it so far (a snapshot's
  // block then also has input {}).
  const input = !block.partial_input && block.input !== undefined && block.input !== null ? pretty(block.input) : '';
  return html`<div class=${'tool tool-' + status + (cancelled ? ' tool-cancelled' : '')} data-tool-id=${block.id}>
    <div class="tool-head">
      <span class="tool-name">${block.name || tool?.name || 'tool'}</span>
      <span class=${'badge st-' + status}>${cancelled ? 'cancelled' : status}</span>
      ${tool?.summary ? html`<span class="tool-summary">${tool.summary}</span>` : null}
    </div>
    ${input
      ? html`<pre class="tool-input">${input}</pre>`
      : block.partial_input
        ? html`<pre class="tool-input tool-partial">${block.partial_input}<span class="caret"></span></pre>`
        : null}
    ${tool?.status === 'completed' && tool.result
      ? html`<details class="tool-result"><summary>result</summary><pre>${tool.result}</pre></details>`
      : null}
    ${tool?.error
      ? html`<div class="tool-error">${tool.error_class ? tool.error_class + ': ' : ''}${tool.error}</div>`
      : null}
  </div>`;
}

function Block(p: { b: ViewBlock; m: ViewMessage; tools: ReadonlyMap<string, ToolCall> }): VNode | null {
  const { b, m } = p;
  const streaming = m.status === 'streaming';
  switch (b.type) {
    case 'text':
      if (streaming) return html`<div class="text plain streaming">${chunks(b.text ?? '').map((c, i) => html`<div key=${i} class="chunk">${c}</div>`)}</div>`;
      return m.role === 'user' ? html`<div class="text plain">${b.text}</div>` : html`<div class="text md">${markdownOf(b)}</div>`;
    case 'thinking':
      return html`<details class="thinking"><summary>thinking${streaming ? '…' : ''}</summary><div class="plain">${b.thinking}</div></details>`;
    case 'tool_use':
      return html`<${ToolCard} block=${b} tool=${b.id ? p.tools.get(b.id) : undefined} streaming=${streaming} />`;
    case 'tool_result':
      return html`<div class=${'tool-result-block' + (b.is_error ? ' is-error' : '')}><pre>${typeof b.content === 'string' ? b.content : pretty(b.content)}</pre></div>`;
    default:
      return null;
  }
}

/**
 * Streaming text in blocks of about CHUNK characters cut at white space:
 * a new delta changes only the last block, so the browser lays out only
 * that block instead of the whole, ever longer paragraph.
 */
const CHUNK = 1500;
export function chunks(text: string): string[] {
  if (text.length <= CHUNK) return [text];
  const out: string[] = [];
  let at = 0;
  while (text.length - at > CHUNK) {
    let cut = text.lastIndexOf(' ', at + CHUNK);
    if (cut <= at) cut = at + CHUNK;
    out.push(text.slice(at, cut + 1));
    at = cut + 1;
  }
  out.push(text.slice(at));
  return out;
}

/**
 * Same message object and the same tool objects (a changed message or
 * tool is a new object): nothing to render. The tools map itself is
 * updated in place, so the row is given the tool objects it shows.
 */
function sameMessage(a: MessageProps, b: MessageProps): boolean {
  if (a.m !== b.m || a.sessionId !== b.sessionId || a.shown.length !== b.shown.length) return false;
  return a.shown.every((t, i) => t === b.shown[i]);
}

interface MessageProps {
  m: ViewMessage;
  tools: ReadonlyMap<string, ToolCall>;
  shown: (ToolCall | undefined)[];
  sessionId: string;
}

function toolsOf(m: ViewMessage, tools: ReadonlyMap<string, ToolCall>): (ToolCall | undefined)[] {
  const out: (ToolCall | undefined)[] = [];
  for (const b of m.blocks) if (b.type === 'tool_use' && b.id) out.push(tools.get(b.id));
  return out;
}

export const MessageItem = memo(MessageView, sameMessage);

function MessageView(p: MessageProps): VNode {
  const { m } = p;
  const foreign = m.session_id && m.session_id !== p.sessionId;
  const u = m.usage;
  return html`<article class=${'msg msg-' + m.role + ' msg-' + m.status} data-message-id=${m.id} data-session=${m.session_id}>
    <header class="msg-head">
      <span class="who">${m.role === 'user' ? 'you' : m.role}</span>
      ${foreign ? html`<a class="tag worker-tag" href=${'#/s/' + m.session_id}>worker ${shortId(m.session_id)}</a>` : null}
      ${m.model ? html`<span class="model">${m.model}</span>` : null}
      ${m.status === 'streaming' ? html`<span class="badge st-streaming">streaming</span>` : null}
      ${m.status === 'cancelled' ? html`<span class="badge st-cancelled">(cancelled)</span>` : null}
      ${m.status === 'failed' ? html`<span class="badge st-failed">failed</span>` : null}
      ${u
        ? html`<span class="usage" title="input / output tokens, cost">${tokens(u.input_tokens)} in · ${tokens(u.output_tokens)} out · ${usd(u.cost_usd)}</span>`
        : null}
    </header>
    <div class="msg-body">
      ${m.start_missing
        ? html`<div class="start-missing" title="The server no longer held the first part of this answer when this page attached.">… the start of this answer is no longer held; it is shown whole once it completes</div>`
        : null}
      ${m.blocks.map((b, i) => html`<${Block} key=${i} b=${b} m=${m} tools=${p.tools} />`)}
    </div>
  </article>`;
}

/** The messages a reader sees: tool-result messages show in their tool card. */
function visible(msgs: readonly ViewMessage[]): ViewMessage[] {
  const out: ViewMessage[] = [];
  for (const m of msgs) if (m.role !== 'tool') out.push(m);
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
  const items = visible(v.messages);

  const loadOlder = async (): Promise<void> => {
    if (busy.current || !v.hasOlder || v.messages.length === 0) return;
    busy.current = true;
    setLoading(true);
    try {
      const page = await api.messages(live.sessionId, { before: v.messages[0].id, limit: 100 });
      v.prependMessages(page.messages, page.has_more);
      live.ticker.poke();
    } catch (e) {
      live.say('error', 'Could not load older messages: ' + (e as Error).message);
    } finally {
      busy.current = false;
      setLoading(false);
    }
  };

  return html`<div class="conversation">
    ${v.hasOlder || loading
      ? html`<div class="older">${loading ? 'Loading older messages…' : html`<button class="link" onClick=${loadOlder}>Load older messages</button>`}</div>`
      : null}
    ${items.length === 0 && live.conn.value === 'live'
      ? html`<div class="empty">No messages yet. Say something below.</div>`
      : null}
    <${VirtualList}
      class="messages"
      label="conversation"
      items=${items}
      keyOf=${(m: ViewMessage) => m.id}
      estimate=${120}
      follow=${true}
      scrollToBottom=${jump}
      onAtBottom=${setAtBottom}
      onNearTop=${loadOlder}
      render=${(m: ViewMessage) => html`<${MessageItem} m=${m} tools=${v.tools} shown=${toolsOf(m, v.tools)} sessionId=${live.sessionId} />`}
    />
    ${v.errors.length
      ? html`<div class="errors" role="alert">${v.errors.slice(-3).map((e, i) => html`<div key=${i} class="error-line">${e}</div>`)}</div>`
      : null}
    ${!atBottom ? html`<button class="jump" onClick=${() => setJump((n) => n + 1)}>↓ Latest</button>` : null}
    <${Composer} live=${live} />
  </div>`;
}

export function Composer(p: { live: LiveSession }): VNode {
  const { live } = p;
  live.ticker.tick.value;
  const v = live.view;
  const [text, setText] = useState('');
  const [sending, setSending] = useState(false);
  const inFlight = v.turn.status === 'in_flight';

  const send = async (): Promise<void> => {
    const content = text.trim();
    if (!content || sending) return;
    setSending(true);
    try {
      await api.submitTurn(live.sessionId, content);
      setText('');
    } catch (e) {
      if (e instanceof ApiError && e.code === 'turn_in_flight') {
        live.say('warn', 'A turn is already running in this session. Wait for it to finish, or cancel it first; your text is kept.');
      } else {
        live.say('error', 'Could not send: ' + (e as Error).message);
      }
    } finally {
      setSending(false);
    }
  };

  const onKey = (e: KeyboardEvent): void => {
    if (e.key === 'Enter' && !e.shiftKey && !e.isComposing) {
      e.preventDefault();
      void send();
    } else if (e.key === 'Escape') {
      (e.target as HTMLElement).blur();
    }
  };

  return html`<form class="composer" onSubmit=${(e: Event) => (e.preventDefault(), void send())}>
    <textarea
      id="composer"
      rows="2"
      placeholder="Message the agent (Enter sends, Shift+Enter adds a line)"
      value=${text}
      onInput=${(e: Event) => setText((e.target as HTMLTextAreaElement).value)}
      onKeyDown=${onKey}
      aria-label="message"
    ></textarea>
    <div class="composer-actions">
      ${inFlight
        ? html`<button type="button" class="danger" id="cancel" onClick=${() => cancelTurn(live)}>Cancel</button>`
        : null}
      <button type="submit" class="primary" id="send" disabled=${sending || !text.trim()}>Send</button>
    </div>
  </form>`;
}

/** Cancel the turn in flight: the WebSocket cancel frame, else HTTP. */
export function cancelTurn(live: LiveSession): void {
  const t = live.view.turn;
  if (t.status !== 'in_flight' || !t.id) return;
  if (!live.follower.cancel(t.id)) {
    api.cancelTurn(live.sessionId, t.id).catch((e: Error) => live.say('error', 'Cancel failed: ' + e.message));
  }
}
