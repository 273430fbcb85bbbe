// Driving the conversation from the dashboard (issue 26), in a real
// chromium against the real binary, at desktop and phone sizes: Enter
// queues while a turn runs, the queue shows with places and cancels, Steer
// sends into the running turn (and a 409 turn_cancelling says to queue);
// what is typed while a message is sending stays in the box;
// images by the file picker, paste and drop, with thumbnails, the limits
// and the server's invalid_image; the images of a sent message load under
// the CSP; revert with its warning, its undo; fork from here; Edit on a
// prompt (a copy that ends before it, the prompt in the box); background
// commands with their state (issue 23); the mode under its own name and
// one Cancel control (issue 27).
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { Server, browserSuite, live, until } from './harness.mjs';

// One chromium for this file; no page may see a CSP violation or an error.
const open = browserSuite();

const SIZES = [
  { name: 'desktop', viewport: { width: 1280, height: 800 } },
  { name: 'phone', viewport: { width: 390, height: 844 }, touch: true },
];

/** A 2x2 PNG (checked by the server: it decodes). */
const PNG = Buffer.from(
  'iVBORw0KGgoAAAANSUhEUgAAAAIAAAACCAIAAAD91JpzAAAAEUlEQVR4nGP4z8DA8B+MgBgAHfAD/dPQfSYAAAAASUVORK5CYII=',
  'base64',
);

async function autoSession(srv) {
  const s = await srv.createSession();
  await srv.req('PATCH', `/sessions/${s.id}`, { mode: 'auto' });
  return s;
}

async function noSideScroll(page, what) {
  const w = await page.evaluate(() => document.documentElement.scrollWidth);
  const vw = page.viewportSize().width;
  assert.ok(w <= vw, `${what}: ${w} px wide in a ${vw} px window`);
}

/** A shell call that runs until srv.release('turn'). */
const gated = (srv) => '/tool shell ' + JSON.stringify({ command: srv.gate('turn') });

async function type(page, text) {
  await page.fill('#composer', text);
  await page.press('#composer', 'Enter');
}

for (const size of SIZES) {
  test(`while a turn runs Enter queues, the queue shows places and cancels, Steer enters the turn; one Cancel (${size.name})`, async () => {
    const srv = await new Server(['--demo-delay', '2ms']).start();
    try {
      const s = await autoSession(srv);
      const obs = await srv.observe(s.id);
      const { page } = await open(`${srv.url}/#/s/${s.id}`, size);
      await live(page);
      await type(page, gated(srv));
      await page.waitForSelector('#turn-status.st-in_flight');
      await page.waitForSelector('#steer');
      assert.equal(await page.textContent('#send'), 'Queue');
      // One cancel control for the running turn on this tab.
      const cancels = await page.$$eval('button', (bs) => bs.filter((b) => /^cancel( turn)?$/i.test(b.textContent.trim()) && !b.classList.contains('cancel-queued')).length);
      assert.equal(cancels, 1, 'one Cancel for the running turn');
      await type(page, '/echo queued one');
      // As a user sees it: the first is queued and the box is empty again (sent), then the second goes.
      await page.waitForSelector('#queue .queued');
      await until(async () => (await page.inputValue('#composer')) === '', 10_000, 'the first sent');
      await type(page, '/echo queued two');
      await page.waitForSelector('#queue .queued:nth-of-type(2)');
      assert.deepEqual(await page.$$eval('#queue .queued .pos', (l) => l.map((x) => x.textContent)), ['next', '#2']);
      assert.match(await page.textContent('#queue'), /queued one[\s\S]*queued two/);
      // Cancel the second before it starts: it leaves the queue, ended in phase queued.
      await page.click('#queue .queued:nth-of-type(2) .cancel-queued');
      await until(async () => (await page.$$('#queue .queued')).length === 1, 10_000, 'one queued left');
      await until(() => obs.events.some((e) => e.type === 'turn.cancelled' && e.payload.phase === 'queued'), 10_000, 'turn.cancelled phase queued');
      // Steer: pending first, then inside the running turn's block.
      await page.fill('#composer', '/echo steered in');
      await page.click('#steer');
      // Pending while the command runs; the turn takes it at its next model call.
      await page.waitForSelector('#queue .steer-pending');
      srv.release('turn');
      await page.waitForSelector('.turn .msg-steered', { timeout: 20_000 });
      assert.match(await page.textContent('.turn .msg-steered'), /steered in/);
      assert.ok(obs.events.some((e) => e.type === 'turn.steered'), 'turn.steered emitted');
      // The queued turn then runs; the queue empties.
      await until(async () => (await srv.messages(s.id)).messages.some((m) => m.role === 'assistant' && JSON.stringify(m.content).includes('queued one')), 30_000, 'the queued turn answered');
      await page.waitForSelector('#queue', { state: 'detached' });
      await noSideScroll(page, 'conversation');
      obs.close();
      // After a reload (replay from the snapshot) the steered message is still inside its turn.
      await page.reload();
      await live(page);
      await page.waitForSelector('.turn .msg-steered');
    } finally {
      await srv.close();
    }
  });
}

/** Runs fn on a page of a session whose turn is held running (a gated shell call), steer offered. */
async function withRunningTurn(fn) {
  const srv = await new Server(['--demo-delay', '2ms']).start();
  try {
    const s = await autoSession(srv);
    const { page } = await open(`${srv.url}/#/s/${s.id}`);
    await live(page);
    await type(page, gated(srv));
    await page.waitForSelector('#steer');
    await fn(srv, page);
  } finally {
    await srv.close();
  }
}

test('a steer into a turn being cancelled says to queue instead, and keeps the text', () =>
  withRunningTurn(async (srv, page) => {
    // The server's answer to a steer while the turn is being cancelled (a window too short to hit reliably by timing).
    await page.route('**/turns', (route) =>
      route.request().method() === 'POST' && JSON.parse(route.request().postData() ?? '{}').steer
        ? route.fulfill({ status: 409, contentType: 'application/json', body: JSON.stringify({ error: { code: 'turn_cancelling', message: 'the turn is being cancelled' } }) })
        : route.continue(),
    );
    await page.fill('#composer', 'change of plan');
    await page.click('#steer');
    await page.waitForSelector('#composer-problem');
    assert.match(await page.textContent('#composer-problem'), /being cancelled[\s\S]*queue/);
    assert.equal(await page.inputValue('#composer'), 'change of plan');
  }));

test('what is typed while a message is sending stays in the box; only the sent text leaves it', () =>
  withRunningTurn(async (srv, page) => {
    // The queue request is held until the next message is typed.
    let go;
    const held = new Promise((r) => (go = r));
    await page.route('**/turns', async (route) => {
      if (route.request().method() === 'POST') await held;
      await route.continue();
    });
    await type(page, '/echo the first');
    await until(async () => page.isDisabled('#send'), 10_000, 'sending');
    await page.fill('#composer', 'the next one, typed meanwhile');
    go();
    await page.waitForSelector('#queue .queued');
    await until(async () => !(await page.isDisabled('#send')), 10_000, 'sent');
    assert.equal(await page.inputValue('#composer'), 'the next one, typed meanwhile');
    srv.release('turn');
  }));

for (const size of SIZES) {
  test(`images: file picker, paste and drop show thumbnails with remove; limits; invalid_image; sent images load under the CSP (${size.name})`, async () => {
    const srv = await new Server(['--demo-delay', '2ms']).start();
    try {
      const s = await srv.createSession();
      const { page } = await open(`${srv.url}/#/s/${s.id}`, size);
      await live(page);
      await page.setInputFiles('#image-picker', [{ name: 'a.png', mimeType: 'image/png', buffer: PNG }]);
      await page.waitForSelector('#attachments .attachment img');
      // Paste and drop go through the same path.
      await page.evaluate((b64) => {
        const bytes = Uint8Array.from(atob(b64), (c) => c.charCodeAt(0));
        const dt = () => {
          const d = new DataTransfer();
          d.items.add(new File([bytes], 'p.png', { type: 'image/png' }));
          return d;
        };
        document.querySelector('#composer').dispatchEvent(new ClipboardEvent('paste', { clipboardData: dt(), bubbles: true, cancelable: true }));
        document.querySelector('form.composer').dispatchEvent(new DragEvent('drop', { dataTransfer: dt(), bubbles: true, cancelable: true }));
      }, PNG.toString('base64'));
      await until(async () => (await page.$$('#attachments .attachment')).length === 3, 5000, 'three thumbnails');
      await page.click('#attachments .attachment:nth-of-type(3) .remove');
      await until(async () => (await page.$$('#attachments .attachment')).length === 2, 5000, 'a thumbnail removed');
      // Checked before sending: not an image by its bytes, and too large.
      await page.setInputFiles('#image-picker', [
        { name: 'fake.png', mimeType: 'image/png', buffer: Buffer.from('not an image at all') },
        { name: 'big.png', mimeType: 'image/png', buffer: Buffer.concat([PNG, Buffer.alloc(6 * 1024 * 1024)]) },
      ]);
      await page.waitForSelector('#composer-problem');
      const problem = await page.textContent('#composer-problem');
      assert.match(problem, /fake\.png is not a PNG, JPEG, GIF or WebP image/);
      assert.match(problem, /big\.png is 6\.0 MB: at most 5\.0 MB/);
      assert.equal((await page.$$('#attachments .attachment')).length, 2);
      await noSideScroll(page, 'composer with images');
      await type(page, 'what is in these?');
      await page.waitForSelector('.msg-user .msg-image img');
      await until(async () => (await page.$$eval('.msg-user .msg-image img', (l) => l.map((i) => i.complete && i.naturalWidth))).every((w) => w === 2), 10_000, 'the images loaded');
      assert.equal((await page.$$('.msg-user .msg-image img')).length, 2);
      assert.equal((await page.$$('#attachments')).length, 0, 'sent: the thumbnails are gone');
      await srv.idle(s.id);
      // A truncated PNG passes the signature check here; the server refuses it, nothing is sent.
      await page.setInputFiles('#image-picker', [{ name: 'cut.png', mimeType: 'image/png', buffer: PNG.subarray(0, 40) }]);
      await page.waitForSelector('#attachments .attachment');
      await type(page, 'and this one?');
      await page.waitForSelector('#composer-problem');
      assert.match(await page.textContent('#composer-problem'), /image was refused/);
      assert.equal(await page.inputValue('#composer'), 'and this one?');
      assert.equal((await srv.messages(s.id)).messages.filter((m) => m.role === 'user').length, 1);
    } finally {
      await srv.close();
    }
  });
}

for (const size of SIZES) {
  test(`revert lists the files and warns before the click, undo puts them back; fork from here opens the fork, which links back (${size.name})`, async () => {
    const srv = await new Server(['--demo-delay', '2ms']).start();
    try {
      const s = await autoSession(srv);
      await srv.req('POST', `/sessions/${s.id}/turns`, { content: 'a picture', images: [{ media_type: 'image/png', data: PNG.toString('base64') }] });
      await srv.idle(s.id);
      await srv.submit(s.id, '/tool write_file {"path": "notes.md", "content": "one\\n"}');
      await srv.idle(s.id);
      const file = path.join(srv.workspace, 'notes.md');
      assert.ok(existsSync(file));
      const { page } = await open(`${srv.url}/#/s/${s.id}`, size);
      await live(page);
      await page.click('.revert-btn');
      await page.waitForSelector('.revert-panel');
      const panel = await page.textContent('.revert-panel');
      assert.match(panel, /notes\.md/);
      assert.match(panel, /not undone/);
      await noSideScroll(page, 'revert panel');
      await page.click('#confirm-revert');
      await page.waitForSelector('#revert-bar');
      assert.match(await page.textContent('#revert-bar'), /1 removed[\s\S]*not undone/);
      assert.ok(!existsSync(file), 'the file the turn added is gone');
      await page.click('#undo-revert');
      await until(() => existsSync(file), 10_000, 'the undo put the file back');
      await until(async () => /Revert undone/.test(await page.textContent('#revert-bar')), 5000, 'the bar says undone');
      // Fork from here.
      await page.click('.fork-btn');
      await page.click('#confirm-fork');
      await until(async () => !page.url().includes(s.id), 10_000, 'navigated to the fork');
      await live(page);
      await page.waitForSelector('#forked-from');
      assert.equal(await page.getAttribute('#forked-from', 'href'), `#/s/${s.id}`);
      const fid = /#\/s\/([^/]+)/.exec(page.url())[1];
      assert.equal((await srv.req('GET', `/sessions/${fid}`)).session.forked_from.session_id, s.id);
      await page.waitForSelector('.turn');
      // The fork's copy of the message with an image shows it.
      await until(async () => (await page.$$eval('.msg-user .msg-image img', (l) => l.map((i) => i.complete && i.naturalWidth))).join() === '2', 10_000, 'the fork shows the image');
      await noSideScroll(page, 'fork');
    } finally {
      await srv.close();
    }
  });
}

for (const size of SIZES) {
  test(`Edit on a prompt opens a copy that ends just before it, the files put back, the prompt in the box (${size.name})`, async () => {
    const srv = await new Server(['--demo-delay', '2ms']).start();
    try {
      const s = await autoSession(srv);
      await srv.submit(s.id, '/tool write_file {"path": "notes.md", "content": "one\\n"}');
      await srv.idle(s.id);
      await srv.submit(s.id, '/tool write_file {"path": "notes.md", "content": "two\\n"}');
      await srv.idle(s.id);
      const file = path.join(srv.workspace, 'notes.md');
      const { page } = await open(`${srv.url}/#/s/${s.id}`, size);
      await live(page);
      // The first prompt has nothing before it: no Edit; the second has one.
      await page.waitForSelector('.msg-user .edit-btn');
      assert.equal((await page.$$('.msg-user .edit-btn')).length, 1);
      await page.click('.msg-user .edit-btn');
      await page.waitForSelector('.edit-panel');
      assert.match(await page.textContent('.edit-panel'), /just before this prompt[\s\S]*stays as it is/);
      await noSideScroll(page, 'edit panel');
      await page.check('#edit-files');
      await page.click('#confirm-edit');
      await until(async () => !page.url().includes(s.id), 10_000, 'navigated to the copy');
      await live(page);
      assert.equal(await page.inputValue('#composer'), '/tool write_file {"path": "notes.md", "content": "two\\n"}');
      assert.equal(await page.evaluate(() => document.activeElement?.id), 'composer');
      const fid = /#\/s\/([^/]+)/.exec(page.url())[1];
      const fork = await srv.messages(fid);
      assert.equal(fork.messages.filter((m) => m.role === 'user').length, 1, 'the copy ends before the edited prompt');
      await until(() => readFileSync(file, 'utf8') === 'one\n', 10_000, 'the files are as before the prompt');
      // The session edited is unchanged; sending the draft runs it in the
      // copy (whose mode is the server's default, as a fork's is: auto here
      // so that the write does not ask).
      assert.equal((await srv.messages(s.id)).messages.filter((m) => m.role === 'user').length, 2);
      await srv.req('PATCH', `/sessions/${fid}`, { mode: 'auto' });
      await page.fill('#composer', '/tool write_file {"path": "notes.md", "content": "three\\n"}');
      await page.press('#composer', 'Enter');
      await srv.idle(fid);
      await until(() => readFileSync(file, 'utf8') === 'three\n', 10_000, 'the edited prompt ran in the copy');
    } finally {
      await srv.close();
    }
  });
}

test('background commands show with their state, live and after a reload', async () => {
  const srv = await new Server(['--demo-delay', '2ms']).start();
  try {
    const s = await autoSession(srv);
    const { page } = await open(`${srv.url}/#/s/${s.id}`);
    await live(page);
    await srv.submit(s.id, '/tool shell {"command": "sleep 60", "background": true}');
    await page.waitForSelector('#bg-commands .bg-command[data-running=true]', { timeout: 20_000 });
    assert.match(await page.textContent('#bg-commands'), /1 running[\s\S]*\$ sleep 60/);
    await srv.idle(s.id);
    // Cancelling nothing, the command still runs after its turn; a reload shows it from the summary.
    await page.reload();
    await live(page);
    await page.waitForSelector('#bg-commands .bg-command[data-running=true]');
    const { session } = await srv.req('GET', `/sessions/${s.id}`);
    const id = session.background_commands[0].id;
    await srv.submit(s.id, `/tool shell_kill {"id": "${id}"}`);
    await page.waitForSelector('#bg-commands .bg-command[data-running=false]', { state: 'attached', timeout: 20_000 });
    assert.match(await page.textContent('#bg-commands .bg-command'), /killed/);
    await srv.idle(s.id);
    await page.reload();
    await live(page);
    await page.waitForSelector('#bg-commands .bg-command[data-running=false]', { state: 'attached' });
    assert.match(await page.textContent('#bg-commands'), /0 running/);
  } finally {
    await srv.close();
  }
});

test('the mode select names the session’s mode as the API does, and follows a change made elsewhere', async () => {
  const srv = await new Server(['--demo-delay', '2ms', '--default-mode', 'accept_edits']).start();
  try {
    const s = await srv.createSession();
    const { page } = await open(`${srv.url}/#/s/${s.id}`);
    await live(page);
    const shown = () => page.$eval('#mode-select', (e) => [e.value, e.options[e.selectedIndex].text]);
    assert.deepEqual(await shown(), ['accept_edits', 'accept edits']);
    await srv.req('PATCH', `/sessions/${s.id}`, { mode: 'default' });
    await until(async () => (await shown())[0] === 'default', 5000, 'the mode followed');
    assert.match((await shown())[1], /^default/);
  } finally {
    await srv.close();
  }
});
