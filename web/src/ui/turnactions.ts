// What a finished turn offers besides reading it: revert (the files as
// they were before it: what will be put back is listed, and the warning
// that commands' other effects stay is shown before the click), fork
// from here (a new session with the conversation up to this answer,
// opened at once), and after a revert the bar that undoes it (restores
// the checkpoint the revert saved). A prompt offers Edit: a copy of the
// session that ends just before it (its files too, if asked), opened
// with the prompt in the composer to change and send.
import { html } from 'htm/preact';
import type { VNode } from 'preact';
import { useState } from 'preact/hooks';
import { ApiError } from '../client/index';
import type { TurnInfo as TurnRow } from '../client/protocol.gen';
import { api } from './api';
import { leaveDraft } from './drafts';
import type { LiveSession } from './live';
import { href } from './route';

/** Shown next to every revert button, before the click (docs/conversation.md). */
export const SIDE_EFFECTS =
  'Only the workspace’s files are put back. What commands did besides changing those files (packages installed, databases or services changed, files outside the workspace) is not undone.';

const STATUS_MARK: Record<string, string> = { added: '+', modified: '~', deleted: '−', type_changed: '±' };

function errText(e: unknown): string {
  if (e instanceof ApiError) {
    switch (e.code) {
      case 'turn_in_flight':
        return 'A turn is running on this workspace: try again when it ends.';
      case 'nothing_to_revert':
        return 'Nothing to put back: the files already are as they were before this turn.';
      case 'checkpoints_unavailable':
        return 'Checkpoints are off on this server: ' + e.message;
    }
  }
  return (e as Error).message;
}

/** The buttons of a turn's footer and the panel each opens. */
export function TurnActions(p: { live: LiveSession; turnId: string; lastMessageId: string; row: TurnRow | undefined; running: boolean }): VNode {
  const [open, setOpen] = useState<'' | 'revert' | 'fork'>('');
  const { row } = p;
  const changed = row?.changes?.files_changed ?? 0;
  const canRevert = !!row?.checkpoint_id && (changed > 0 || row.changes === null);
  return html`<span class="turn-actions">
    ${canRevert
      ? html`<button type="button" class="small ghost revert-btn" aria-expanded=${open === 'revert'}
          title=${row!.revertible ? 'Put the files back as they were before this turn' : 'A turn runs: revert when it ends'}
          onClick=${() => setOpen(open === 'revert' ? '' : 'revert')}>Revert${changed ? ` (${changed} file${changed === 1 ? '' : 's'})` : ''}</button>`
      : null}
    ${p.lastMessageId
      ? html`<button type="button" class="small ghost fork-btn" aria-expanded=${open === 'fork'} title="A new session with the conversation up to here"
          onClick=${() => setOpen(open === 'fork' ? '' : 'fork')}>Fork from here</button>`
      : null}
    ${open === 'revert' && row ? html`<${RevertPanel} live=${p.live} row=${row} onClose=${() => setOpen('')} />` : null}
    ${open === 'fork' ? html`<${ForkPanel} live=${p.live} messageId=${p.lastMessageId} w=${FORK_HERE} onClose=${() => setOpen('')} />` : null}
  </span>`;
}

function RevertPanel(p: { live: LiveSession; row: TurnRow; onClose: () => void }): VNode {
  const { live, row } = p;
  const [busy, setBusy] = useState(false);
  const [err, setErr] = useState('');
  const files = row.changes?.files ?? [];
  const go = async (): Promise<void> => {
    setBusy(true);
    setErr('');
    try {
      const r = await api.revertTurn(live.sessionId, row.turn_id);
      live.lastRevert.value = r;
      live.refreshTurns(0);
      p.onClose();
    } catch (e) {
      setErr(errText(e));
    } finally {
      setBusy(false);
    }
  };
  return html`<div class="action-panel revert-panel" role="dialog" aria-label="revert this turn">
    <p>Put the workspace’s files back as they were <b>before this turn</b>; the changes of every later turn go too. This turn changed:</p>
    ${files.length
      ? html`<ul class="file-list">
          ${files.map((f) => html`<li key=${f.path}><span class=${'fmark fs-' + f.status}>${STATUS_MARK[f.status] ?? '?'}</span>
            <span class="mono">${f.path}</span> ${f.binary ? html`<span class="muted">binary</span>` : html`<span class="add">+${f.additions}</span> <span class="del">−${f.deletions}</span>`}</li>`)}
          ${row.changes?.files_truncated ? html`<li class="muted">… and ${row.changes.files_changed - files.length} more</li>` : null}
        </ul>`
      : html`<p class="muted">(the list of its files is not known: it ended before its changes were recorded)</p>`}
    <p class="warning" role="note">⚠ ${SIDE_EFFECTS} The revert can itself be undone.</p>
    ${err ? html`<p class="error-line" role="alert">${err}</p>` : null}
    <div class="panel-buttons">
      <button type="button" class="danger small" id="confirm-revert" disabled=${busy || !row.revertible} onClick=${() => void go()}>${busy ? 'Reverting…' : 'Revert the files'}</button>
      <button type="button" class="small ghost" onClick=${p.onClose}>Keep them</button>
      ${!row.revertible ? html`<span class="muted small">a turn is running: revert when it ends</span>` : null}
    </div>
  </div>`;
}

/** What a fork panel says and names: "Fork from here" on a turn, "Edit" on a prompt. */
interface ForkWording {
  /** The panel's class and aria-label. */
  cls: string;
  label: string;
  intro: () => VNode;
  /** The files box's id and text (shown where the server takes checkpoints). */
  filesId: string;
  files: string;
  confirmId: string;
  confirm: string;
  busy: string;
  /** Said when the fork is made but its files could not be put back. */
  restoreFailed: string;
}

const FORK_HERE: ForkWording = {
  cls: 'fork-panel',
  label: 'fork from here',
  intro: () => html`<p>A new session with this conversation up to here, on the same workspace; this one stays as it is.</p>`,
  filesId: 'fork-files',
  files: 'also put the workspace’s files back as they were here (this session shares them, so they change for it too)',
  confirmId: 'confirm-fork',
  confirm: 'Fork',
  busy: 'Forking…',
  restoreFailed: 'Forked, but the files could not be put back: ',
};

const EDIT_PROMPT: ForkWording = {
  cls: 'edit-panel',
  label: 'edit this prompt',
  intro: () => html`<p>Opens a copy of this session that ends <b>just before this prompt</b>, with the prompt in the message box to change and send. This session stays as it is.</p>`,
  filesId: 'edit-files',
  files: 'also put the workspace’s files back as they were before this prompt (this session shares them, so they change for it too)',
  confirmId: 'confirm-edit',
  confirm: 'Edit in a copy',
  busy: 'Copying…',
  restoreFailed: 'The copy is made, but the files could not be put back: ',
};

/**
 * A fork's panel: a copy of the session that ends at messageId (its files
 * too, if asked), opened at once; draft, if any, waits in the copy's
 * message box.
 */
function ForkPanel(p: { live: LiveSession; messageId: string; draft?: string; w: ForkWording; note?: VNode | null; onClose: () => void }): VNode {
  const { live, w } = p;
  const [busy, setBusy] = useState(false);
  const [files, setFiles] = useState(false);
  const [err, setErr] = useState('');
  const on = live.checkpoints.value?.enabled === true;
  const go = async (): Promise<void> => {
    setBusy(true);
    setErr('');
    try {
      const f = await api.fork(live.sessionId, { message_id: p.messageId, ...(files ? { checkpoint: true } : {}) });
      if (f.restore_error) live.say('warn', w.restoreFailed + f.restore_error, 10_000);
      if (p.draft !== undefined) leaveDraft(f.id, p.draft);
      location.hash = href({ page: 'session', id: f.id, tab: 'chat' });
    } catch (e) {
      setErr(errText(e));
      setBusy(false);
    }
  };
  return html`<div class=${'action-panel ' + w.cls} role="dialog" aria-label=${w.label}>
    ${w.intro()}
    ${on
      ? html`<label class="check"><input type="checkbox" id=${w.filesId} checked=${files} onChange=${(e: Event) => setFiles((e.target as HTMLInputElement).checked)} />
          ${w.files}</label>`
      : null}
    ${p.note ?? null}
    ${err ? html`<p class="error-line" role="alert">${err}</p>` : null}
    <div class="panel-buttons">
      <button type="button" class="primary small" id=${w.confirmId} disabled=${busy} onClick=${() => void go()}>${busy ? w.busy : w.confirm}</button>
      <button type="button" class="small ghost" onClick=${p.onClose}>Cancel</button>
    </div>
  </div>`;
}

/** A prompt's Edit button and the panel it opens; before is the message before the prompt. */
export function PromptActions(p: { live: LiveSession; text: string; before: string; running: boolean }): VNode {
  const [open, setOpen] = useState(false);
  const note = p.running
    ? html`<p class="muted small">A turn is running: the copy can be made (it ends before this prompt), but not with the files until the turn ends.</p>`
    : null;
  return html`<span class="prompt-actions">
    <button type="button" class="small ghost edit-btn" aria-expanded=${open}
      title="Change this prompt and ask again, in a copy of the session that ends just before it"
      onClick=${() => setOpen(!open)}>Edit</button>
    ${open ? html`<${ForkPanel} live=${p.live} messageId=${p.before} draft=${p.text} w=${EDIT_PROMPT} note=${note} onClose=${() => setOpen(false)} />` : null}
  </span>`;
}

/** The last revert (or undo, or restoring fork): what it put back, its warning, and Undo. */
export function RevertBar(p: { live: LiveSession }): VNode | null {
  const { live } = p;
  const r = live.lastRevert.value;
  const [busy, setBusy] = useState(false);
  if (!r) return null;
  const what = r.trigger === 'undo' ? 'Revert undone' : r.trigger === 'fork' ? 'Files put back for the fork' : 'Files put back to before the turn';
  const n = (r.restored?.length ?? 0) + (r.removed?.length ?? 0);
  const undo = async (): Promise<void> => {
    setBusy(true);
    try {
      live.lastRevert.value = await api.restoreCheckpoint(live.sessionId, r.undo_checkpoint_id);
      live.refreshTurns(0);
    } catch (e) {
      live.say('error', 'Could not undo: ' + errText(e));
    } finally {
      setBusy(false);
    }
  };
  const list = [...(r.restored ?? []).map((x) => '~ ' + x), ...(r.removed ?? []).map((x) => '− ' + x)];
  return html`<div class="revert-bar" id="revert-bar" role="status">
    <div class="row">
      <b>${what}</b>
      <span class="muted">${n} file${n === 1 ? '' : 's'}: ${r.restored?.length ?? 0} restored, ${r.removed?.length ?? 0} removed${r.failed?.length ? `, ${r.failed.length} failed` : ''}</span>
      <span class="spacer"></span>
      ${r.undo_checkpoint_id
        ? html`<button type="button" class="small" id="undo-revert" disabled=${busy} title="Restore the files as they were just before this"
            onClick=${() => void undo()}>Undo</button>`
        : null}
      <button type="button" class="small ghost" aria-label="dismiss" onClick=${() => (live.lastRevert.value = null)}>×</button>
    </div>
    ${list.length ? html`<div class="mono small files">${list.slice(0, 12).join('  ')}${list.length > 12 ? ` … ${list.length - 12} more` : ''}</div>` : null}
    ${r.warning ? html`<div class="warning small">⚠ ${r.warning}</div>` : null}
  </div>`;
}
