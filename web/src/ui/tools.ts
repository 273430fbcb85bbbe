// Tool cards as a person reads them: `shell` as "$ command" with its
// output (live while it runs, then the result; a non-zero exit is a
// failure), file edits as a diff, reads and searches as one line with the
// result folded, a delegation as a card linking to its worker (with its
// progress while it runs), anything else as its input JSON. A call that
// waits for an answer carries the approval card (approvals.ts).
import { html } from 'htm/preact';
import type { VNode } from 'preact';
import { useEffect, useLayoutEffect, useRef, useState } from 'preact/hooks';
import type { Json, PendingApproval, ToolCall, ViewBlock, Worker } from '../client/index';
import { api } from './api';
import { ApprovalCard } from './approvals';
import { diffLines } from './highlight';
import { elapsed, ms, oneLine, shortId, usd } from './format';
import { href } from './route';
import { outputEnded, type LiveOutput } from './liveoutput';
import { parseShellResult } from '../client/shellresult';

export function pretty(input: unknown): string {
  if (input === undefined || input === null) return '';
  try {
    return JSON.stringify(typeof input === 'string' ? JSON.parse(input) : input, null, 2);
  } catch {
    return String(input);
  }
}

function field(input: Json | undefined, k: string): string {
  if (input && typeof input === 'object' && !Array.isArray(input)) {
    const v = (input as Record<string, Json>)[k];
    if (typeof v === 'string') return v;
    if (typeof v === 'number' || typeof v === 'boolean') return String(v);
  }
  return '';
}

const EDITS = new Set(['write_file', 'edit_file', 'apply_patch']);
const READS = new Set(['read_file', 'list_dir', 'glob', 'grep', 'web_fetch']);

/** The diff a pending edit would apply, from its input (before the tool ran). */
function proposedDiff(name: string, input: Json | undefined): string {
  const path = field(input, 'path');
  if (name === 'apply_patch') return field(input, 'patch');
  if (name === 'edit_file') {
    const old = field(input, 'old_string').split('\n').map((l) => '-' + l);
    const neu = field(input, 'new_string').split('\n').map((l) => '+' + l);
    return [`--- a/${path}`, `+++ b/${path}`, '@@ edit @@', ...old, ...neu].join('\n');
  }
  if (name === 'write_file') {
    const lines = field(input, 'content').split('\n');
    if (lines.at(-1) === '') lines.pop();
    return [`+++ b/${path}`, ...lines.slice(0, 400).map((l) => '+' + l), ...(lines.length > 400 ? [`… ${lines.length - 400} more lines`] : [])].join('\n');
  }
  return '';
}

export function DiffView(p: { diff: string; truncated?: boolean }): VNode {
  return html`<div class="diff-wrap">
    <pre class="diff">${diffLines(p.diff.replace(/\n$/, ''))}</pre>
    ${p.truncated ? html`<div class="muted small">the diff was cut (too long)</div>` : null}
  </div>`;
}

export interface ToolCardProps {
  block: ViewBlock;
  tool: ToolCall | undefined;
  streaming: boolean;
  approval: PendingApproval | undefined;
  worker: Worker | undefined;
  sessionId: string;
  /** A running shell call's live output (tool.output_delta). */
  output?: LiveOutput | undefined;
}

export function ToolCard(p: ToolCardProps): VNode {
  const { block, tool } = p;
  const name = block.name || tool?.name || 'tool';
  // Live output shows until the call's final result (a page opened mid-command knows the call only as pending).
  const output = name === 'shell' && p.output && !outputEnded(tool?.status) ? p.output : undefined;
  // A shell command that exited non-zero completed as a call, but failed as a command.
  const exitFailed = name === 'shell' && tool?.status === 'completed' && tool.exit_code !== undefined && tool.exit_code !== 0;
  let status = p.approval ? 'awaiting_approval' : (tool?.status ?? (p.streaming ? 'streaming' : 'pending'));
  if (output && status === 'pending') status = 'running';
  if (exitFailed) status = 'failed';
  const cancelled = status === 'cancelled' || tool?.error_class === 'cancelled';
  // While the input streams, partial_input holds it so far (a snapshot's
  // block then also has input {}).
  const input = block.partial_input ? undefined : (block.input ?? tool?.input);
  const badge = html`<span class=${'badge st-' + status} title=${exitFailed ? 'the command exited with code ' + tool!.exit_code : undefined}>${cancelled ? 'cancelled' : exitFailed ? 'exit ' + tool!.exit_code : status.replace('_', ' ')}</span>`;
  const dur = tool?.duration_ms !== undefined ? html`<span class="muted small">${ms(tool.duration_ms)}</span>` : null;
  let body: VNode | null = null;
  let title: VNode | string = name;
  if (block.partial_input) {
    body = html`<pre class="tool-input tool-partial">${block.partial_input}<span class="caret"></span></pre>`;
  } else if (name === 'shell') {
    title = html`<span class="shell-cmd"><span class="prompt">$</span> ${field(input, 'command')}</span>`;
    body = output
      ? html`<${ShellLive} out=${output} />`
      : tool?.status === 'completed' && tool.result
        ? html`<${ShellDone} result=${tool.result} failed=${exitFailed} />`
        : null;
  } else if (EDITS.has(name)) {
    const path = field(input, 'path') || tool?.paths?.join(', ') || '';
    title = html`<span><span class="tool-name">${name}</span> <span class="mono">${tool?.paths?.join(', ') || path}</span></span>`;
    // The change as the tool reported it (tool.completed); before it runs,
    // or on a page that attached after it (the snapshot holds no diffs),
    // the change its input asks for.
    const diff = tool?.diff ?? proposedDiff(name, input);
    body = html`${tool?.status === 'completed' && tool.result ? html`<div class="muted small">${tool.result}</div>` : null}
      ${diff ? html`<${DiffView} diff=${diff} truncated=${tool?.diff_truncated} />` : null}
      ${diff && tool?.diff === undefined ? html`<div class="muted small">${tool?.status === 'completed' ? 'the change this call asked for' : 'the change this call would make'}</div>` : null}`;
  } else if (READS.has(name)) {
    const what = field(input, 'path') || field(input, 'pattern') || field(input, 'url') || field(input, 'query');
    title = html`<span><span class="tool-name">${name}</span> <span class="mono">${what}</span></span>`;
    body =
      tool?.status === 'completed' && tool.result
        ? html`<details class="tool-result"><summary>result</summary><pre>${tool.result}</pre></details>`
        : null;
  } else if (name === 'delegate') {
    body = html`<${DelegateBody} task=${field(input, 'task')} worker=${p.worker} />`;
  } else {
    const text = input !== undefined && input !== null ? pretty(input) : '';
    body = html`${text ? html`<pre class="tool-input">${text}</pre>` : null}
      ${tool?.status === 'completed' && tool.result
        ? html`<details class="tool-result"><summary>result</summary><pre>${tool.result}</pre></details>`
        : null}`;
  }
  return html`<div class=${'tool tool-' + status + (cancelled ? ' tool-cancelled' : '') + ' tool-k-' + name} data-tool-id=${block.id}>
    <div class="tool-head">
      <span class="tool-title">${title}</span>
      ${badge} ${dur}
      ${tool?.summary && name !== 'shell' ? html`<span class="tool-summary">${tool.summary}</span>` : null}
    </div>
    ${body}
    ${tool?.images?.length ? html`<${Thumbnails} images=${tool.images} />` : null}
    ${p.approval ? html`<${ApprovalCard} a=${p.approval} sessionId=${p.sessionId} inline=${true} />` : null}
    ${tool?.error
      ? html`<div class="tool-error">${tool.error_class ? tool.error_class + ': ' : ''}${tool.error}</div>`
      : null}
  </div>`;
}

/**
 * A finished command's output: stdout, then stderr marked, without the
 * result's section labels (shellresult.ts); the text as it is when it
 * does not read as a shell result.
 */
function ShellDone(p: { result: string; failed: boolean }): VNode {
  const cls = 'shell-out shell-done' + (p.failed ? ' shell-failed' : '');
  const r = parseShellResult(p.result);
  if (!r) return html`<pre class=${cls}>${p.result}</pre>`;
  if (!r.stdout && !r.stderr && !r.notes.length) return html`<div class="muted small shell-empty">no output</div>`;
  return html`<pre class=${cls}>${r.notes.map((n) => html`<span class="shell-note">${n}</span>`)}${r.stdout ? html`<span class="stdout">${r.stdout}</span>` : null}${r.stderr ? html`<span class="stderr">${r.stderr}</span>` : null}</pre>`;
}

/** Bytes as a person reads them. */
function size(n: number): string {
  return n < 1024 ? `${n} bytes` : n < 1024 * 1024 ? `${(n / 1024).toFixed(1)} KiB` : `${(n / 1024 / 1024).toFixed(1)} MiB`;
}

/**
 * A running command's output as it arrives: stderr marked, the places
 * where output is missing said, bounded (liveoutput.ts). It follows the
 * newest line only while scrolled to its end: scrolling up holds it still.
 */
function ShellLive(p: { out: LiveOutput }): VNode {
  const ref = useRef<HTMLPreElement>(null);
  const follow = useRef(true);
  useLayoutEffect(() => {
    const el = ref.current;
    if (el && follow.current) el.scrollTop = el.scrollHeight;
  });
  const onScroll = (e: Event): void => {
    const el = e.currentTarget as HTMLElement;
    follow.current = el.scrollTop + el.clientHeight >= el.scrollHeight - 8;
  };
  const { runs, cut, capped } = p.out;
  return html`<pre class="shell-out shell-live" ref=${ref} onScroll=${onScroll} aria-live="off" data-live-output="">
    ${cut ? html`<span class="shell-note">… ${size(cut)} of earlier output not kept here (the result will have it)</span>` : null}
    ${runs.map((r, i) =>
      r.stream === 'gap'
        ? html`<span key=${r.key} class="shell-note shell-gap">${i === 0 && !cut ? `… the first ${size(r.bytes)} of output were no longer held` : `… ${size(r.bytes)} of output no longer held`}</span>`
        : html`<span key=${r.key} class=${r.stream === 'stderr' ? 'stderr' : 'stdout'}>${r.text}</span>`,
    )}
    ${capped ? html`<span class="shell-note">live output stopped at its limit; the command runs on and its result follows</span>` : html`<span class="caret"></span>`}
  </pre>`;
}

/** A delegation: the task, its worker (linked), and the worker's progress while it runs. */
function DelegateBody(p: { task: string; worker: Worker | undefined }): VNode {
  const w = p.worker;
  return html`<div class="delegate">
    <div class="task">${oneLine(p.task || w?.task || '', 300)}</div>
    ${w
      ? html`<div class="delegate-row">
          <a class="worker-link" href=${href({ page: 'session', id: w.session_id, tab: 'chat' })} data-worker-link=${w.session_id}>worker ${shortId(w.session_id)} →</a>
          <span class=${'badge st-' + w.status}>${w.status}</span>
          ${w.model ? html`<span class="muted small">${w.model}</span>` : null}
          ${w.cost_usd ? html`<span class="muted small">${usd(w.cost_usd)}</span>` : null}
        </div>
        ${w.status === 'running' ? html`<${WorkerProgress} id=${w.session_id} />` : null}
        ${w.summary ? html`<div class="result">${oneLine(w.summary, 400)}</div>` : null}
        ${w.failure_mode ? html`<div class="tool-error">${w.failure_mode}</div>` : null}`
      : null}
  </div>`;
}

/** A running worker's progress: its turns, steps and the last thing it did, polled. */
export function WorkerProgress(p: { id: string }): VNode {
  const [state, setState] = useState<{ steps: number; last: string; cost: number; since: number }>({ steps: 0, last: '', cost: 0, since: Date.now() });
  useEffect(() => {
    let stop = false;
    const poll = async (): Promise<void> => {
      try {
        const page = await api.messages(p.id, { limit: 20 });
        const a = page.messages.filter((m) => m.role === 'assistant');
        const last = a.at(-1);
        let what = '';
        for (const b of last?.content ?? []) {
          if (b.type === 'tool_use') what = 'ran ' + (b as { name?: string }).name;
          else if (b.type === 'text' && (b as { text?: string }).text) what = oneLine((b as { text?: string }).text ?? '', 120);
        }
        if (!stop) setState((s) => ({ ...s, steps: a.length, last: what }));
      } catch {
        /* the worker may be gone; the card shows its last state */
      }
    };
    void poll();
    const t = setInterval(() => void poll(), 2500);
    const tick = setInterval(() => setState((s) => ({ ...s })), 1000);
    return () => {
      stop = true;
      clearInterval(t);
      clearInterval(tick);
    };
  }, [p.id]);
  return html`<div class="worker-progress" data-progress=${p.id}>
    <span class="spinner"></span>
    <span>running ${elapsed(Date.now() - state.since)}</span>
    <span class="muted">· ${state.steps} step${state.steps === 1 ? '' : 's'} done</span>
    ${state.last ? html`<span class="muted">· ${state.last}</span>` : null}
  </div>`;
}

/** Images a tool returned, as thumbnails that open full size (data: URLs: no fetch, allowed by the page's CSP). */
function Thumbnails(p: { images: NonNullable<ToolCall['images']> }): VNode {
  return html`<div class="thumbs-row">
    ${p.images.map((im, i) =>
      im.data && /^image\/(png|jpeg|gif|webp)$/.test(im.media_type)
        ? html`<a key=${i} href=${`data:${im.media_type};base64,${im.data}`} target="_blank" rel="noopener" title=${`${im.media_type}, ${im.bytes} bytes`}>
            <img class="thumb-img" src=${`data:${im.media_type};base64,${im.data}`} alt=${'image ' + (i + 1)} />
          </a>`
        : html`<span key=${i} class="badge" title="not sent inline (too large)">${im.media_type} · ${im.bytes} bytes</span>`,
    )}
  </div>`;
}
