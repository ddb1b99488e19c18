// The lote web console: a single page over /console/api (see docs/console.md).
// No framework; the charts are uPlot (served by lote, pinned in package.json).
'use strict';

const state = { csrf: '', principal: '', route: '', generation: 0 };
const $ = (sel, root = document) => root.querySelector(sel);
const main = () => $('#main');

function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === 'class') el.className = v;
    else if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
    else el.setAttribute(k, v === true ? '' : v);
  }
  for (const c of children.flat()) {
    if (c === undefined || c === null || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

class ApiError extends Error {
  constructor(status, body) {
    super((body && body.message) || ('HTTP ' + status));
    this.status = status;
    this.code = body && body.__type;
  }
}

async function request(method, path, body) {
  const opts = { method, headers: {}, credentials: 'same-origin' };
  if (method === 'POST') {
    opts.headers['Content-Type'] = 'application/json';
    if (state.csrf) opts.headers['X-CSRF-Token'] = state.csrf;
    opts.body = JSON.stringify(body || {});
  }
  const r = await fetch('/console/api/' + path, opts);
  let data = null;
  try { data = await r.json(); } catch (e) { data = null; }
  if (r.status === 401 && path !== 'signin') { showSignIn(); throw new ApiError(401, data); }
  if (!r.ok) throw new ApiError(r.status, data);
  return data;
}
const batch = (op, body) => request('POST', 'batch/' + op, body);
const logsApi = (op, body) => request('POST', 'logs/' + op, body);
const get = (path) => request('GET', path);

const fmtTime = (ms) => ms ? new Date(ms).toISOString().replace('T', ' ').replace(/\.\d+Z$/, 'Z') : '—';
const fmtDur = (ms) => {
  if (ms === undefined || ms === null || ms < 0) return '—';
  const s = Math.round(ms / 1000);
  return s < 120 ? s + ' s' : s < 7200 ? Math.round(s / 60) + ' min' : (s / 3600).toFixed(1) + ' h';
};
const statusBadge = (s) => h('span', { class: 'status ' + s }, s);
const jobLink = (id, text) => h('a', { href: '#/job/' + encodeURIComponent(id) }, text || id);

// --- Sign-in -----------------------------------------------------------------

function showSignIn(message) {
  state.csrf = '';
  $('#nav').hidden = true;
  $('#signout').hidden = true;
  $('#who').textContent = '';
  const err = h('div', { id: 'signin-error', class: 'error' }, message || '');
  const id = h('input', { id: 'signin-id', autocomplete: 'username', spellcheck: 'false' });
  const secret = h('input', { id: 'signin-secret', type: 'password', autocomplete: 'current-password' });
  const form = h('form', { class: 'card signin', id: 'signin-form', onsubmit: async (ev) => {
    ev.preventDefault();
    err.textContent = '';
    try {
      const s = await request('POST', 'signin', { accessKeyId: id.value.trim(), secretAccessKey: secret.value });
      signedIn(s);
    } catch (e) {
      err.textContent = e.message;
    }
  } },
    h('h1', {}, 'Sign in to lote'),
    h('p', { class: 'muted' }, 'Use the server\'s access key id and secret (profile lote in $LOTE_HOME/credentials), or open the link `lote console` prints.'),
    h('label', { for: 'signin-id' }, 'Access key id'), id,
    h('label', { for: 'signin-secret' }, 'Secret access key'), secret,
    h('p', {}, h('button', { class: 'primary', id: 'signin-submit', type: 'submit' }, 'Sign in')),
    err);
  main().replaceChildren(form);
  document.title = 'Sign in · lote';
}

function signedIn(s) {
  state.csrf = s.csrfToken;
  state.principal = s.principal;
  $('#nav').hidden = false;
  $('#signout').hidden = false;
  $('#who').textContent = s.principal;
  if (!location.hash || location.hash === '#signin-refused') location.hash = '#/overview';
  route();
}

// --- Live updates: long polls while the tab is visible -----------------------

function visible() {
  if (!document.hidden) return Promise.resolve();
  return new Promise((resolve) => {
    const on = () => { if (!document.hidden) { document.removeEventListener('visibilitychange', on); resolve(); } };
    document.addEventListener('visibilitychange', on);
  });
}
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// Calls refresh() whenever the job changes (state, progress, logs) while this
// page is shown; nothing at all while the tab is hidden.
async function followJob(jobId, refresh) {
  const gen = state.generation;
  let v = '';
  while (gen === state.generation) {
    await visible();
    if (gen !== state.generation) return;
    try {
      const w = await get('wait?jobId=' + encodeURIComponent(jobId) + '&v=' + encodeURIComponent(v));
      if (gen !== state.generation) return;
      if (w.changed && v) await refresh();
      v = w.v;
    } catch (e) {
      if (e.status === 401) return;
      await sleep(2000);
    }
  }
}
// Periodic refresh for list pages (no single job to watch).
async function every(ms, refresh) {
  const gen = state.generation;
  while (gen === state.generation) {
    await sleep(ms);
    await visible();
    if (gen !== state.generation) return;
    try { await refresh(); } catch (e) { if (e.status === 401) return; }
  }
}

// --- Overview ------------------------------------------------------------------

const STATUSES = ['SUBMITTED', 'PENDING', 'RUNNABLE', 'STARTING', 'RUNNING', 'SUCCEEDED', 'FAILED'];

async function pageOverview() {
  document.title = 'Overview · lote';
  const box = h('div', { id: 'overview' }, h('h1', {}, 'Overview'), h('p', { class: 'muted' }, 'Loading…'));
  main().replaceChildren(box);
  const render = async () => {
    const o = await get('overview');
    const queues = h('table', { id: 'queues' },
      h('tr', {}, h('th', {}, 'Job queue'), h('th', {}, 'State'), ...STATUSES.map((s) => h('th', {}, s))),
      o.jobQueues.map((q) => h('tr', {},
        h('td', {}, h('a', { href: '#/jobs?queue=' + encodeURIComponent(q.jobQueueName) }, q.jobQueueName)),
        h('td', {}, q.state + ' / ' + q.status),
        ...STATUSES.map((s) => h('td', { class: 'num' },
          h('a', { href: '#/jobs?queue=' + encodeURIComponent(q.jobQueueName) + '&status=' + s }, String(q.counts[s])))))));
    const envs = h('table', { id: 'envs' },
      h('tr', {}, h('th', {}, 'Compute environment'), h('th', {}, 'Type'), h('th', {}, 'State'), h('th', {}, 'vCPUs in use / max'), h('th', {}, 'Quarantined nodes')),
      o.computeEnvironments.map((c) => {
        const cr = c.computeResources || {};
        return h('tr', {}, h('td', {}, c.computeEnvironmentName), h('td', {}, c.type),
          h('td', {}, (c.state || '') + ' / ' + (c.status || '')),
          h('td', { class: 'num' }, (cr.desiredvCpus ?? 0) + ' / ' + (cr.maxvCpus ?? '—')),
          h('td', { class: 'num' }, String((c.loteQuarantinedNodes || []).length)));
      }));
    const quarantined = quarantineTable(o.computeEnvironments, render);
    const failures = h('table', { id: 'failures' },
      h('tr', {}, h('th', {}, 'Failed job'), h('th', {}, 'Queue'), h('th', {}, 'Category'), h('th', {}, 'Reason'), h('th', {}, 'Stopped')),
      o.recentFailures.length ? o.recentFailures.map((j) => h('tr', {},
        h('td', {}, jobLink(j.jobId, j.jobName)), h('td', {}, j.jobQueue),
        h('td', {}, j.failureCategory || '—'), h('td', {}, j.statusReason || ''), h('td', {}, fmtTime(j.stoppedAt))))
        : h('tr', {}, h('td', { colspan: 5, class: 'muted' }, 'No failures in the last 7 days.')));
    box.replaceChildren(h('h1', {}, 'Overview'), h('h2', {}, 'Job queues'), queues,
      h('h2', {}, 'Compute environments'), envs, h('h2', {}, 'Quarantined nodes'), quarantined,
      h('h2', {}, 'Recent failures'), failures);
  };
  await render();
  every(5000, render);
}

// The nodes lote keeps out of placement (loteQuarantinedNodes of
// DescribeComputeEnvironments, docs/quarantine.md), each with a Release button
// (lote's ReleaseNode, confirmed first); `refresh` redraws the page after.
function quarantineTable(environments, refresh) {
  const rows = [];
  for (const c of environments)
    for (const q of c.loteQuarantinedNodes || []) rows.push({ ce: c.computeEnvironmentName, ...q });
  const release = (q) => async () => {
    if (!await confirmModal('Release node ' + q.node + ' of ' + q.ce + '? It takes new work at once; ' +
      'its failures so far are forgotten.', 'Release', 'Keep it quarantined')) return;
    await batch('ReleaseNode', { node: q.node });
    await refresh();
  };
  return h('table', { id: 'quarantined' },
    h('tr', {}, h('th', {}, 'Node'), h('th', {}, 'Compute environment'), h('th', {}, 'Since'),
      h('th', {}, 'Until'), h('th', {}, 'Why'), h('th', {}, '')),
    rows.length ? rows.map((q) => h('tr', { 'data-node': q.node },
      h('td', {}, h('code', {}, q.node)), h('td', {}, q.ce), h('td', {}, fmtTime(q.since)),
      h('td', {}, fmtTime(q.until)), h('td', { class: 'reason' }, q.reason || ''),
      h('td', {}, h('button', { class: 'release danger', 'data-node': q.node, onclick: release(q) }, 'Release'))))
      : h('tr', {}, h('td', { colspan: 6, class: 'muted' }, 'No node is quarantined.')));
}

// --- Jobs list -----------------------------------------------------------------

async function pageJobs(params) {
  document.title = 'Jobs · lote';
  const qs = await batch('DescribeJobQueues', {});
  const queueNames = qs.jobQueues.map((q) => q.jobQueueName);
  const queue = params.get('queue') || queueNames[0] || '';
  const status = params.get('status') || '';
  const name = params.get('name') || '';
  const after = params.get('after') || '';
  const setParam = (k, v) => {
    const p = new URLSearchParams(params);
    if (v) p.set(k, v); else p.delete(k);
    location.hash = '#/jobs?' + p.toString();
  };
  const fQueue = h('select', { id: 'f-queue', onchange: (e) => setParam('queue', e.target.value) },
    queueNames.map((n) => h('option', { value: n, selected: n === queue }, n)));
  const fStatus = h('select', { id: 'f-status', onchange: (e) => setParam('status', e.target.value) },
    h('option', { value: '' }, 'any status'), STATUSES.map((s) => h('option', { value: s, selected: s === status }, s)));
  const fName = h('input', { id: 'f-name', placeholder: 'name (prefix*)', value: name,
    onchange: (e) => setParam('name', e.target.value.trim()) });
  const fAfter = h('input', { id: 'f-after', type: 'datetime-local', value: after,
    onchange: (e) => setParam('after', e.target.value) });
  const table = h('table', { id: 'jobs-table' });
  const pageInfo = h('span', { class: 'muted', id: 'page-info' });
  const tokens = [''];
  let page = 0;
  const prev = h('button', { id: 'prev', onclick: () => { if (page > 0) { page--; load(); } } }, '← Previous');
  const next = h('button', { id: 'next', onclick: () => { page++; load(); } }, 'Next →');
  main().replaceChildren(h('h1', {}, 'Jobs'),
    h('div', { class: 'filters' }, fQueue, fStatus, fName, h('span', { class: 'muted' }, 'created after'), fAfter),
    table, h('div', { class: 'pager' }, prev, next, pageInfo));
  if (!queue) { table.replaceChildren(h('tr', {}, h('td', { class: 'muted' }, 'No job queues yet.'))); return; }

  async function load() {
    const body = { jobQueue: queue, maxResults: 100 };
    // ListJobs takes one filter: the name, else the creation time; a status
    // applies when there is no filter (AWS), otherwise it is applied here.
    if (name) body.filters = [{ name: 'JOB_NAME', values: [name] }];
    else if (after) body.filters = [{ name: 'AFTER_CREATED_AT', values: [String(new Date(after).getTime())] }];
    else if (status) body.jobStatus = status;
    else body.filters = [{ name: 'AFTER_CREATED_AT', values: ['0'] }];
    if (tokens[page]) body.nextToken = tokens[page];
    const t0 = performance.now();
    const r = await batch('ListJobs', body);
    let rows = r.jobSummaryList;
    if (status && body.filters) rows = rows.filter((j) => j.status === status);
    tokens[page + 1] = r.nextToken || '';
    table.replaceChildren(
      h('tr', {}, h('th', {}, 'Name'), h('th', {}, 'Job id'), h('th', {}, 'Status'), h('th', {}, 'Kind'),
        h('th', {}, 'Created'), h('th', {}, 'Reason')),
      ...rows.map((j) => h('tr', { 'data-job-id': j.jobId },
        h('td', {}, jobLink(j.jobId, j.jobName)), h('td', {}, h('code', {}, j.jobId)), h('td', {}, statusBadge(j.status)),
        h('td', {}, j.arrayProperties ? 'array of ' + j.arrayProperties.size
          : j.nodeProperties ? j.nodeProperties.numNodes + ' nodes' : 'single'),
        h('td', {}, fmtTime(j.createdAt)), h('td', { class: 'muted' }, j.statusReason || ''))));
    if (!rows.length) table.append(h('tr', {}, h('td', { colspan: 6, class: 'muted' }, 'No jobs match.')));
    prev.disabled = page === 0;
    next.disabled = !r.nextToken;
    pageInfo.textContent = 'page ' + (page + 1) + ' · ' + rows.length + ' jobs';
    table.setAttribute('data-render-ms', String(Math.round(performance.now() - t0)));
    document.body.setAttribute('data-jobs-rendered', String(performance.now()));
  }
  await load();
  every(5000, () => (page === 0 ? load() : Promise.resolve()));
}

// --- One job -------------------------------------------------------------------

// The job, its node views (multi-node) and the log streams of every attempt.
async function loadJob(jobId, reveal) {
  const d = await batch('DescribeJobs', { jobs: [jobId], reveal: !!reveal });
  if (!d.jobs.length) throw new ApiError(404, { message: 'no job ' + jobId });
  const job = d.jobs[0];
  let nodes = [];
  if (job.nodeProperties && !job.nodeDetails) {
    const ids = [];
    for (let i = 0; i < job.nodeProperties.numNodes && i < 100; i++) ids.push(jobId + '#' + i);
    nodes = (await batch('DescribeJobs', { jobs: ids })).jobs;
  }
  // streams[attempt - 1][node] = stream name
  const streams = [];
  const units = nodes.length ? nodes.map((n) => [n.nodeDetails.nodeIndex, n]) : [[0, job]];
  for (const [node, j] of units) {
    const names = (j.attempts || []).map((a) => a.container && a.container.logStreamName);
    const current = j.container && j.container.logStreamName;
    if (current && !names.includes(current)) names.push(current);
    names.forEach((name, i) => { if (name) { (streams[i] = streams[i] || {})[node] = name; } });
  }
  return { job, nodes, streams };
}

function tabs(jobId, active) {
  const base = '#/job/' + encodeURIComponent(jobId);
  return h('div', { class: 'tabs' },
    h('a', { href: base, class: active === 'details' ? 'active' : '', id: 'tab-details' }, 'Details'),
    h('a', { href: base + '/logs', class: active === 'logs' ? 'active' : '', id: 'tab-logs' }, 'Logs'),
    h('a', { href: base + '/training', class: active === 'training' ? 'active' : '', id: 'tab-training' }, 'Training'));
}

function confirmModal(text, ok = 'Confirm', cancel = 'Keep it running') {
  return new Promise((resolve) => {
    const modal = $('#modal');
    $('#modal-text').textContent = text;
    $('#modal-ok').textContent = ok;
    $('#modal-cancel').textContent = cancel;
    modal.hidden = false;
    const done = (v) => { modal.hidden = true; $('#modal-ok').onclick = null; $('#modal-cancel').onclick = null; resolve(v); };
    $('#modal-ok').onclick = () => done(true);
    $('#modal-cancel').onclick = () => done(false);
  });
}

function timeline(job, nodes) {
  const units = nodes.length ? nodes : [job];
  const now = Date.now();
  const t0 = job.createdAt;
  let t1 = job.stoppedAt || now;
  for (const u of units) for (const a of u.attempts || []) t1 = Math.max(t1, a.stoppedAt || 0);
  const span = Math.max(1, t1 - t0);
  const pct = (t) => (100 * (t - t0) / span).toFixed(2) + '%';
  const rows = units.map((u) => {
    const label = u.nodeDetails ? 'node ' + u.nodeDetails.nodeIndex + (u.nodeDetails.isMainNode ? ' (main)' : '') : 'job';
    const bars = [];
    // loteTimeline (a lote extra of each ended attempt): when it was placed (STARTING).
    // loteTimeline.nodes: this node's image pull (container mode), if it pulled.
    const nodeIndex = u.nodeDetails ? u.nodeDetails.nodeIndex : 0;
    const runs = (u.attempts || []).map((a) => {
      const mine = ((a.loteTimeline && a.loteTimeline.nodes) || []).find((n) => n.nodeIndex === nodeIndex) || {};
      return { placed: a.loteTimeline && a.loteTimeline.scheduledAt, pull: mine.pullStartedAt ? [mine.pullStartedAt, mine.pullStoppedAt] : null,
        start: a.startedAt, stop: a.stoppedAt, ok: a.container && a.container.exitCode === 0,
        // A fault the attempt survived (a slow node, an upload failure) is in its container's reason.
        injected: [a.statusReason, a.container && a.container.reason].find((t) => /Injected fault/.test(t || '')) || null };
    });
    if (u.startedAt && !u.stoppedAt) runs.push({ start: u.startedAt, stop: null });
    let last = t0;
    for (const r of runs) {
      if (!r.start) continue;
      const placed = r.placed && r.placed >= last && r.placed <= r.start ? r.placed : null;
      const waitEnd = placed || r.start;
      bars.push(h('div', { class: 'tl-bar tl-wait', style: 'left:' + pct(last) + ';width:' + pct(t0 + (waitEnd - last)),
        title: (placed ? 'queued (submitted → runnable) ' : 'waiting (submitted → runnable → starting) ') + fmtDur(waitEnd - last) }));
      if (placed) {
        bars.push(h('div', { class: 'tl-bar tl-start', style: 'left:' + pct(placed) + ';width:' + pct(t0 + (r.start - placed)),
          title: 'starting (placed → running) ' + fmtDur(r.start - placed) }));
      }
      if (r.pull && r.pull[1] >= r.pull[0]) {
        bars.push(h('div', { class: 'tl-bar tl-pull', style: 'left:' + pct(r.pull[0]) + ';width:' + pct(t0 + (r.pull[1] - r.pull[0])),
          title: 'pulling the image ' + fmtDur(r.pull[1] - r.pull[0]) }));
      }
      const stop = r.stop || now;
      bars.push(h('div', { class: 'tl-bar ' + (r.stop ? (r.ok ? 'tl-ok' : 'tl-fail') : 'tl-run'),
        style: 'left:' + pct(r.start) + ';width:' + pct(t0 + (stop - r.start)),
        title: 'running ' + fmtTime(r.start) + ' → ' + (r.stop ? fmtTime(r.stop) : 'now') }));
      if (r.injected && r.stop) {  // a fault the job asked for (docs/faults.md): where its attempt ended
        bars.push(h('div', { class: 'tl-fault', style: 'left:' + pct(r.stop), title: r.injected }));
      }
      last = stop;
    }
    if (!runs.some((r) => r.start)) {
      bars.push(h('div', { class: 'tl-bar tl-wait', style: 'left:0;width:' + pct(job.stoppedAt || now), title: 'not started' }));
    }
    return h('div', { class: 'tl-row' }, h('div', { class: 'tl-label' }, label), h('div', { class: 'tl-track' }, bars));
  });
  return h('div', { class: 'timeline card', id: 'timeline' }, rows,
    h('div', { class: 'muted' }, 'created ' + fmtTime(t0) + ' · ' + (job.stoppedAt ? 'stopped ' + fmtTime(job.stoppedAt) : 'now ' + fmtTime(now)) +
      ' · yellow: waiting, orange: starting, violet: pulling the image, blue: running, green/red: ended, black mark: an injected fault (hover for it)'));
}

async function pageJob(jobId) {
  document.title = 'Job ' + jobId + ' · lote';
  let reveal = false;
  const box = h('div', { id: 'job' });
  main().replaceChildren(h('h1', {}, 'Job ', h('code', {}, jobId)), tabs(jobId, 'details'), box);
  const render = async () => {
    const { job, nodes } = await loadJob(jobId, reveal);
    const final = job.status === 'SUCCEEDED' || job.status === 'FAILED';
    const stop = (terminate) => async () => {
      const verb = terminate ? 'Terminate' : 'Cancel';
      if (!await confirmModal(verb + ' job ' + job.jobName + ' (' + jobId + ')? ' +
        (terminate ? 'Its running nodes are stopped and the job FAILS.' : 'It is removed from its queue if it has not started.'))) return;
      await batch(terminate ? 'TerminateJob' : 'CancelJob', { jobId, reason: verb + 'd from the lote console by ' + state.principal });
      await render();
    };
    const parts = [];
    parts.push(h('div', { class: 'card' },
      h('div', { class: 'kv' },
        h('div', {}, 'Name'), h('div', {}, job.jobName),
        h('div', {}, 'Status'), h('div', {}, h('span', { id: 'job-status', class: 'status ' + job.status }, job.status)),
        h('div', {}, 'Status reason'), h('div', { id: 'status-reason' }, job.statusReason || '—'),
        h('div', {}, 'Failure category'), h('div', { id: 'failure-category' }, job.failureCategory || '—'),
        h('div', {}, 'Queue'), h('div', {}, (job.jobQueue || '').split('/').pop()),
        h('div', {}, 'Definition'), h('div', {}, (job.jobDefinition || '').split('/').pop()),
        h('div', {}, 'Created / started / stopped'), h('div', {}, fmtTime(job.createdAt) + ' / ' + fmtTime(job.startedAt) + ' / ' + fmtTime(job.stoppedAt)),
        job.progress && job.progress.step !== undefined ? [h('div', {}, 'Progress'),
          h('div', { id: 'progress' }, 'step ' + job.progress.step + (job.progress.total_steps ? ' / ' + job.progress.total_steps : '') +
            (job.progress.etaSeconds !== undefined ? ' · ETA ' + fmtDur(job.progress.etaSeconds * 1000) : ''))] : null),
      final ? null : h('p', {},
        h('button', { id: 'cancel', onclick: stop(false) }, 'Cancel'), ' ',
        h('button', { id: 'terminate', class: 'danger', onclick: stop(true) }, 'Terminate'))));
    if (job.status === 'RUNNABLE' || job.status === 'PENDING' || job.status === 'SUBMITTED') {
      let position = '';
      try {
        const snap = await batch('GetJobQueueSnapshot', { jobQueue: job.jobQueue });
        const i = snap.frontOfQueue.jobs.findIndex((j) => j.jobArn === job.jobArn);
        if (i >= 0) position = ' It is number ' + (i + 1) + ' in line in its queue.';
      } catch (e) { /* the explanation below stands alone */ }
      parts.push(h('div', { class: 'why', id: 'why' }, h('b', {}, 'Why is it not running? '),
        (job.statusReason || (job.status === 'PENDING' ? 'It waits for its dependencies.' : 'The scheduler has not placed it yet.')) + position));
    }
    parts.push(h('h2', {}, 'Timeline'), timeline(job, nodes));
    const attempts = (job.attempts || []);
    parts.push(h('h2', {}, 'Attempts'), h('table', { id: 'attempts' },
      h('tr', {}, h('th', {}, '#'), h('th', {}, 'Started'), h('th', {}, 'Stopped'), h('th', {}, 'Exit code'), h('th', {}, 'Category'), h('th', {}, 'Reason')),
      attempts.map((a, i) => h('tr', {}, h('td', {}, i + 1), h('td', {}, fmtTime(a.startedAt)), h('td', {}, fmtTime(a.stoppedAt)),
        h('td', {}, a.container && a.container.exitCode !== undefined ? a.container.exitCode : '—'),
        h('td', {}, a.failureCategory || '—'), h('td', {}, a.statusReason || (a.container && a.container.reason) || ''))),
      final ? null : h('tr', {}, h('td', {}, attempts.length + 1), h('td', { colspan: 5, class: 'muted' }, 'current attempt: ' + job.status))));
    const params = Object.entries(job.parameters || {});
    parts.push(h('h2', {}, 'Parameters'), params.length ? h('table', { id: 'parameters' },
      params.map(([k, v]) => h('tr', {}, h('td', {}, h('code', {}, k)), h('td', {}, h('code', {}, v))))) : h('p', { class: 'muted' }, 'none'));
    const containers = [];
    if (job.container) containers.push(['', job.container]);
    for (const r of (job.nodeProperties && job.nodeProperties.nodeRangeProperties) || []) containers.push(['nodes ' + r.targetNodes + ': ', r.container]);
    const env = [];
    for (const [prefix, c] of containers) for (const e of c.environment || []) env.push([prefix + e.name, e.value, e.masked]);
    parts.push(h('h2', {}, 'Environment ', env.some((e) => e[2]) ? h('button', { id: 'reveal', onclick: () => { reveal = true; render(); } }, 'Reveal values (logged)') : null),
      env.length ? h('table', { id: 'environment' }, env.map(([k, v]) => h('tr', {}, h('td', {}, h('code', {}, k)), h('td', {}, h('code', {}, v)))))
        : h('p', { class: 'muted' }, 'none'));
    parts.push(h('h2', {}, 'Dependencies'), (job.dependsOn || []).length
      ? h('ul', {}, job.dependsOn.map((dep) => h('li', {}, jobLink(dep.jobId), dep.type ? ' (' + dep.type + ')' : '')))
      : h('p', { class: 'muted' }, 'none'));
    if (job.arrayProperties && job.arrayProperties.size) {
      const kids = await batch('ListJobs', { arrayJobId: jobId, filters: [{ name: 'AFTER_CREATED_AT', values: ['0'] }], maxResults: 100 });
      parts.push(h('h2', {}, 'Array children (' + job.arrayProperties.size + ')'), h('table', { id: 'children' },
        kids.jobSummaryList.map((k) => h('tr', {}, h('td', {}, jobLink(k.jobId)), h('td', {}, statusBadge(k.status)), h('td', { class: 'muted' }, k.statusReason || '')))));
    }
    if (nodes.length) {
      parts.push(h('h2', {}, 'Nodes (' + nodes.length + ')'), h('table', { id: 'children' },
        nodes.map((n) => h('tr', {}, h('td', {}, 'node ' + n.nodeDetails.nodeIndex + (n.nodeDetails.isMainNode ? ' (main)' : '')),
          h('td', {}, statusBadge(n.status)), h('td', {}, fmtTime(n.startedAt)), h('td', {}, fmtTime(n.stoppedAt)),
          h('td', { class: 'muted' }, n.statusReason || '')))));
    }
    parts.push(h('h2', {}, 'Checkpoints'), await checkpointsOf(job));
    box.replaceChildren(...parts);
    document.body.setAttribute('data-job-status', job.status);
  };
  await render();
  followJob(jobId, render);
}

// The job's checkpoints (step folders under its --checkpoint-uri or
// CHECKPOINT_SAVE_URI, listed in the object store by the server).
async function checkpointsOf(job) {
  const c = await get('checkpoints?jobId=' + encodeURIComponent(job.jobId));
  if (!c.uri) return h('p', { class: 'muted', id: 'checkpoints' }, 'The job names no checkpoint location (--checkpoint-uri or CHECKPOINT_SAVE_URI).');
  if (c.error) return h('p', { class: 'error', id: 'checkpoints' }, c.uri + ': ' + c.error);
  if (!c.checkpoints.length) return h('p', { class: 'muted', id: 'checkpoints' }, 'None yet under ', h('code', {}, c.uri));
  return h('div', { id: 'checkpoints' }, h('p', { class: 'muted' }, h('code', {}, c.uri)),
    h('table', {}, h('tr', {}, h('th', {}, 'Step'), h('th', {}, 'State'), h('th', {}, 'Objects'), h('th', {}, 'Size')),
      ...c.checkpoints.map((k) => h('tr', {}, h('td', { class: 'num' }, k.step),
        h('td', {}, k.complete ? 'complete' : 'incomplete (no manifest.json)'), h('td', { class: 'num' }, k.objects),
        h('td', { class: 'num' }, (k.bytes / 1048576).toFixed(1) + ' MiB')))));
}

// --- Logs ----------------------------------------------------------------------

async function pageLogs(jobId, params) {
  document.title = 'Logs ' + jobId + ' · lote';
  const { streams } = await loadJob(jobId);
  const attempt = Math.min(Math.max(1, parseInt(params.get('attempt') || String(streams.length || 1), 10)), Math.max(1, streams.length));
  const nodeSel = params.get('node') || 'all';
  const byNode = streams[attempt - 1] || {};
  const nodeIds = Object.keys(byNode).map(Number).sort((a, b) => a - b);
  const setParam = (k, v) => {
    const p = new URLSearchParams(params);
    p.set(k, v);
    location.hash = '#/job/' + encodeURIComponent(jobId) + '/logs?' + p.toString();
  };
  const pane = h('div', { class: 'logs', id: 'logs' });
  const search = h('input', { id: 'log-search', placeholder: 'search (CloudWatch filter pattern)', size: 36 });
  const status = h('span', { class: 'muted', id: 'log-status' });
  const shown = nodeSel === 'all' ? nodeIds : nodeIds.filter((n) => String(n) === nodeSel);
  main().replaceChildren(h('h1', {}, 'Job ', h('code', {}, jobId)), tabs(jobId, 'logs'),
    h('div', { class: 'filters' },
      h('select', { id: 'log-attempt', onchange: (e) => setParam('attempt', e.target.value) },
        streams.map((_, i) => h('option', { value: i + 1, selected: i + 1 === attempt }, 'attempt ' + (i + 1)))),
      h('select', { id: 'log-node', onchange: (e) => setParam('node', e.target.value) },
        h('option', { value: 'all' }, 'all nodes (merged)'),
        nodeIds.map((n) => h('option', { value: n, selected: String(n) === nodeSel }, 'node ' + n))),
      h('form', { onsubmit: (e) => { e.preventDefault(); runSearch(); } }, search, ' ', h('button', { type: 'submit' }, 'Search')),
      shown.map((n) => h('a', { href: '/console/api/download?stream=' + encodeURIComponent(byNode[n]), class: 'download', download: '' }, 'download node ' + n)),
      status),
    pane);
  if (!nodeIds.length) { pane.textContent = 'No log streams yet (the job has not started).'; }
  const tokens = {};
  let lines = [];
  let searching = false;
  const draw = () => {
    const atBottom = pane.scrollTop + pane.clientHeight >= pane.scrollHeight - 30;
    lines.sort((a, b) => a.t - b.t || a.n - b.n || a.i - b.i);
    if (lines.length > 5000) lines = lines.slice(lines.length - 5000);
    pane.replaceChildren(...lines.map((l) => h('div', { class: 'n' + (l.n % 8), 'data-node': l.n },
      nodeIds.length > 1 ? h('span', { class: 'tag' }, '[' + l.n + '] ') : null, l.m)));
    pane.setAttribute('data-lines', String(lines.length));
    if (atBottom) pane.scrollTop = pane.scrollHeight;
  };
  let seq = 0;
  const pull = async () => {
    if (searching) return;
    for (const n of shown) {
      const body = { logGroupName: '/aws/batch/job', logStreamName: byNode[n], startFromHead: true, limit: 2000 };
      if (tokens[n]) body.nextToken = tokens[n];
      else { body.startFromHead = false; body.limit = 1000; }
      const r = await logsApi('GetLogEvents', body);
      for (const e of r.events) lines.push({ t: e.timestamp, n, m: e.message, i: seq++ });
      tokens[n] = r.nextForwardToken;
    }
    status.textContent = 'following ' + shown.length + ' stream(s) · ' + fmtTime(Date.now());
    draw();
  };
  const runSearch = async () => {
    const q = search.value.trim();
    if (!q) { searching = false; lines = []; for (const k of Object.keys(tokens)) delete tokens[k]; await pull(); return; }
    searching = true;
    const r = await logsApi('FilterLogEvents', { logGroupName: '/aws/batch/job',
      logStreamNames: shown.map((n) => byNode[n]), filterPattern: q, limit: 2000 });
    const nodeOf = Object.fromEntries(shown.map((n) => [byNode[n], n]));
    lines = r.events.map((e) => ({ t: e.timestamp, n: nodeOf[e.logStreamName] ?? 0, m: e.message, i: seq++ }));
    status.textContent = r.events.length + ' matching line(s) for ' + JSON.stringify(q) + ' (clear the search to follow again)';
    draw();
  };
  if (nodeIds.length) await pull();
  followJob(jobId, pull);
}

// --- Training charts -----------------------------------------------------------

const METRICS = [['loss', 'Loss'], ['val_loss', 'Validation loss'], ['lr', 'Learning rate'],
  ['grad_norm', 'Grad norm'], ['tokens_per_s', 'Tokens/s'], ['mfu', 'MFU']];

// Axis and legend numbers: small values (a learning rate) keep their digits.
function fmtNum(v) {
  if (v === null || v === undefined) return '--';
  const a = Math.abs(v);
  if (a === 0) return '0';
  if (a < 0.01 || a >= 1e6) return v.toExponential(2);
  return String(+v.toPrecision(4));
}

async function pageTraining(jobId) {
  document.title = 'Training ' + jobId + ' · lote';
  const grid = h('div', { class: 'charts', id: 'charts' });
  const info = h('p', { class: 'muted', id: 'training-info' });
  main().replaceChildren(h('h1', {}, 'Job ', h('code', {}, jobId)), tabs(jobId, 'training'), info, grid);
  const charts = {};
  const render = async () => {
    const t0 = performance.now();
    const p = await get('progress?jobId=' + encodeURIComponent(jobId));
    const withData = p.attempts.filter((a) => a.step.length);
    info.textContent = withData.length
      ? 'attempts ' + withData.map((a) => a.attempt + ' (steps ' + a.step[0] + '–' + a.step[a.step.length - 1] + ')').join(', ')
      : 'No LOTE_PROGRESS reports yet.';
    for (const [key, title] of METRICS) {
      const data = mergeAttempts(withData, key);
      if (!data[0].length && !charts[key]) continue;
      let c = charts[key];
      if (!c) {
        const holder = h('div', { class: 'chart', 'data-metric': key }, h('h3', {}, title));
        grid.append(holder);
        if (typeof uPlot === 'undefined') {
          holder.append(h('p', { class: 'muted' }, 'Charts are unavailable: lote was built without uPlot (scripts/fetch-console-js.sh).'));
          c = charts[key] = { holder, plot: null };
        } else {
          const plot = new uPlot({ width: Math.max(320, holder.clientWidth - 14), height: 220, scales: { x: { time: false } },
            series: [{ label: 'step' }, { label: title, stroke: '#2f6fde', width: 1.5, points: { show: data[0].length < 60 },
              value: (u, v) => fmtNum(v) }],
            axes: [{ label: 'step' }, { size: 64, values: (u, splits) => splits.map(fmtNum) }] }, data, holder);
          c = charts[key] = { holder, plot };
        }
      } else if (c.plot) {
        c.plot.setData(data);
      }
      c.holder.setAttribute('data-points', String(data[0].length));
      c.holder.setAttribute('data-last-step', data[0].length ? String(data[0][data[0].length - 1]) : '');
    }
    grid.setAttribute('data-render-ms', String(Math.round(performance.now() - t0)));
    document.body.setAttribute('data-charts-rendered', String(performance.now()));
  };
  await render();
  followJob(jobId, render);
}

// --- Routing -------------------------------------------------------------------

async function route() {
  state.generation++;
  if (!state.csrf) return;
  const hash = location.hash.replace(/^#/, '') || '/overview';
  const [path, query] = hash.split('?');
  const params = new URLSearchParams(query || '');
  const parts = path.split('/').filter(Boolean).map(decodeURIComponent);
  for (const a of document.querySelectorAll('#nav a')) a.classList.toggle('active', a.dataset.page === parts[0]);
  try {
    if (parts[0] === 'jobs') await pageJobs(params);
    else if (parts[0] === 'job' && parts[1]) {
      if (parts[2] === 'logs') await pageLogs(parts[1], params);
      else if (parts[2] === 'training') await pageTraining(parts[1]);
      else await pageJob(parts[1]);
    } else await pageOverview();
  } catch (e) {
    if (e.status !== 401) main().replaceChildren(h('div', { class: 'card error', id: 'page-error' }, e.message));
  }
}

window.addEventListener('hashchange', route);
$('#signout').addEventListener('click', async () => {
  try { await request('POST', 'signout', {}); } catch (e) { /* signed out anyway */ }
  showSignIn('Signed out.');
});

(async () => {
  try {
    signedIn(await get('session'));
  } catch (e) {
    if (e.status !== 401) showSignIn(e.message);
    if (location.hash === '#signin-refused') showSignIn('That sign-in link is used, expired or not valid for this server.');
  }
})();
