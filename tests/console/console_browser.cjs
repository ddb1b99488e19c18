// Drives the lote web console in Debian's chromium (puppeteer-core) for
// test_console.py. argv[2]: JSON {url, keyId, secret, trainJob, waitJob,
// artifacts, chromium}. Prints one JSON line of observations; exits non-zero
// with a message on the first failed expectation (after a screenshot).
'use strict';
const path = require('path');
const puppeteer = require('puppeteer-core');

const spec = JSON.parse(process.argv[2]);
const shot = (page, name) => page.screenshot({ path: path.join(spec.artifacts, name + '.png'), fullPage: true });
const report = {};

function expect(cond, message) {
  if (!cond) throw new Error('expectation failed: ' + message);
}

// Waits until fn() (run in the page) returns a truthy value.
// Clicks an element of a live page in one step of the page's own event loop: the
// page re-renders on its updates, so an element found first and clicked later by
// puppeteer (page.click) may have been replaced in between.
async function clickNow(page, selector) {
  await page.waitForSelector(selector);
  const clicked = await page.evaluate((sel) => {
    const el = document.querySelector(sel);
    if (!el) return false;
    el.click();
    return true;
  }, selector);
  if (!clicked) throw new Error('no ' + selector + ' to click');
}

async function until(page, what, fn, arg, timeout = 120000) {
  try {
    const handle = await page.waitForFunction(fn, { timeout, polling: 200 }, arg);
    return await handle.jsonValue();
  } catch (e) {
    throw new Error('timed out waiting for ' + what + ': ' + e.message);
  }
}

(async () => {
  const browser = await puppeteer.launch({
    executablePath: spec.chromium, headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--window-size=1280,900'],
  });
  const page = await browser.newPage();
  await page.setViewport({ width: 1280, height: 900 });
  const offHost = [];
  page.on('request', (r) => { const u = r.url(); if (/^(https?|wss?):/.test(u) && !u.startsWith(new URL(spec.url).origin)) offHost.push(u); });
  try {
    await page.goto(spec.url, { waitUntil: 'networkidle0' });
    // A wrong secret is refused.
    await page.waitForSelector('#signin-form');
    await page.type('#signin-id', spec.keyId);
    await page.type('#signin-secret', spec.secret + 'x');
    await page.click('#signin-submit');
    const refused = await until(page, 'the refusal', () => document.querySelector('#signin-error').textContent);
    expect(/refused/.test(refused), 'wrong secret refused: ' + refused);
    expect(await page.$('#nav[hidden]'), 'still signed out');
    await shot(page, 'signin-refused');

    // Sign in.
    await page.$eval('#signin-secret', (el) => { el.value = ''; });
    await page.type('#signin-secret', spec.secret);
    await page.click('#signin-submit');
    await page.waitForSelector('#queues');
    await until(page, 'the queues', () => document.querySelector('#queues').textContent.includes('train-q'));
    const cookies = await page.cookies();
    const c = cookies.find((k) => k.name === 'lote_console');
    expect(c && c.httpOnly && c.sameSite === 'Strict' && c.expires > Date.now() / 1000, 'session cookie ' + JSON.stringify(c));
    expect(await page.evaluate(() => document.cookie) === '', 'the cookie is not readable by scripts');
    await shot(page, 'overview');

    // The quarantined node: shown with its environment, times and why; released
    // through the confirmation dialog, it leaves the list.
    const qrow = 'tr[data-node="' + spec.quarantinedNode + '"]';
    const qtext = await until(page, 'the quarantined node', (sel) => {
      const row = document.querySelector('#quarantined ' + sel);
      return row && row.textContent;
    }, qrow);
    expect(qtext.includes('bad-ce') && /ended NODE_LOST or HANG/.test(qtext) && /\d{4}-\d\d-\d\d/.test(qtext),
      'the quarantined row: ' + qtext);
    report.quarantinedRow = qtext;
    const envCount = await page.$$eval('#envs tr', (rows) => {
      const row = rows.find((r) => r.cells[0] && r.cells[0].textContent === 'bad-ce');
      return row ? row.cells[row.cells.length - 1].textContent : null;
    });
    expect(envCount === '1', 'bad-ce counts one quarantined node: ' + envCount);
    await shot(page, 'quarantined');
    await clickNow(page, '#quarantined ' + qrow + ' button.release');
    await page.waitForSelector('#modal:not([hidden])');
    report.releaseConfirm = await page.$eval('#modal-text', (el) => el.textContent);
    expect((await page.$eval('#modal-ok', (el) => el.textContent)) === 'Release', 'the dialog offers Release');
    await clickNow(page, '#modal-ok');
    await until(page, 'the node to leave the list', (sel) =>
      !document.querySelector('#quarantined ' + sel) && document.querySelector('#quarantined').textContent.includes('No node is quarantined'), qrow);
    await shot(page, 'released');

    // The running 4-node training job appears in the jobs list.
    await page.goto(spec.url + '#/jobs?queue=train-q', { waitUntil: 'networkidle0' });
    await until(page, 'the training job RUNNING in the list', (id) => {
      const row = document.querySelector('tr[data-job-id="' + id + '"]');
      return row && row.textContent.includes('RUNNING') && row.textContent.includes('4 nodes');
    }, spec.trainJob);
    await shot(page, 'jobs');

    // Its page: status, nodes, masked environment.
    await page.goto(spec.url + '#/job/' + spec.trainJob, { waitUntil: 'networkidle0' });
    await until(page, 'the job page', () => document.querySelector('#job-status') && document.querySelector('#job-status').textContent === 'RUNNING');
    const envText = await page.$eval('#environment', (el) => el.textContent);
    expect(envText.includes('WANDB_API_KEY') && !envText.includes('secret-value-1234'), 'env masked: ' + envText);
    expect((await page.$$('#timeline .tl-row')).length === 4, 'a timeline row per node');
    await shot(page, 'job');
    // A job whose first attempt was killed by an injected fault: one marker, at that attempt's end.
    await page.goto(spec.url + '#/job/' + spec.faultJob, { waitUntil: 'networkidle0' });
    await until(page, 'the faulted job page', () => document.querySelector('#job-status') && document.querySelector('#job-status').textContent === 'SUCCEEDED');
    const faults = await page.$$eval('#timeline .tl-fault', (els) => els.map((e) => e.title));
    expect(faults.length === 1 && faults[0].includes('Injected fault: node 0 killed'), 'one injected-fault marker: ' + JSON.stringify(faults));
    await shot(page, 'job-fault');
    await page.goto(spec.url + '#/job/' + spec.trainJob, { waitUntil: 'networkidle0' });
    await until(page, 'the job page again', () => document.querySelector('#job-status') && document.querySelector('#job-status').textContent === 'RUNNING');
    await clickNow(page, '#reveal');
    await until(page, 'the revealed value', () => document.querySelector('#environment').textContent.includes('secret-value-1234'));

    // Training: the loss chart gains points as it trains.
    await page.goto(spec.url + '#/job/' + spec.trainJob + '/training', { waitUntil: 'networkidle0' });
    report.chartPointsFirst = Number(await until(page, 'loss points',
      () => { const c = document.querySelector('.chart[data-metric="loss"]'); return c && Number(c.dataset.points) >= 2 && c.dataset.points; }));
    report.chartPointsLater = Number(await until(page, 'more loss points', (n) => {
      const c = document.querySelector('.chart[data-metric="loss"]');
      return Number(c.dataset.points) > n && c.dataset.points;
    }, report.chartPointsFirst));
    expect(await page.$('.chart[data-metric="loss"] canvas'), 'the loss chart is drawn');
    for (const m of ['lr', 'grad_norm', 'tokens_per_s', 'mfu'])
      expect(await page.$('.chart[data-metric="' + m + '"]'), 'a chart of ' + m);
    await shot(page, 'training');

    // Logs: every node merged, following.
    await page.goto(spec.url + '#/job/' + spec.trainJob + '/logs', { waitUntil: 'networkidle0' });
    report.logLinesFirst = Number(await until(page, 'log lines',
      () => { const l = document.querySelector('#logs'); return l && Number(l.dataset.lines) > 0 && l.dataset.lines; }));
    report.logLinesLater = Number(await until(page, 'the logs to follow', (n) => {
      const l = document.querySelector('#logs');
      return Number(l.dataset.lines) > n && l.dataset.lines;
    }, report.logLinesFirst));
    report.logNodes = await page.$$eval('#logs [data-node]', (els) => [...new Set(els.map((e) => e.dataset.node))].sort());
    expect(report.logNodes.length >= 2, 'lines of several nodes merged: ' + report.logNodes);
    expect((await page.$$('a.download')).length === 4, 'a download link per node');
    await shot(page, 'logs');

    // The RUNNABLE job says why it waits.
    await page.goto(spec.url + '#/job/' + spec.waitJob, { waitUntil: 'networkidle0' });
    const why = await until(page, 'the explanation', () => document.querySelector('#why') && document.querySelector('#why').textContent);
    expect(/not running/i.test(why) && why.length > 30, 'why: ' + why);
    report.why = why;
    await shot(page, 'runnable');

    // A mutation without the CSRF token is refused, even from the page.
    const noCsrf = await page.evaluate(async (id) => (await fetch('/console/api/batch/TerminateJob', {
      method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ jobId: id, reason: 'x' }),
    })).status, spec.trainJob);
    expect(noCsrf === 403, 'no CSRF token: ' + noCsrf);

    // Terminate through the confirmation dialog; the page shows FAILED.
    await page.goto(spec.url + '#/job/' + spec.trainJob, { waitUntil: 'networkidle0' });
    await page.waitForSelector('#terminate');
    await clickNow(page, '#terminate');
    await page.waitForSelector('#modal:not([hidden])');
    await clickNow(page, '#modal-ok');
    await until(page, 'FAILED', () => document.querySelector('#job-status') && document.querySelector('#job-status').textContent === 'FAILED');
    await shot(page, 'terminated');
    expect(offHost.length === 0, 'requests to other hosts: ' + offHost.join(', '));
    console.log(JSON.stringify(report));
  } catch (e) {
    await shot(page, 'failure').catch(() => {});
    console.error(e.stack || String(e));
    console.error('page:', (await page.evaluate(() => document.body.innerText).catch(() => '')).slice(0, 2000));
    process.exitCode = 1;
  } finally {
    await browser.close();
  }
})();
