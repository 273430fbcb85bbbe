// Drafts handed from one session page to the next: "Edit" on a prompt
// forks the session just before it and opens the copy with the prompt
// in its composer, to change and send. A draft is taken once.
const drafts = new Map<string, string>();

/** leaveDraft puts text in the composer of the session page opened next for sessionId. */
export function leaveDraft(sessionId: string, text: string): void {
  drafts.set(sessionId, text);
}

/** takeDraft is the draft left for sessionId ('' when none), and forgets it. */
export function takeDraft(sessionId: string): string {
  const t = drafts.get(sessionId) ?? '';
  drafts.delete(sessionId);
  return t;
}
