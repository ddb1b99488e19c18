// bench/console: times the console in Debian's chromium. argv[2]: JSON {url,
// keyId, secret, pid (the server's), seconds, jobs, queue, trainJob, liveJob,
// phase: "load" | "chart" | "list"}.
'use strict';
const fs = require('fs');
const puppeteer = require('puppeteer-core');
const spec = JSON.parse(process.argv[2]);

const median = (xs) => { const s = [...xs].sort((a, b) => a - b); return s[Math.floor(s.length / 2)]; };
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
// utime + stime of a process, in seconds.
function cpuSeconds(pid) {
  const f = fs.readFileSync('/proc/' + pid + '/stat', 'utf8');
  const parts = f.slice(f.lastIndexOf(')') + 2).split(' ');
  return (Number(parts[11]) + Number(parts[12])) / 100;  // clock ticks (USER_HZ = 100)
}

// A page signed in (the session cookie is the browser's, shared by its tabs).
async function signedInPage(browser, allVisible) {
  const page = await browser.newPage();
  await page.setViewport({ width: 1280, height: 900 });
  if (allVisible) {
    await page.evaluateOnNewDocument(() => {
      Object.defineProperty(document, 'hidden', { get: () => false });
      Object.defineProperty(document, 'visibilityState', { get: () => 'visible' });
    });
  }
  await page.goto(spec.url, { waitUntil: 'networkidle0' });
  await page.evaluate(async (id, secret) => {
    await fetch('/console/api/signin', { method: 'POST', headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ accessKeyId: id, secretAccessKey: secret }) });
  }, spec.keyId, spec.secret);
  return page;
}

// Navigation start -> the page's own "rendered" mark (performance.now()).
async function timeTo(page, hash, attr, runs) {
  const times = [];
  for (let i = 0; i < runs; i++) {
    await page.goto('about:blank');
    await page.goto(spec.url + hash);
    const h = await page.waitForFunction((a) => document.body.getAttribute(a), { timeout: 60000, polling: 10 }, attr);
    times.push(Number(await h.jsonValue()));
  }
  return times;
}
const goal = (v, limit) => (v <= limit ? 'met' : 'NOT met (' + (v / limit).toFixed(2) + 'x the goal)');

async function list(browser) {
  const page = await signedInPage(browser);
  const times = await timeTo(page, '#/jobs?queue=' + spec.queue, 'data-jobs-rendered', 7);
  const rows = await page.$$eval('#jobs-table tr[data-job-id]', (r) => r.length);
  // The ListJobs call alone, from the page (server time + transfer).
  const call = await page.evaluate(async (q) => {
    const csrf = (await (await fetch('/console/api/session')).json()).csrfToken;
    const ts = [];
    for (let i = 0; i < 5; i++) {
      const t0 = performance.now();
      await fetch('/console/api/batch/ListJobs', { method: 'POST', headers: { 'Content-Type': 'application/json', 'X-CSRF-Token': csrf },
        body: JSON.stringify({ jobQueue: q, maxResults: 100, filters: [{ name: 'AFTER_CREATED_AT', values: ['0'] }] }) }).then((r) => r.json());
      ts.push(performance.now() - t0);
    }
    return ts;
  }, spec.queue);
  console.log('jobs list, %d jobs in the store: first page (%d rows) rendered %s ms after navigation (median of 7: %s); ListJobs call alone median %s ms; goal <= 300 ms: %s',
    spec.jobs, rows, median(times).toFixed(0), times.map((t) => t.toFixed(0)).join(' '), median(call).toFixed(0), goal(median(times), 300));
  const t0 = Date.now();
  await page.evaluate(async () => (await fetch('/console/api/overview')).json());
  console.log('overview answer (7 ListJobs per queue, 3 queues): %d ms', Date.now() - t0);
}

async function chart(browser) {
  const page = await signedInPage(browser);
  const times = await timeTo(page, '#/job/' + spec.trainJob + '/training', 'data-charts-rendered', 5);
  const points = await page.$eval('.chart[data-metric="loss"]', (c) => c.dataset.points + ' points up to step ' + c.dataset.lastStep);
  const bytes = await page.evaluate(async (id) => (await (await fetch('/console/api/progress?jobId=' + id)).text()).length, spec.trainJob);
  console.log('training charts of a %d-step run (%s): 6 charts drawn %s ms after navigation (median of 5: %s); progress answer %d bytes; goal <= 1000 ms: %s',
    spec.steps, points, median(times).toFixed(0), times.map((t) => t.toFixed(0)).join(' '), bytes, goal(median(times), 1000));
}

// Server CPU over a window with no tab, then with 10 tabs on a running job (5 on
// its logs, 5 on its charts). Headless chromium keeps one tab in front: the others
// are hidden and the console leaves them quiet. allVisible makes every tab report
// itself visible (10 windows side by side).
async function load(browser, allVisible) {
  const sec = spec.seconds;
  let c0 = cpuSeconds(spec.pid);
  await sleep(sec * 1000);
  const idle = (cpuSeconds(spec.pid) - c0) / sec * 100;
  const tabs = [];
  let requests = 0;
  for (let i = 0; i < 10; i++) {
    const p = await signedInPage(browser, allVisible);
    p.on('request', (r) => { if (r.url().includes('/console/api/')) requests++; });
    await p.goto(spec.url + '#/job/' + spec.liveJob + (i % 2 ? '/training' : '/logs'), { waitUntil: 'networkidle2' });
    tabs.push(p);
  }
  await sleep(2000);
  requests = 0;
  c0 = cpuSeconds(spec.pid);
  await sleep(sec * 1000);
  const busy = (cpuSeconds(spec.pid) - c0) / sec * 100;
  let shown = 0;
  for (const p of tabs) if (await p.evaluate(() => !document.hidden)) shown++;
  console.log('server CPU over %d s while a job prints 10 progress lines/s: no tab %s%%, 10 tabs (5 logs, 5 charts; %d report visible) %s%% (+%s%% of one core); console requests %s/s',
    sec, idle.toFixed(1), shown, busy.toFixed(1), (busy - idle).toFixed(1), (requests / sec).toFixed(1));
  for (const p of tabs) await p.close();
}

(async () => {
  const browser = await puppeteer.launch({ executablePath: '/usr/bin/chromium', headless: true,
    args: ['--no-sandbox', '--disable-gpu'] });
  try {
    if (spec.phase === 'list') await list(browser);
    if (spec.phase === 'chart') await chart(browser);
    if (spec.phase === 'load') {
      await load(browser, false);
      await load(browser, true);
    }
  } finally {
    await browser.close();
  }
})();
