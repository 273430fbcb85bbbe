// Approval cards: a tool call that waits for the user's answer shows
// what it would do (the command, the paths, the diff), why it asks, and
// three answers: allow once, allow for this session (the rules it would
// add), deny with an optional reason. Every client sees the same
// request; the first answer wins, and a card answered elsewhere says so.
import { html } from 'htm/preact';
import type { VNode } from 'preact';
import { useState } from 'preact/hooks';
import { ApiError, type PendingApproval } from '../client/index';
import { api } from './api';
import { shortId } from './format';

export function ApprovalCard(p: { a: PendingApproval; sessionId: string; inline?: boolean }): VNode {
  const { a } = p;
  const [denying, setDenying] = useState(false);
  const [reason, setReason] = useState('');
  const [busy, setBusy] = useState(false);
  const [note, setNote] = useState('');
  const answer = async (decision: 'allow' | 'deny', scope: 'once' | 'session'): Promise<void> => {
    setBusy(true);
    setNote('');
    try {
      const r = await api.approve(p.sessionId, a.approval_id, { decision, scope, reason: decision === 'deny' ? reason.trim() || undefined : undefined });
      if (!r.won) setNote(`Already answered elsewhere: ${r.decision}${r.reason !== 'user' ? ' (' + r.reason + ')' : ''}.`);
    } catch (e) {
      setNote(e instanceof ApiError && e.status === 404 ? 'This request is no longer waiting.' : 'Could not answer: ' + (e as Error).message);
    } finally {
      setBusy(false);
    }
  };
  const rules = a.session_rules ?? [];
  const worker = a.session_id && a.session_id !== p.sessionId;
  return html`<div class=${'approval' + (p.inline ? ' inline' : '')} role="alertdialog" aria-label=${'approve ' + a.tool_name} data-approval=${a.approval_id}>
    <div class="approval-head">
      <strong>Allow <span class="mono">${a.tool_name}</span>?</strong>
      ${worker ? html`<a class="tag" href=${'#/s/' + a.session_id}>worker ${shortId(a.session_id)}</a>` : null}
      ${a.reason ? html`<span class="muted small">${a.reason}</span>` : null}
    </div>
    ${!p.inline && a.targets?.length ? html`<pre class="approval-targets">${a.targets.join('\n')}</pre>` : null}
    ${denying
      ? html`<div class="approval-actions">
          <input class="deny-reason" placeholder="Why not? (optional, the model reads it)" value=${reason} aria-label="reason"
            onInput=${(e: Event) => setReason((e.target as HTMLInputElement).value)}
            onKeyDown=${(e: KeyboardEvent) => e.key === 'Enter' && (e.preventDefault(), void answer('deny', 'once'))} />
          <button class="danger small" data-answer="deny" disabled=${busy} onClick=${() => answer('deny', 'once')}>Deny</button>
          <button class="small ghost" onClick=${() => setDenying(false)}>Back</button>
        </div>`
      : html`<div class="approval-actions">
          <button class="primary small" data-answer="once" disabled=${busy} onClick=${() => answer('allow', 'once')}>Allow once</button>
          <button class="small" data-answer="session" disabled=${busy} onClick=${() => answer('allow', 'session')}
            title=${rules.length ? 'Adds for this session: ' + rules.join(', ') : 'Counts as once: no rule covers this call'}>Allow for session</button>
          <button class="small" data-answer="deny-open" disabled=${busy} onClick=${() => setDenying(true)}>Deny…</button>
        </div>`}
    ${note ? html`<div class="muted small approval-note">${note}</div>` : null}
  </div>`;
}

/**
 * The approvals whose tool card is not on the page (a worker's, or a
 * call older than the messages held), above the composer.
 */
export function ApprovalBar(p: { pending: PendingApproval[]; onPage: (a: PendingApproval) => boolean; sessionId: string }): VNode | null {
  const rest = p.pending.filter((a) => !p.onPage(a));
  if (rest.length === 0) return null;
  return html`<div class="approval-bar" id="approval-bar">
    ${rest.map((a) => html`<${ApprovalCard} key=${a.approval_id} a=${a} sessionId=${p.sessionId} />`)}
  </div>`;
}
