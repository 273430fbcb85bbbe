// One DOM update per animation frame: callers mark work dirty as often as
// events arrive; the flush runs once, in the next frame.
import { signal } from '@preact/signals';

/** A counter that bumps at most once per animation frame after poke(). */
export class FrameTicker {
  readonly tick = signal(0);
  private pending = 0;

  /** Ask for a re-render in the next animation frame (coalesced). */
  poke = (): void => {
    if (this.pending) return;
    this.pending = requestAnimationFrame(() => {
      this.pending = 0;
      this.tick.value++;
    });
  };

  dispose(): void {
    if (this.pending) cancelAnimationFrame(this.pending);
    this.pending = 0;
  }
}
