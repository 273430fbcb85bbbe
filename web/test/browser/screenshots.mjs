// Writes docs/dashboard/*.png: every page of the dashboard at 1280x800,
// light and dark, against a real server with a few demo sessions.
//
//   go build -o bin/metis ./cmd/metis && node --experimental-websocket web/test/browser/screenshots.mjs
import { mkdirSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Server, launch, live, openPage } from './harness.mjs';

const out = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../../docs/dashboard');
mkdirSync(out, { recursive: true });

const srv = await new Server(['--demo-delay', '5ms']).start();
const browser = await launch();
try {
  // A planner with a tool round trip, two delegations and a cancelled turn;
  // a second, plain session.
  const a = await srv.createSession();
  await srv.submit(a.id, 'what is in my workspace?');
  await srv.idle(a.id);
  await srv.submit(a.id, '/tool delegate {"task": "summarise README.md", "model": "builtin:demo"}');
  await srv.idle(a.id);
  await srv.submit(a.id, '/tool delegate {"task": "/echo The tests pass on this branch.", "model": "builtin:demo"}');
  await srv.idle(a.id);
  const b = await srv.createSession();
  await srv.submit(b.id, '/echo Hello from a second session. **Markdown** renders once a message completes: `code`, lists and links.');
  await srv.idle(b.id);

  for (const scheme of ['light', 'dark']) {
    const { page, close } = await openPage(browser, `${srv.url}/#/`, { colorScheme: scheme });
    const shot = async (name) => page.screenshot({ path: path.join(out, `${name}-${scheme}.png`) });
    await page.waitForSelector('table.sessions tbody tr');
    await page.waitForFunction(() => ![...document.querySelectorAll('td.title')].some((td) => /^(…|untitled)$/.test(td.textContent.trim())));
    await shot('sessions');

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
    await page.keyboard.press('Control+k');
    await page.waitForSelector('#palette-input');
    await shot('palette');
    await page.keyboard.press('Escape');
    await close();
  }
  console.log('wrote', out);
} finally {
  await browser.close();
  await srv.close();
}
