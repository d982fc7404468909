// @ts-check
/*
 * The asynccmd dashboard. Every value that comes from the command table is put on the page as text
 * (textContent, text nodes, attributes of our own choosing): nothing is ever parsed as HTML, and the
 * page's Content-Security-Policy (Trusted Types with no policy) would refuse it if it were.
 *
 * Auth: the admin token, when the API has one, is typed into the login form once per tab, kept in
 * sessionStorage and sent only as `Authorization: Bearer` on this page's own requests. No cookie is
 * involved, so another site cannot make the browser send it.
 */
(() => {
  'use strict';

  const TOKEN_KEY = 'asynccmd.adminToken';
  const STATUSES = ['PENDING', 'RUNNING', 'SUCCESS', 'DEAD', 'CANCELLED'];
  const PAGE_SIZE = 50;
  const baseMeta = document.querySelector('meta[name="asynccmd-base"]');
  const BASE = baseMeta instanceof HTMLMetaElement ? baseMeta.content : '';

  // ── DOM helpers: text only ────────────────────────────────────────────────────────────────────

  /** @param {string} id */
  function $(id) {
    const found = document.getElementById(id);
    if (found === null) throw new Error(`the page lacks #${id}`);
    return found;
  }

  /**
   * An element with attributes we choose and children that are elements or text.
   * @param {string} tag
   * @param {Record<string, string>} [attrs]
   * @param {...(Node | string | number | null | undefined)} children
   * @returns {HTMLElement}
   */
  function el(tag, attrs = {}, ...children) {
    const node = document.createElement(tag);
    for (const [name, value] of Object.entries(attrs)) node.setAttribute(name, value);
    for (const child of children) {
      if (child === null || child === undefined) continue;
      node.append(typeof child === 'object' ? child : document.createTextNode(String(child)));
    }
    return node;
  }

  const SVG = 'http://www.w3.org/2000/svg';
  /**
   * @param {string} tag
   * @param {Record<string, string | number>} attrs
   */
  function svg(tag, attrs) {
    const node = document.createElementNS(SVG, tag);
    for (const [name, value] of Object.entries(attrs)) node.setAttribute(name, String(value));
    return node;
  }

  /**
   * @param {HTMLElement} parent
   * @param {...Node} children
   */
  function fill(parent, ...children) {
    parent.replaceChildren(...children);
  }

  /** A link inside this page, to a command's detail. @param {string} id */
  function commandLink(id) {
    return el('a', { href: `#/commands/${encodeURIComponent(id)}` }, id);
  }

  /** @param {string} status */
  function statusBadge(status) {
    return el('span', { class: `badge status-${STATUSES.includes(status) ? status : 'unknown'}` }, status);
  }

  /** @param {unknown} value */
  function show(value) {
    if (value === null || value === undefined) return '–';
    if (typeof value === 'string') return value;
    return JSON.stringify(value);
  }

  /** @param {string | null | undefined} iso */
  function time(iso) {
    if (!iso) return '–';
    const d = new Date(iso);
    return Number.isNaN(d.getTime()) ? iso : d.toLocaleString();
  }

  /** @param {number | null | undefined} ms */
  function duration(ms) {
    if (ms === null || ms === undefined) return '–';
    if (ms < 1000) return `${Math.round(ms)} ms`;
    const s = ms / 1000;
    if (s < 60) return `${s.toFixed(s < 10 ? 1 : 0)} s`;
    const m = Math.floor(s / 60);
    if (m < 60) return `${m}m ${Math.floor(s % 60)}s`;
    const h = Math.floor(m / 60);
    if (h < 48) return `${h}h ${m % 60}m`;
    return `${Math.floor(h / 24)}d ${h % 24}h`;
  }

  let toastTimer = 0;
  /** @param {string} text */
  function toast(text) {
    const t = $('toast');
    t.textContent = text;
    t.hidden = false;
    window.clearTimeout(toastTimer);
    toastTimer = window.setTimeout(() => (t.hidden = true), 5000);
  }

  // ── the API ───────────────────────────────────────────────────────────────────────────────────

  class ApiError extends Error {
    /**
     * @param {number} status
     * @param {string} code
     * @param {string} message
     */
    constructor(status, code, message) {
      super(message);
      this.status = status;
      this.code = code;
    }
  }

  /**
   * @param {string} path under the admin routes, e.g. '/commands?status=DEAD'
   * @param {{ method?: 'GET' | 'POST', body?: unknown }} [options]
   * @returns {Promise<any>}
   */
  async function api(path, options = {}) {
    /** @type {Record<string, string>} */
    const headers = { Accept: 'application/json' };
    const token = sessionStorage.getItem(TOKEN_KEY);
    if (token) headers['Authorization'] = `Bearer ${token}`;
    const method = options.method ?? 'GET';
    if (method === 'POST') headers['Content-Type'] = 'application/json';
    const res = await fetch(`${BASE}${path}`, {
      method,
      headers,
      body: method === 'POST' ? JSON.stringify(options.body ?? {}) : undefined,
      credentials: 'omit',
      cache: 'no-store',
      redirect: 'error',
    });
    const text = await res.text();
    /** @type {any} */
    let body = null;
    try {
      body = text ? JSON.parse(text) : null;
    } catch {
      body = null;
    }
    if (!res.ok) {
      const error = body && body.error ? body.error : { code: `HTTP_${res.status}`, message: res.statusText };
      if (res.status === 401) onUnauthorized();
      throw new ApiError(res.status, String(error.code), String(error.message));
    }
    return body;
  }

  /** @param {unknown} e */
  function describe(e) {
    if (e instanceof ApiError) return `${e.code}: ${e.message}`;
    return e instanceof Error ? e.message : String(e);
  }

  // ── login ─────────────────────────────────────────────────────────────────────────────────────

  let loggedIn = false;

  function onUnauthorized() {
    const hadToken = sessionStorage.getItem(TOKEN_KEY) !== null;
    sessionStorage.removeItem(TOKEN_KEY);
    loggedIn = false;
    stopPolling();
    for (const v of document.querySelectorAll('.view')) /** @type {HTMLElement} */ (v).hidden = true;
    $('login').hidden = false;
    $('logout').hidden = true;
    $('login-error').textContent = hadToken ? 'That token was refused. Log in again.' : '';
    /** @type {HTMLInputElement} */ ($('token')).focus();
  }

  $('login-form').addEventListener('submit', (event) => {
    event.preventDefault();
    const input = /** @type {HTMLInputElement} */ ($('token'));
    const token = input.value.trim();
    // Cleared at once: the token is not left in the page for anything to read back.
    input.value = '';
    if (token === '') return;
    sessionStorage.setItem(TOKEN_KEY, token);
    void start();
  });

  $('logout').addEventListener('click', () => {
    sessionStorage.removeItem(TOKEN_KEY);
    $('login-error').textContent = '';
    onUnauthorized();
  });

  // ── the shared summary, polled ────────────────────────────────────────────────────────────────

  /** @type {any} */
  let summary = null;
  let pollTimer = 0;
  let refreshMs = 5000;

  function stopPolling() {
    window.clearTimeout(pollTimer);
    pollTimer = 0;
  }

  function schedulePoll() {
    stopPolling();
    if (!loggedIn || document.hidden) return;
    pollTimer = window.setTimeout(() => void poll(), refreshMs);
  }

  async function poll() {
    try {
      summary = await api('/dashboard/api/summary');
      refreshMs = Math.max(250, Number(summary.refreshMs) || 5000);
      renderSummary(summary);
    } catch (e) {
      if (e instanceof ApiError && e.status === 401) return;
      $('updated').textContent = `could not refresh: ${describe(e)}`;
    }
    schedulePoll();
  }

  document.addEventListener('visibilitychange', () => {
    if (document.hidden) stopPolling();
    else if (loggedIn) void poll();
  });

  /** @param {any} s */
  function renderSummary(s) {
    const up = s.health.status === 'UP';
    const badge = $('health-badge');
    badge.className = `badge ${up ? 'up' : 'down'}`;
    badge.textContent = s.health.status;
    $('updated').textContent = `updated ${new Date(s.generatedAt).toLocaleTimeString()}`;

    const status = $('health-status');
    status.className = `health ${up ? 'up' : 'down'}`;
    status.textContent = up ? 'UP' : 'DOWN';
    fill(
      $('health-reasons'),
      ...s.health.reasons.map((/** @type {any} */ r) =>
        el(
          'li',
          {},
          el('span', { class: 'code' }, r.code),
          ' — ',
          r.message,
          r.detail ? el('span', { class: 'muted' }, ` (${r.detail})`) : null,
        ),
      ),
    );

    const stats = s.stats;
    if (stats) {
      fill(
        $('status-counts'),
        ...STATUSES.map((st) =>
          el(
            'div',
            { class: `card ${st}` },
            el('div', { class: 'label' }, st),
            el('div', { class: 'value', 'data-status': st }, String(stats.byStatus[st] ?? 0)),
          ),
        ),
        el(
          'div',
          { class: 'card' },
          el('div', { class: 'label' }, 'total'),
          el('div', { class: 'value' }, stats.total),
        ),
      );
      $('oldest-pending').textContent =
        stats.oldestDueAt === null
          ? 'No pending command is due: nothing is waiting.'
          : `Oldest due pending command: due ${time(stats.oldestDueAt)}, waiting ${duration(stats.oldestPendingAgeMs)}.`;
      renderTypeCounts(
        stats.byType,
        Array.isArray(stats.pausedTypes) ? stats.pausedTypes : [],
        s.typePauses === true,
      );
    } else {
      fill($('status-counts'), el('p', { class: 'error' }, 'The database could not be read.'));
      $('oldest-pending').textContent = '';
    }

    renderOutcomes(s.outcomes);
    renderDeadLetters(s.deadLetters, stats ? stats.byStatus.DEAD : null);
    renderSchedules(s.schedules);
  }

  /**
   * The counts of each type, with its pause state and the button that changes it. A paused type
   * without a command still gets its row: it is where it is resumed.
   * @param {Record<string, Record<string, number>>} byType
   * @param {{ type: string, pausedAt: string, reason: string | null }[]} pausedTypes
   * @param {boolean} pausable whether the store keeps type pauses
   */
  function renderTypeCounts(byType, pausedTypes, pausable) {
    fill(
      $('type-counts-head'),
      el(
        'tr',
        {},
        el('th', {}, 'type'),
        ...STATUSES.map((st) => el('th', { class: 'num' }, st)),
        pausable ? el('th', {}, '') : null,
      ),
    );
    const paused = new Map(pausedTypes.map((p) => [p.type, p]));
    const types = [...new Set([...Object.keys(byType), ...paused.keys()])].sort();
    fill(
      $('type-counts'),
      ...(types.length === 0
        ? [
            el(
              'tr',
              {},
              el(
                'td',
                { class: 'empty', colspan: String(STATUSES.length + (pausable ? 2 : 1)) },
                'No commands yet.',
              ),
            ),
          ]
        : types.map((type) => {
            const pause = paused.get(type);
            const button = el(
              'button',
              {
                type: 'button',
                class: 'small secondary',
                'data-action': pause ? 'resume-type' : 'pause-type',
              },
              pause ? 'Resume' : 'Pause',
            );
            button.addEventListener('click', () => void confirmTypePause(type, pause));
            const badge = pause
              ? el(
                  'span',
                  {
                    class: 'badge paused',
                    title: `paused ${time(pause.pausedAt)}${pause.reason ? `: ${pause.reason}` : ''}`,
                  },
                  'paused',
                )
              : null;
            return el(
              'tr',
              { 'data-type': type },
              el('td', { class: 'mono' }, type, badge ? ' ' : null, badge),
              ...STATUSES.map((st) => el('td', { class: 'num' }, byType[type]?.[st] ?? 0)),
              pausable ? el('td', {}, button) : null,
            );
          })),
    );
  }

  /** @param {any} deadLetters @param {number | null} total */
  function renderDeadLetters(deadLetters, total) {
    const body = $('dead-letters');
    if (!deadLetters) {
      fill(body, el('tr', {}, el('td', { class: 'empty', colspan: '6' }, 'The database could not be read.')));
      return;
    }
    $('dead-caption').textContent =
      total === 0
        ? 'None: every command that ran out of retries has been handled.'
        : `${total} dead letter(s)${deadLetters.more ? `, the newest ${deadLetters.items.length} shown` : ''}.`;
    const all = el('a', { href: '#/commands?status=DEAD' }, 'All dead letters, with bulk retry →');
    if (deadLetters.more) $('dead-caption').append(' ', all);
    fill(
      body,
      ...(deadLetters.items.length === 0
        ? [el('tr', {}, el('td', { class: 'empty', colspan: '6' }, 'No dead letters.'))]
        : deadLetters.items.map((/** @type {any} */ c) => {
            const retry = el('button', { type: 'button', class: 'small' }, 'Retry');
            retry.addEventListener('click', () => void confirmAction('retry', c));
            return el(
              'tr',
              { 'data-id': c.id },
              el('td', {}, commandLink(c.id)),
              el('td', { class: 'mono' }, c.type),
              el('td', { class: 'mono' }, show(c.bizKey)),
              el('td', { class: 'error-text' }, show(c.lastError)),
              el('td', {}, time(c.finishedAt)),
              el('td', {}, retry),
            );
          })),
    );
  }

  /** @param {any[]} schedules */
  function renderSchedules(schedules) {
    const list = Array.isArray(schedules) ? schedules : [];
    $('schedules-panel').hidden = list.length === 0;
    fill(
      $('schedules'),
      ...list.map((sc) =>
        el(
          'tr',
          {},
          el('td', { class: 'mono' }, show(sc.name)),
          el('td', { class: 'mono' }, show(sc.type)),
          el('td', {}, time(sc.nextRunAt)),
          el('td', {}, time(sc.lastTick)),
          el('td', {}, sc.paused ? 'paused' : 'running'),
        ),
      ),
    );
  }

  /** @param {any} outcomes */
  function renderOutcomes(outcomes) {
    if (!outcomes) {
      $('throughput-caption').textContent = 'The database could not be read.';
      $('latency-caption').textContent = '';
      fill($('throughput-chart'));
      fill($('latency-chart'));
      return;
    }
    const span = duration(outcomes.windowMs);
    const per = duration(outcomes.bucketMs);
    const t = outcomes.total;
    $('throughput-caption').textContent =
      `${t.succeeded} succeeded, ${t.dead} dead in the last ${span} (bars of ${per}; green succeeded, red dead).`;
    $('latency-caption').textContent =
      t.p95Ms === null
        ? `Nothing finished in the last ${span}.`
        : `p95 ${duration(t.p95Ms)} over the last ${span}: from submit to success or dead letter.`;
    /** @type {any[]} */
    const buckets = outcomes.buckets;
    fill(
      $('throughput-chart'),
      barChart(
        buckets.map((b) => ({
          label: time(b.start),
          parts: [
            { value: b.succeeded, className: 'bar-ok', name: 'succeeded' },
            { value: b.dead, className: 'bar-dead', name: 'dead' },
          ],
        })),
        (v) => String(v),
      ),
    );
    fill(
      $('latency-chart'),
      barChart(
        buckets.map((b) => ({
          label: time(b.start),
          parts: [{ value: b.p95Ms ?? 0, className: 'bar-latency', name: 'p95' }],
        })),
        (v) => duration(v),
      ),
    );
  }

  /**
   * A small stacked bar chart in SVG, drawn with attributes only.
   * @param {{ label: string, parts: { value: number, className: string, name: string }[] }[]} bars
   * @param {(v: number) => string} format
   */
  function barChart(bars, format) {
    const width = 600;
    const height = 140;
    const top = 14;
    const bottom = 16;
    const max = Math.max(1, ...bars.map((b) => b.parts.reduce((n, p) => n + p.value, 0)));
    const chart = svg('svg', { viewBox: `0 0 ${width} ${height}`, role: 'img', preserveAspectRatio: 'none' });
    const slot = width / Math.max(1, bars.length);
    const plot = height - top - bottom;
    chart.append(svg('line', { x1: 0, x2: width, y1: height - bottom, y2: height - bottom, class: 'axis' }));
    bars.forEach((bar, i) => {
      let y = height - bottom;
      for (const part of bar.parts) {
        if (part.value <= 0) continue;
        const h = (part.value / max) * plot;
        y -= h;
        const rect = svg('rect', {
          x: i * slot + 1,
          y,
          width: Math.max(1, slot - 2),
          height: h,
          class: part.className,
        });
        const title = svg('title', {});
        title.textContent = `${bar.label}: ${format(part.value)} ${part.name}`;
        rect.append(title);
        chart.append(rect);
      }
    });
    const maxLabel = svg('text', { x: 2, y: 10 });
    maxLabel.textContent = `max ${format(max)}`;
    const first = svg('text', { x: 2, y: height - 3 });
    first.textContent = bars[0]?.label ?? '';
    const last = svg('text', { x: width - 2, y: height - 3, 'text-anchor': 'end' });
    last.textContent = 'now';
    chart.append(maxLabel, first, last);
    return chart;
  }

  /** Bumped by every navigation: a view whose answers arrive after the next one was asked for draws nothing. */
  let generation = 0;

  // ── the command list ──────────────────────────────────────────────────────────────────────────

  /** @type {any[]} */
  let listed = [];

  /** @param {URLSearchParams} params */
  async function showList(params) {
    const mine = generation;
    const form = /** @type {HTMLFormElement} */ ($('filters'));
    for (const name of ['status', 'type', 'bizKey', 'id']) {
      const field = /** @type {HTMLInputElement | HTMLSelectElement} */ (form.elements.namedItem(name));
      field.value = params.get(name) ?? '';
    }
    $('list-error').textContent = '';
    const body = $('command-list');
    const next = /** @type {HTMLButtonElement} */ ($('next-page'));
    const bulk = /** @type {HTMLButtonElement} */ ($('bulk-retry'));
    /** @type {HTMLButtonElement} */ ($('first-page')).disabled = !params.has('cursor');
    next.disabled = true;
    bulk.hidden = true;
    let nextCursor = null;
    try {
      const id = params.get('id');
      if (id) {
        listed = [await api(`/commands/${encodeURIComponent(id)}`)];
      } else {
        const query = new URLSearchParams();
        for (const name of ['status', 'type', 'bizKey', 'cursor']) {
          const value = params.get(name);
          if (value) query.set(name, value);
        }
        query.set('limit', String(PAGE_SIZE));
        const page = await api(`/commands?${query.toString()}`);
        listed = page.items;
        nextCursor = page.nextCursor;
      }
    } catch (e) {
      if (mine !== generation) return;
      listed = [];
      $('list-error').textContent = describe(e);
    }
    if (mine !== generation) return;
    fill(
      body,
      ...(listed.length === 0
        ? [el('tr', {}, el('td', { class: 'empty', colspan: '7' }, 'No command matches.'))]
        : listed.map((c) =>
            el(
              'tr',
              { 'data-id': c.id },
              el('td', {}, commandLink(c.id)),
              el('td', { class: 'mono' }, c.type),
              el('td', { class: 'mono' }, show(c.bizKey)),
              el('td', {}, statusBadge(c.status)),
              el('td', {}, attemptsText(c.attempts)),
              el('td', { class: 'error-text' }, show(c.lastError)),
              el('td', {}, time(c.updatedAt)),
            ),
          )),
    );
    if (nextCursor) {
      next.disabled = false;
      next.onclick = () => {
        const p = new URLSearchParams(params);
        p.set('cursor', nextCursor);
        location.hash = `#/commands?${p.toString()}`;
      };
    }
    const dead = listed.filter((c) => c.status === 'DEAD');
    if (dead.length > 0 && params.get('status') === 'DEAD') {
      bulk.hidden = false;
      bulk.textContent = `Retry the ${dead.length} dead letter(s) shown`;
      bulk.onclick = () => void confirmBulkRetry(dead);
    }
  }

  /** @param {any} attempts */
  function attemptsText(attempts) {
    if (attempts && typeof attempts === 'object' && 'failed' in attempts && 'maxRetry' in attempts) {
      return `${attempts.failed} failed of ${Number(attempts.maxRetry) + 1}`;
    }
    return show(attempts);
  }

  $('filters').addEventListener('submit', (event) => {
    event.preventDefault();
    const form = /** @type {HTMLFormElement} */ (event.currentTarget);
    const p = new URLSearchParams();
    for (const name of ['status', 'type', 'bizKey', 'id']) {
      const field = /** @type {HTMLInputElement | HTMLSelectElement} */ (form.elements.namedItem(name));
      const value = field.value.trim();
      if (value) p.set(name, value);
    }
    const target = `#/commands${p.size ? `?${p.toString()}` : ''}`;
    if (location.hash === target) void route();
    else location.hash = target;
  });
  $('filters').addEventListener('reset', () => {
    window.setTimeout(() => (location.hash = '#/commands'), 0);
  });
  $('first-page').addEventListener('click', () => {
    const p = new URLSearchParams(location.hash.split('?')[1] ?? '');
    p.delete('cursor');
    location.hash = `#/commands${p.size ? `?${p.toString()}` : ''}`;
  });

  // ── a command's detail ────────────────────────────────────────────────────────────────────────

  /** @param {string} id */
  async function showDetail(id) {
    const mine = generation;
    $('detail-title').textContent = `Command ${id}`;
    $('detail-error').textContent = '';
    for (const part of [
      'detail-actions',
      'detail-fields',
      'detail-attempts',
      'detail-result',
      'detail-payload',
      'detail-headers',
    ]) {
      fill($(part));
    }
    $('detail-history-block').hidden = true;
    $('detail-result-block').hidden = true;
    let view;
    let contents;
    try {
      // The status resource is what the API says of a command; the contents add what it leaves out.
      [view, contents] = await Promise.all([
        api(`/commands/${encodeURIComponent(id)}`),
        api(`/dashboard/api/commands/${encodeURIComponent(id)}/contents`),
      ]);
    } catch (e) {
      if (mine === generation) $('detail-error').textContent = describe(e);
      return;
    }
    if (mine !== generation) return;
    $('detail-title').replaceChildren(`Command ${view.id} `, statusBadge(view.status));
    /** @type {[string, unknown][]} */
    const fields = [
      ['type', view.type],
      ['bizKey', view.bizKey],
      ['status', `${view.status} (${view.operation})`],
      ['lastError', view.lastError],
      ['nextRunAt', time(view.nextRunAt)],
      ['owner', view.owner],
      ['lease until', contents.leaseUntil ? time(contents.leaseUntil) : null],
      ['idempotent', contents.idempotent ? 'yes (holds its bizKey while unfinished)' : 'no'],
      ['created', time(view.createdAt)],
      ['updated', time(view.updatedAt)],
      ['started', time(view.startedAt)],
      ['finished', time(view.finishedAt)],
    ];
    fill($('detail-fields'), ...fields.flatMap(([k, v]) => [el('dt', {}, k), el('dd', {}, show(v))]));
    const attempts =
      view.attempts && typeof view.attempts === 'object' ? view.attempts : { attempts: view.attempts };
    fill(
      $('detail-attempts'),
      ...Object.entries(attempts).flatMap(([k, v]) => [el('dt', {}, k), el('dd', {}, show(v))]),
    );
    renderHistory(view.history);
    // What the executor left on success; null until then, and when it left none.
    if (view.result !== null && view.result !== undefined) {
      $('detail-result').textContent = JSON.stringify(view.result, null, 2);
      $('detail-result-block').hidden = false;
    }
    $('detail-payload').textContent = JSON.stringify(contents.payload, null, 2);
    $('detail-headers').textContent = JSON.stringify(contents.headers, null, 2);

    const actions = $('detail-actions');
    /** @type {[string, string[], string][]} */
    const possible = [
      ['retry', ['DEAD'], ''],
      ['requeue', ['RUNNING'], 'secondary'],
      ['cancel', ['PENDING'], 'secondary'],
      ['kill', ['PENDING', 'RUNNING', 'DEAD'], 'danger'],
    ];
    for (const [name, from, className] of possible) {
      if (!from.includes(view.status)) continue;
      const button = el(
        'button',
        { type: 'button', class: className, 'data-action': name },
        capitalise(name),
      );
      button.addEventListener('click', () => void confirmAction(name, view));
      actions.append(button);
    }
  }

  /** Attempt history, when the status resource carries one: a row per entry, a column per field. @param {unknown} history */
  function renderHistory(history) {
    if (!Array.isArray(history) || history.length === 0) return;
    /** @type {string[]} */
    const columns = [];
    for (const entry of history) {
      if (entry && typeof entry === 'object')
        for (const key of Object.keys(entry)) if (!columns.includes(key)) columns.push(key);
    }
    fill($('detail-history-head'), el('tr', {}, ...columns.map((c) => el('th', {}, c))));
    fill(
      $('detail-history'),
      ...history.map((entry) =>
        el(
          'tr',
          {},
          ...columns.map((c) => el('td', {}, show(entry && typeof entry === 'object' ? entry[c] : entry))),
        ),
      ),
    );
    $('detail-history-block').hidden = false;
  }

  /** @param {string} s */
  function capitalise(s) {
    return s.charAt(0).toUpperCase() + s.slice(1);
  }

  // ── actions, each confirmed ───────────────────────────────────────────────────────────────────

  /**
   * What each action does, in words, before it is done.
   * @type {Record<string, { title: string, explain: (c: any) => string, reason: 'none' | 'optional' | 'required', danger: boolean }>}
   */
  const ACTIONS = {
    retry: {
      title: 'Retry',
      explain: (c) =>
        `Command ${c.id} (${c.type}) is DEAD. Retry makes it PENDING with fresh attempts, due now: an instance will run its executor again.`,
      reason: 'none',
      danger: false,
    },
    requeue: {
      title: 'Requeue',
      explain: (c) =>
        `Command ${c.id} (${c.type}) is RUNNING. Requeue puts it back to PENDING, due now, and fences out the current claim: ` +
        'if its executor is still running, its outcome will not be recorded, and the command runs again.',
      reason: 'none',
      danger: false,
    },
    cancel: {
      title: 'Cancel',
      explain: (c) =>
        `Command ${c.id} (${c.type}) has not started. Cancel makes it CANCELLED: it will never run. The reason, if given, is kept as its lastError.`,
      reason: 'optional',
      danger: false,
    },
    kill: {
      title: 'Kill',
      explain: (c) =>
        `Command ${c.id} (${c.type}) is ${c.status}. Kill makes it CANCELLED: it will never run again` +
        `${c.status === 'RUNNING' ? ', and the outcome of the run in progress will not be recorded' : ''}. The reason is kept as its lastError.`,
      reason: 'required',
      danger: true,
    },
  };

  /**
   * Asks, and resolves with the reason typed (or '') when confirmed, null when not.
   * @param {string} title
   * @param {string} message
   * @param {'none' | 'optional' | 'required'} reason
   * @param {boolean} danger
   * @param {number} [reasonMaxLength] what the route takes
   * @returns {Promise<string | null>}
   */
  function ask(title, message, reason, danger, reasonMaxLength = 2000) {
    const dialog = /** @type {HTMLDialogElement} */ ($('confirm'));
    const input = /** @type {HTMLInputElement} */ ($('confirm-reason'));
    $('confirm-title').textContent = `${title}?`;
    $('confirm-message').textContent = message;
    $('confirm-reason-label').hidden = reason === 'none';
    input.value = '';
    input.maxLength = reasonMaxLength;
    input.required = reason === 'required';
    const ok = $('confirm-ok');
    ok.textContent = title;
    ok.className = danger ? 'danger' : '';
    return new Promise((resolve) => {
      const form = /** @type {HTMLFormElement} */ ($('confirm-form'));
      /** @param {SubmitEvent} event */
      const onSubmit = (event) => {
        event.preventDefault();
        const confirmed = event.submitter === ok;
        if (confirmed && input.required && input.value.trim() === '') {
          input.reportValidity();
          return;
        }
        dialog.close();
        done(confirmed ? input.value.trim() : null);
      };
      const onClose = () => done(null);
      /** @param {string | null} value */
      const done = (value) => {
        form.removeEventListener('submit', onSubmit);
        dialog.removeEventListener('close', onClose);
        resolve(value);
      };
      form.addEventListener('submit', onSubmit);
      dialog.addEventListener('close', onClose);
      dialog.showModal();
      (reason === 'none' ? ok : input).focus();
    });
  }

  /** @param {string} name @param {any} command */
  async function confirmAction(name, command) {
    const action = ACTIONS[name];
    if (!action) return;
    const reason = await ask(action.title, action.explain(command), action.reason, action.danger);
    if (reason === null) return;
    try {
      const body = action.reason !== 'none' && reason !== '' ? { reason } : {};
      const after = await api(`/commands/${encodeURIComponent(command.id)}/${name}`, {
        method: 'POST',
        body,
      });
      toast(`Command ${after.id}: ${name} done, now ${after.status}.`);
    } catch (e) {
      toast(`Command ${command.id}: ${name} refused — ${describe(e)}`);
    }
    void poll();
    void route();
  }

  /**
   * Pauses a type for every instance (asking for an optional reason), or resumes it.
   * @param {string} type
   * @param {{ pausedAt: string, reason: string | null } | undefined} pause
   */
  async function confirmTypePause(type, pause) {
    const pending = summary?.stats?.byType?.[type]?.PENDING ?? 0;
    const reason = pause
      ? await ask(
          `Resume ${type}`,
          `Type ${type} is paused (since ${time(pause.pausedAt)}${pause.reason ? `: ${pause.reason}` : ''}). ` +
            `Resume lets its ${pending} pending command(s) run again, on every instance.`,
          'none',
          false,
        )
      : await ask(
          `Pause ${type}`,
          `No instance will start a command of type ${type} until it is resumed: its ${pending} pending command(s) wait, ` +
            'new ones are still accepted, and those already running finish. The reason, if given, is shown with the pause.',
          'optional',
          false,
          1000,
        );
    if (reason === null) return;
    const action = pause ? 'resume' : 'pause';
    try {
      const after = await api(`/types/${encodeURIComponent(type)}/${action}`, {
        method: 'POST',
        body: action === 'pause' && reason !== '' ? { reason } : {},
      });
      toast(
        `Type ${after.type}: ${after.changed ? `${action}d` : `was ${after.paused ? 'paused' : 'not paused'} already`}.`,
      );
    } catch (e) {
      toast(`Type ${type}: ${action} refused — ${describe(e)}`);
    }
    void poll();
  }

  /** @param {any[]} dead */
  async function confirmBulkRetry(dead) {
    const ids = dead.map((c) => String(c.id));
    const shown =
      ids.length > 12 ? `${ids.slice(0, 12).join(', ')} and ${ids.length - 12} more` : ids.join(', ');
    const confirmed = await ask(
      `Retry ${ids.length} dead letter(s)`,
      `The dead letters shown (${shown}) become PENDING with fresh attempts, due now, each that is still DEAD; ` +
        'any that changed meanwhile is left as it is and reported.',
      'none',
      false,
    );
    if (confirmed === null) return;
    try {
      const result = await api('/dashboard/api/retry', { method: 'POST', body: { ids } });
      const refused = result.refused.map((/** @type {any} */ r) => `${r.id} (${r.code})`).join(', ');
      toast(`Retried ${result.retried.length} dead letter(s).${refused ? ` Not retried: ${refused}.` : ''}`);
    } catch (e) {
      toast(`Bulk retry refused — ${describe(e)}`);
    }
    void poll();
    void route();
  }

  // ── views ─────────────────────────────────────────────────────────────────────────────────────

  async function route() {
    if (!loggedIn) return;
    generation += 1;
    const hash = location.hash.replace(/^#/, '') || '/';
    const [path = '/', query = ''] = hash.split('?');
    const detail = /^\/commands\/([^/]+)$/.exec(path);
    const view = detail ? 'detail' : path.startsWith('/commands') ? 'commands' : 'overview';
    for (const name of ['overview', 'commands', 'detail']) $(`view-${name}`).hidden = name !== view;
    for (const link of document.querySelectorAll('nav a')) {
      link.classList.toggle(
        'current',
        link.getAttribute('data-view') === (view === 'detail' ? 'commands' : view),
      );
    }
    if (detail) await showDetail(decodeURIComponent(detail[1] ?? ''));
    else if (view === 'commands') await showList(new URLSearchParams(query));
  }

  window.addEventListener('hashchange', () => void route());

  async function start() {
    $('login-error').textContent = '';
    try {
      summary = await api('/dashboard/api/summary');
    } catch (e) {
      if (!(e instanceof ApiError && e.status === 401)) {
        $('login').hidden = true;
        $('updated').textContent = `could not load: ${describe(e)}`;
      }
      return;
    }
    loggedIn = true;
    $('login').hidden = true;
    $('logout').hidden = sessionStorage.getItem(TOKEN_KEY) === null;
    refreshMs = Math.max(250, Number(summary.refreshMs) || 5000);
    renderSummary(summary);
    await route();
    schedulePoll();
  }

  void start();
})();
