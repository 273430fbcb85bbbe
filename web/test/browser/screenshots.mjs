// Writes docs/dashboard/*.png: every page of the dashboard at 1280x800
// and at a phone's 390x844, light and dark, against a real server with a
// few demo sessions (markdown with a table and code, tool cards, an edit
// shown as a diff, an approval waiting, workers, the trace).
//
//   go build -o bin/metis ./cmd/metis && node --experimental-websocket web/test/browser/screenshots.mjs
import { mkdirSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Server, launch, live, openPage } from './harness.mjs';

const out = process.env.SHOTS_DIR || path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../../docs/dashboard');
mkdirSync(out, { recursive: true });

export const MARKDOWN = [
  '/echo ## What I found',
  '',
  'The workspace holds **two files**; `main.go` is empty:',
  '',
  '| file | lines | note |',
  '| --- | ---: | --- |',
  '| README.md | 1 | a title |',
  '| main.go | 1 | `package main` |',
  '',
  '```go',
  'package main',
  '',
  '// main does nothing yet.',
  'func main() {',
  '\tprintln("hello", 42)',
  '}',
  '```',
  '',
  '- [x] read the files',
  '- [ ] write the tests',
].join('\n');

const srv = await new Server(['--demo-delay', '5ms']).start();
const browser = await launch();
try {
  // A planner with a tool round trip and two delegations; a session with
  // markdown; one with an edit (a diff) and a shell call waiting for an
  // answer.
  const a = await srv.createSession();
  await srv.submit(a.id, 'what is in my workspace?');
  await srv.idle(a.id);
  await srv.submit(a.id, '/tool delegate {"task": "summarise README.md", "model": "builtin:demo"}');
  await srv.idle(a.id);
  await srv.submit(a.id, '/tool delegate {"task": "/echo The tests pass on this branch.", "model": "builtin:demo"}');
  await srv.idle(a.id);
  const b = await srv.createSession();
  await srv.submit(b.id, MARKDOWN);
  await srv.idle(b.id);
  const c = await srv.createSession();
  await srv.req('PATCH', `/sessions/${c.id}`, { mode: 'accept_edits' });
  await srv.submit(c.id, '/tool write_file {"path": "src/hello.go", "content": "package src\\n\\n// Hello greets.\\nfunc Hello() string { return \\"hi\\" }\\n"}');
  await srv.idle(c.id);
  await srv.submit(c.id, '/tool shell {"command": "go test ./... && git status --short"}');

  for (const [size, viewport] of [['', { width: 1280, height: 800 }], ['-phone', { width: 390, height: 844 }]]) {
    for (const scheme of ['light', 'dark']) {
      const { page, close } = await openPage(browser, `${srv.url}/#/`, { colorScheme: scheme, viewport });
      const shot = async (name) => page.screenshot({ path: path.join(out, `${name}${size}-${scheme}.png`) });
      await page.waitForSelector('table.sessions tbody tr');
      await page.waitForFunction(() => ![...document.querySelectorAll('td.title a')].some((a) => /^(…|untitled)$/.test(a.textContent.trim())));
      await page.waitForSelector('#new-model option:nth-child(2)', { state: 'attached' }).catch(() => {});
      await shot('sessions');

      await page.goto(`${srv.url}/#/s/${b.id}`);
      await live(page);
      await page.waitForSelector('.md-table');
      await shot('markdown');

      await page.goto(`${srv.url}/#/s/${c.id}`);
      await live(page);
      await page.waitForSelector('.approval');
      await page.waitForTimeout(200);
      await shot('approval');

      await page.goto(`${srv.url}/#/s/${a.id}`);
      await live(page);
      // A turn cancelled mid-stream, shown as the page saw it.
      await srv.submit(a.id, '/long 300');
      await page.waitForSelector('.msg-assistant.msg-streaming');
      await page.waitForTimeout(600);
      await page.click('#cancel');
      await page.waitForSelector('#turn-status.st-cancelled');
      await page.waitForTimeout(300);
      await shot('session');

      await page.click('#tab-workers');
      await page.waitForSelector('[data-worker]');
      await shot('workers');

      await page.goto(`${srv.url}/#/s/${a.id}/trace`);
      await live(page);
      await srv.submit(a.id, 'what is in my workspace?');
      await srv.idle(a.id);
      await page.waitForSelector('.wf-row.wf-tool');
      await page.waitForTimeout(300);
      await page.click('.wf-row.wf-tool');
      await shot('trace');

      await page.mouse.move(1, 1);
      await page.click('#palette-button');
      await page.waitForSelector('#palette-input');
      await shot('palette');
      await page.keyboard.press('Escape');
      await close();
    }
  }
  console.log('wrote', out);
} finally {
  await browser.close();
  await srv.close();
}
