// Light and dark themes: follow the system unless the user picks one;
// the choice is kept in localStorage.
import { signal, effect } from '@preact/signals';

export type ThemeChoice = 'system' | 'light' | 'dark';

const KEY = 'metis.theme';

function stored(): ThemeChoice {
  try {
    const v = localStorage.getItem(KEY);
    if (v === 'light' || v === 'dark' || v === 'system') return v;
  } catch {
    /* storage disabled */
  }
  return 'system';
}

export const themeChoice = signal<ThemeChoice>(stored());
const media = typeof matchMedia === 'function' ? matchMedia('(prefers-color-scheme: dark)') : null;
const systemDark = signal(media?.matches ?? false);
media?.addEventListener('change', (e) => (systemDark.value = e.matches));

/** The theme in effect. */
export function resolvedTheme(): 'light' | 'dark' {
  const c = themeChoice.value;
  return c === 'system' ? (systemDark.value ? 'dark' : 'light') : c;
}

effect(() => {
  document.documentElement.dataset.theme = resolvedTheme();
  try {
    localStorage.setItem(KEY, themeChoice.value);
  } catch {
    /* storage disabled */
  }
});

/** system → the opposite of what shows → system again. */
export function cycleTheme(): void {
  const shown = resolvedTheme();
  const c = themeChoice.value;
  themeChoice.value = c === 'system' ? (shown === 'dark' ? 'light' : 'dark') : 'system';
}
