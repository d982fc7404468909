// @ts-check
/* The asynccmd dashboard: the overview: health, counts, flow limits, types, dead letters, schedules (see app.js). Values from the table go on the page as text only. */
import { confirmAction, confirmTypePause } from './actions.js';
import { $, commandLink, duration, el, fill, show, STATUSES, time } from './dom.js';
import { renderOutcomes } from './outcomes.js';

/** @param {any} s */
export function renderSummary(s) {
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
    // Worth attention, never DOWN: e.g. a long transaction keeping the database from cleaning up.
    ...(s.health.warnings ?? []).map((/** @type {any} */ w) =>
      el(
        'li',
        { class: 'warning' },
        el('span', { class: 'code' }, w.code),
        ' — ',
        w.message,
        w.detail ? el('span', { class: 'muted' }, ` (${w.detail})`) : null,
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
  renderLimits(stats);
}

/**
 * The stored flow limits: each rate limit with the tokens its bucket holds now and the commands
 * it holds back, the limits per key and the fair-share types. Hidden while there are none.
 * @param {any} stats
 */
function renderLimits(stats) {
  const list = (/** @type {string} */ key) => (stats && Array.isArray(stats[key]) ? stats[key] : []);
  const pending = (/** @type {string} */ type) => stats?.byType?.[type]?.PENDING ?? 0;
  /** The keys of a keyed type with due commands, and the busiest of them (running, due). */
  const keys = (/** @type {string} */ type) => {
    const w = list('keysWaiting').find((/** @type {any} */ k) => k.type === type);
    if (!w || w.keys === 0) return '';
    const busiest = w.top[0];
    const name = busiest.key === '' ? '(no key)' : show(busiest.key).slice(0, 40);
    return `, ${w.keys} key(s) waiting${w.atLimit > 0 ? ` (${w.atLimit} at the limit)` : ''}, busiest ${name}: ${busiest.running} running, ${busiest.due} due`;
  };
  const rows = [
    ...list('rateLimits').map((/** @type {any} */ l) => [
      l.type,
      `at most ${l.maxStarts} starts per ${duration(l.periodMs)} (burst ${l.burst})`,
      `${l.tokens} token(s) left, ${pending(l.type)} pending`,
    ]),
    ...list('keyLimits').map((/** @type {any} */ l) => [
      l.type,
      // A fair-share type is kept as a key limit never reached.
      l.maxRunning >= 100000
        ? `fair share: keys take turns by ${l.keyField}`
        : `at most ${l.maxRunning} running per ${l.keyField}`,
      `${stats.byType?.[l.type]?.RUNNING ?? 0} running, ${pending(l.type)} pending${keys(l.type)}`,
    ]),
    ...list('keyRateLimits').map((/** @type {any} */ l) => [
      l.type,
      `at most ${l.maxStarts} starts per ${duration(l.periodMs)} per ${l.keyField}`,
      `${pending(l.type)} pending${keys(l.type)}`,
    ]),
  ];
  $('limits-panel').hidden = rows.length === 0;
  fill(
    $('limits'),
    ...rows.map(([type, limit, now]) =>
      el(
        'tr',
        { 'data-type': show(type) },
        el('td', { class: 'mono' }, show(type)),
        el('td', {}, limit),
        el('td', {}, now),
      ),
    ),
  );
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
