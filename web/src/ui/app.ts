// The dashboard's shell: the top bar, the page for the route, the
// palette, and the global keys (Ctrl/Cmd+K, Esc).
import { html } from 'htm/preact';
import type { VNode } from 'preact';
import { useEffect } from 'preact/hooks';
import { Palette, paletteOpen } from './palette';
import { route } from './route';
import { SessionPage } from './session';
import { SessionsPage } from './sessions';
import { cycleTheme, resolvedTheme, themeChoice } from './theme';

export function App(): VNode {
  useEffect(() => {
    const onKey = (e: KeyboardEvent) => {
      if ((e.ctrlKey || e.metaKey) && e.key.toLowerCase() === 'k') {
        e.preventDefault();
        paletteOpen.value = !paletteOpen.value;
      } else if (e.key === 'Escape' && paletteOpen.value) {
        paletteOpen.value = false;
      }
    };
    addEventListener('keydown', onKey);
    return () => removeEventListener('keydown', onKey);
  }, []);
  const r = route.value;
  const theme = resolvedTheme();
  return html`<div class="app">
    <header class="topbar">
      <a class="brand" href="#/">metis</a>
      <span class="spacer"></span>
      <button class="small ghost" id="palette-button" onClick=${() => (paletteOpen.value = true)} title="Command palette">
        <kbd>${navigator.platform.startsWith('Mac') ? '⌘' : 'Ctrl'}</kbd> <kbd>K</kbd>
      </button>
      <button class="small ghost" id="theme-toggle" onClick=${cycleTheme}
        title=${'Theme: ' + themeChoice.value + ' (click to switch)'}>${theme === 'dark' ? '☾ dark' : '☀ light'}${themeChoice.value === 'system' ? ' (system)' : ''}</button>
    </header>
    <main>
      ${r.page === 'sessions' ? html`<${SessionsPage} />` : html`<${SessionPage} key=${r.id} id=${r.id} tab=${r.tab} />`}
    </main>
    <${Palette} />
  </div>`;
}
