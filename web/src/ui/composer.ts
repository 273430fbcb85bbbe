// The composer: the message box, its images (paste, drop, the file
// picker; thumbnails with a remove button, the limits checked before
// sending), and what a message does while a turn runs: Enter queues it
// ("queue": true: it runs when the turn ends), Steer sends it into the
// running turn (at its next model call). The queue shows above the box,
// each waiting turn with its place and a cancel; a steered message shows
// as pending until it enters the turn. One Cancel ends the running turn.
import { html } from 'htm/preact';
import type { VNode } from 'preact';
import { useEffect, useRef, useState } from 'preact/hooks';
import { ApiError, imageInput, type ImageInput, type TurnRequest } from '../client/index';
import { api } from './api';
import { takeDraft } from './drafts';
import type { LiveSession } from './live';

/** The server's default limits (--max-images, --max-image-bytes): checked here before sending; the server checks again. */
export const MAX_IMAGES = 10;
export const MAX_IMAGE_BYTES = 5 * 1024 * 1024;

/** An image chosen for the next message. */
interface Attached {
  key: number;
  name: string;
  bytes: number;
  input: ImageInput;
}

/** A steered message not yet seen entering the turn. */
interface PendingSteer {
  messageId: string;
  turnId: string;
  text: string;
}

let nextKey = 1;

function kb(n: number): string {
  return n >= 1024 * 1024 ? (n / 1024 / 1024).toFixed(1) + ' MB' : Math.max(1, Math.round(n / 1024)) + ' KB';
}

/** The images of a paste or a drop (files only; text is left to the textarea). */
function filesOf(dt: DataTransfer | null): File[] {
  if (!dt) return [];
  return [...dt.files];
}

export function Composer(p: { live: LiveSession }): VNode {
  const { live } = p;
  live.ticker.tick.value;
  const v = live.view;
  // A prompt being edited in a fork of its session arrives as a draft.
  const [text, setText] = useState(() => takeDraft(live.sessionId));
  const box = useRef<HTMLTextAreaElement>(null);
  useEffect(() => {
    if (text !== '') box.current?.focus(); // the draft is there to be edited
  }, []);
  const [images, setImages] = useState<Attached[]>([]);
  const [problem, setProblem] = useState('');
  const [sending, setSending] = useState(false);
  const [dragging, setDragging] = useState(false);
  const [steers, setSteers] = useState<PendingSteer[]>([]);
  const picker = useRef<HTMLInputElement>(null);
  const inFlight = v.turn.status === 'in_flight';

  // A steered message leaves "pending" once it is in the conversation, in the queue (its turn ended first), or its turn is over.
  const waiting = steers.filter((s) => !v.message(s.messageId) && !v.queued.some((q) => q.message_id === s.messageId) && inFlight && v.turn.id === s.turnId);
  if (waiting.length !== steers.length) queueMicrotask(() => setSteers(waiting));

  const attach = async (files: File[]): Promise<void> => {
    const problems: string[] = [];
    const added: Attached[] = [];
    for (const f of files) {
      if (images.length + added.length >= MAX_IMAGES) {
        problems.push(`at most ${MAX_IMAGES} images a message: ${f.name || 'an image'} was left out`);
        continue;
      }
      if (f.size > MAX_IMAGE_BYTES) {
        problems.push(`${f.name || 'an image'} is ${kb(f.size)}: at most ${kb(MAX_IMAGE_BYTES)} an image`);
        continue;
      }
      try {
        added.push({ key: nextKey++, name: f.name || 'pasted image', bytes: f.size, input: await imageInput(f) });
      } catch {
        problems.push(`${f.name || 'that file'} is not a PNG, JPEG, GIF or WebP image`);
      }
    }
    if (added.length) setImages((cur) => [...cur, ...added].slice(0, MAX_IMAGES));
    setProblem(problems.join('; '));
  };

  const send = async (how: 'queue' | 'steer'): Promise<void> => {
    const content = text.trim();
    const sent = images;
    if ((!content && images.length === 0) || sending) return;
    setSending(true);
    setProblem('');
    try {
      const compact = images.length === 0 ? /^\/compact(?:\s+([\s\S]*))?$/.exec(content) : null;
      if (compact && how === 'queue') {
        await api.compact(live.sessionId, compact[1]?.trim() || undefined);
        live.say('info', 'Compacting the conversation…');
      } else {
        const req: TurnRequest = { content: content || '(images attached)' };
        if (images.length) req.images = images.map((i) => i.input);
        if (how === 'steer') {
          req.steer = true;
          if (v.turn.id && inFlight) req.expected_turn_id = v.turn.id;
        } else {
          req.queue = true;
        }
        const r = await api.sendTurn(live.sessionId, req);
        if (r.steered) setSteers((cur) => [...cur, { messageId: r.message_id, turnId: r.turn_id, text: content }]);
        else if (r.queued) live.say('info', `Queued: it runs when the turn before it ends (place ${r.position ?? '?'}).`, 3000);
      }
      // Only what was sent leaves the box: what was typed or attached
      // while it was sending stays.
      setText((cur) => (cur.trim() === content ? '' : cur));
      setImages((cur) => cur.filter((i) => !sent.includes(i)));
    } catch (e) {
      const code = e instanceof ApiError ? e.code : '';
      if (code === 'turn_cancelling') {
        setProblem('The running turn is being cancelled, so it takes no more messages: press Enter to queue yours instead (it is kept).');
      } else if (code === 'turn_mismatch') {
        setProblem('That turn has ended: press Enter to send your message as the next turn (it is kept).');
      } else if (code === 'queue_full') {
        setProblem('The queue is full: wait for a queued turn to start, or cancel one (your message is kept).');
      } else if (code === 'invalid_image') {
        setProblem('An image was refused: ' + (e as Error).message);
      } else if (code === 'turn_in_flight') {
        setProblem('A turn is running: your message is kept.');
      } else {
        setProblem('Could not send: ' + (e as Error).message);
      }
    } finally {
      setSending(false);
    }
  };

  const onKey = (e: KeyboardEvent): void => {
    if (e.key === 'Enter' && !e.shiftKey && !e.isComposing) {
      e.preventDefault();
      void send(inFlight && (e.ctrlKey || e.metaKey) ? 'steer' : 'queue');
    } else if (e.key === 'Escape') {
      (e.target as HTMLElement).blur();
    }
  };

  const onPaste = (e: ClipboardEvent): void => {
    const files = filesOf(e.clipboardData).filter((f) => f.type.startsWith('image/') || f.type === '');
    if (files.length === 0) return;
    e.preventDefault();
    void attach(files);
  };
  const onDrop = (e: DragEvent): void => {
    e.preventDefault();
    setDragging(false);
    const files = filesOf(e.dataTransfer);
    if (files.length) void attach(files);
  };
  const onDragOver = (e: DragEvent): void => {
    if (!e.dataTransfer || ![...e.dataTransfer.types].includes('Files')) return;
    e.preventDefault();
    setDragging(true);
  };

  const empty = !text.trim() && images.length === 0;
  return html`<div class="composer-wrap">
    <${QueueList} live=${live} steers=${waiting} />
    <form class=${'composer' + (dragging ? ' dragging' : '')} onSubmit=${(e: Event) => (e.preventDefault(), void send('queue'))}
      onDragOver=${onDragOver} onDragLeave=${() => setDragging(false)} onDrop=${onDrop}>
      ${images.length
        ? html`<ul class="attachments" id="attachments" aria-label="images to send">
            ${images.map(
              (i) => html`<li key=${i.key} class="attachment">
                <img src=${`data:${i.input.media_type};base64,${i.input.data}`} alt=${i.name} title=${`${i.name} (${kb(i.bytes)})`} />
                <button type="button" class="remove" aria-label=${'remove ' + i.name} title="Remove"
                  onClick=${() => setImages((cur) => cur.filter((x) => x.key !== i.key))}>×</button>
              </li>`,
            )}
          </ul>`
        : null}
      ${problem ? html`<div class="composer-problem" id="composer-problem" role="alert">${problem}</div>` : null}
      <div class="composer-row">
        <textarea
          id="composer"
          rows="2"
          ref=${box}
          placeholder=${inFlight
            ? 'Queue a message for after this turn (Enter), or steer it (Ctrl+Enter)'
            : 'Message the agent (Enter sends, Shift+Enter adds a line; paste or drop images)'}
          value=${text}
          onInput=${(e: Event) => setText((e.target as HTMLTextAreaElement).value)}
          onKeyDown=${onKey}
          onPaste=${onPaste}
          aria-label="message"
        ></textarea>
        <div class="composer-actions">
          <input type="file" accept="image/png,image/jpeg,image/gif,image/webp" multiple hidden ref=${picker} id="image-picker"
            onChange=${(e: Event) => {
              const el = e.target as HTMLInputElement;
              void attach([...(el.files ?? [])]);
              el.value = '';
            }} />
          <button type="button" class="ghost icon-btn" id="attach" title=${`Attach images (PNG, JPEG, GIF, WebP; up to ${MAX_IMAGES}, ${kb(MAX_IMAGE_BYTES)} each)`}
            aria-label="attach images" onClick=${() => picker.current?.click()}>+ Image</button>
          ${inFlight
            ? html`<button type="button" class="danger" id="cancel" title="Cancel the running turn (queued turns then start)" onClick=${() => cancelTurn(live)}>Cancel</button>
                <button type="button" id="steer" disabled=${sending || empty} title="Send into the running turn: the model reads it at its next step (Ctrl+Enter)"
                  onClick=${() => void send('steer')}>Steer</button>`
            : null}
          <button type="submit" class="primary" id="send" disabled=${sending || empty}
            title=${inFlight ? 'Run it after the running turn (Enter)' : 'Send (Enter)'}>${inFlight ? 'Queue' : 'Send'}</button>
        </div>
      </div>
    </form>
  </div>`;
}

/** The queued turns, the next first, each with its place and a cancel; steered messages not yet in the turn. */
function QueueList(p: { live: LiveSession; steers: PendingSteer[] }): VNode | null {
  const { live } = p;
  const q = live.view.queued;
  if (q.length === 0 && p.steers.length === 0) return null;
  const cancel = async (turnId: string): Promise<void> => {
    try {
      await api.cancelTurn(live.sessionId, turnId);
    } catch (e) {
      live.say('error', 'Could not cancel the queued message: ' + (e as Error).message);
    }
  };
  return html`<div class="queue" id="queue" aria-label="messages waiting">
    ${p.steers.map(
      (s) => html`<div class="queued steer-pending" key=${s.messageId} data-message-id=${s.messageId}>
        <span class="badge st-running">steering</span>
        <span class="preview">${s.text || '(images)'}</span>
        <span class="muted small">enters the turn at its next step</span>
      </div>`,
    )}
    ${q.map(
      (t, i) => html`<div class="queued" key=${t.turn_id} data-turn=${t.turn_id}>
        <span class="badge pos" title="its place in the queue">${i === 0 ? 'next' : '#' + (i + 1)}</span>
        <span class="preview" title=${t.preview}>${t.preview || '(images)'}</span>
        ${t.images ? html`<span class="muted small">${t.images} image${t.images === 1 ? '' : 's'}</span>` : null}
        ${t.source === 'steer' ? html`<span class="muted small" title="sent to steer, but the turn ended first">was a steer</span>` : null}
        <button type="button" class="small ghost cancel-queued" aria-label="cancel this queued message" title="Remove it from the queue (it never runs)"
          onClick=${() => void cancel(t.turn_id)}>Cancel</button>
      </div>`,
    )}
  </div>`;
}

/** Cancel the turn in flight: the WebSocket cancel frame, else HTTP. */
export function cancelTurn(live: LiveSession): void {
  const t = live.view.turn;
  if (t.status !== 'in_flight' || !t.id) return;
  if (!live.follower.cancel(t.id)) {
    api.cancelTurn(live.sessionId, t.id).catch((e: Error) => live.say('error', 'Cancel failed: ' + e.message));
  }
}
