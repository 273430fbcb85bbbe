// Virtualized lists: only the rows in (or near) the viewport are in the
// DOM, so a 5,000-message conversation or a 50,000-event trace costs
// what a screenful costs.
//
// VirtualList measures rows of any height (a ResizeObserver keeps a
// height per key, unmeasured rows count at the estimate) and keeps the
// first visible row still when rows above it change or older rows are
// prepended. With `follow`, a list scrolled to the bottom stays at the
// bottom as rows grow or arrive (a streaming message).
import { h, type VNode } from 'preact';
import { useLayoutEffect, useMemo, useRef, useState } from 'preact/hooks';

export interface VirtualListProps<T> {
  items: readonly T[];
  keyOf: (item: T, index: number) => string;
  render: (item: T, index: number) => VNode;
  /** Estimated row height in px (exact for fixed rows). */
  estimate: number;
  /** Every row is exactly `estimate` px high (no measuring). */
  fixed?: boolean;
  /** Stay at the bottom while scrolled there. */
  follow?: boolean;
  /** Called when the user scrolls near the top (load older rows). */
  onNearTop?: () => void;
  /** Called when the bottom-stickiness changes (the user scrolled away or back). */
  onAtBottom?: (atBottom: boolean) => void;
  class?: string;
  overscan?: number;
  /** Bump to force a scroll to the bottom. */
  scrollToBottom?: number;
  label?: string;
  /** Bump when `items` changed in place (props are compared shallowly). */
  version?: number;
}

const NEAR = 48;

export function VirtualList<T>(p: VirtualListProps<T>): VNode {
  const box = useRef<HTMLDivElement>(null);
  const heights = useRef(new Map<string, number>()).current;
  const observed = useRef(new Set<HTMLElement>()).current;
  const pendingMeasure = useRef(0);
  const [, setMeasured] = useState(0);
  const [scroll, setScroll] = useState({ top: 0, height: 600 });
  const atBottom = useRef(true);
  const anchor = useRef<{ key: string; delta: number } | null>(null);
  const overscan = p.overscan ?? 6;

  const observer = useMemo(
    () =>
      typeof ResizeObserver === 'undefined'
        ? null
        : new ResizeObserver((entries) => {
            let changed = false;
            for (const e of entries) {
              const el = e.target as HTMLElement;
              const k = el.dataset.vkey;
              if (!k) continue;
              const hgt = el.offsetHeight;
              if (hgt > 0 && heights.get(k) !== hgt) {
                heights.set(k, hgt);
                changed = true;
              }
            }
            // One re-render per frame for however many rows changed.
            if (changed && !pendingMeasure.current) {
              pendingMeasure.current = requestAnimationFrame(() => {
                pendingMeasure.current = 0;
                setMeasured((n) => n + 1);
              });
            }
          }),
    [],
  );
  useLayoutEffect(
    () => () => {
      observer?.disconnect();
      cancelAnimationFrame(pendingMeasure.current);
    },
    [observer],
  );

  const n = p.items.length;
  // Variable rows need every key (their heights are stored by key); fixed
  // rows only those rendered, so a 50,000-row list costs a screenful.
  const keys = new Array<string>(p.fixed ? 0 : n);
  if (!p.fixed) for (let i = 0; i < n; i++) keys[i] = p.keyOf(p.items[i], i);
  const keyAt = (i: number): string => (p.fixed ? p.keyOf(p.items[i], i) : keys[i]);

  // Offsets: constant-time for fixed rows, a prefix sum otherwise.
  let total: number;
  let offsetOf: (i: number) => number;
  let indexAt: (y: number) => number;
  if (p.fixed) {
    total = n * p.estimate;
    offsetOf = (i) => i * p.estimate;
    indexAt = (y) => Math.max(0, Math.min(n - 1, Math.floor(y / p.estimate)));
  } else {
    const offs = new Float64Array(n + 1);
    for (let i = 0; i < n; i++) offs[i + 1] = offs[i] + (heights.get(keys[i]) ?? p.estimate);
    total = offs[n];
    offsetOf = (i) => offs[i];
    indexAt = (y) => {
      let lo = 0;
      let hi = n - 1;
      while (lo < hi) {
        const mid = (lo + hi + 1) >> 1;
        if (offs[mid] <= y) lo = mid;
        else hi = mid - 1;
      }
      return Math.max(0, lo);
    };
  }

  const first = n ? Math.max(0, indexAt(scroll.top) - overscan) : 0;
  const last = n ? Math.min(n - 1, indexAt(scroll.top + scroll.height) + overscan) : -1;

  // After each render: stop measuring rows that left the DOM, then keep
  // the anchor row still, or stay at the bottom.
  useLayoutEffect(() => {
    for (const r of observed) {
      if (!r.isConnected) {
        observer?.unobserve(r);
        observed.delete(r);
      }
    }
    const el = box.current;
    if (!el) return;
    if (p.follow && atBottom.current) {
      el.scrollTop = el.scrollHeight;
    } else if (anchor.current && !p.fixed) {
      const i = keys.indexOf(anchor.current.key);
      if (i >= 0) {
        const want = offsetOf(i) - anchor.current.delta;
        if (Math.abs(el.scrollTop - want) > 1) el.scrollTop = want;
      }
    }
    const first = n && !p.fixed ? indexAt(el.scrollTop) : -1;
    anchor.current = first >= 0 ? { key: keys[first], delta: offsetOf(first) - el.scrollTop } : null;
  });
  useLayoutEffect(() => {
    const el = box.current;
    if (el && p.scrollToBottom) {
      atBottom.current = true;
      el.scrollTop = el.scrollHeight;
    }
  }, [p.scrollToBottom]);
  useLayoutEffect(() => {
    const el = box.current;
    if (!el) return;
    setScroll({ top: el.scrollTop, height: el.clientHeight });
    if (typeof ResizeObserver === 'undefined') return;
    const ro = new ResizeObserver(() => setScroll({ top: el.scrollTop, height: el.clientHeight }));
    ro.observe(el);
    return () => ro.disconnect();
  }, []);

  const onScroll = (): void => {
    const el = box.current;
    if (!el) return;
    const bottom = el.scrollHeight - el.scrollTop - el.clientHeight < NEAR;
    if (bottom !== atBottom.current) {
      atBottom.current = bottom;
      p.onAtBottom?.(bottom);
    }
    const fi = n && !p.fixed ? indexAt(el.scrollTop) : -1;
    anchor.current = fi >= 0 ? { key: keys[fi], delta: offsetOf(fi) - el.scrollTop } : null;
    setScroll({ top: el.scrollTop, height: el.clientHeight });
    if (el.scrollTop < 200) p.onNearTop?.();
  };

  const rows: VNode<any>[] = [];
  for (let i = first; i <= last; i++) {
    const k = keyAt(i);
    rows.push(
      h(
        'div',
        {
          key: k,
          class: 'vrow',
          'data-vkey': k,
          style: p.fixed ? { height: p.estimate + 'px' } : undefined,
          ref: p.fixed
            ? undefined
            : (el: HTMLDivElement | null) => {
                if (el && observer && !observed.has(el)) {
                  observed.add(el);
                  observer.observe(el);
                }
              },
        },
        p.render(p.items[i], i),
      ),
    );
  }
  const top = n ? offsetOf(first) : 0;
  const bottom = n ? total - offsetOf(last + 1) : 0;
  return h(
    'div',
    { ref: box, class: 'vlist ' + (p.class ?? ''), onScroll, role: 'list', 'aria-label': p.label, tabIndex: 0 },
    h('div', { class: 'vpad', style: { height: top + 'px' } }),
    rows,
    h('div', { class: 'vpad', style: { height: bottom + 'px' } }),
  );
}
