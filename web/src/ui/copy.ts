// Copy buttons. Code blocks are plain nodes from the markdown renderer
// (no handlers in model output), so one delegated click handler serves
// every button with data-copy="code": it copies the text of the block's
// code. Other buttons call copyText with what they copy.

/** Copies text to the clipboard; resolves false when the browser refused. */
export async function copyText(text: string): Promise<boolean> {
  try {
    await navigator.clipboard.writeText(text);
    return true;
  } catch {
    // No clipboard API (an http page on another host): a selected textarea.
    const ta = document.createElement('textarea');
    ta.value = text;
    ta.setAttribute('readonly', '');
    ta.className = 'offscreen';
    document.body.append(ta);
    ta.select();
    let ok = false;
    try {
      ok = document.execCommand('copy');
    } catch {
      ok = false;
    }
    ta.remove();
    return ok;
  }
}

/** Marks a button as done for a moment ("Copied"). */
export function flash(btn: HTMLElement, ok: boolean): void {
  const cls = ok ? 'copied' : 'copy-failed';
  btn.classList.add(cls);
  setTimeout(() => btn.classList.remove(cls), 1200);
}

/** Installs the delegated handler for code blocks' copy buttons; returns its remover. */
export function installCopy(): () => void {
  const onClick = (e: MouseEvent): void => {
    const btn = (e.target as Element | null)?.closest?.('button[data-copy="code"]');
    if (!(btn instanceof HTMLElement)) return;
    const code = btn.closest('.md-codeblock')?.querySelector('code')?.textContent ?? '';
    void copyText(code).then((ok) => flash(btn, ok));
  };
  document.addEventListener('click', onClick);
  return () => document.removeEventListener('click', onClick);
}
