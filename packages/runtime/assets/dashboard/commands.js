// @ts-check
/* The asynccmd dashboard: the command list, its filters and pages (see app.js). Values from the table go on the page as text only. */
import { confirmBulkRetry } from './actions.js';
import { api, describe } from './api.js';
import { $, commandLink, el, fill, show, statusBadge, time } from './dom.js';
import { page, refresh } from './state.js';

const PAGE_SIZE = 50;

/** @type {any[]} */
let listed = [];

/** @param {URLSearchParams} params */
export async function showList(params) {
  const mine = page.generation;
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
    if (mine !== page.generation) return;
    listed = [];
    $('list-error').textContent = describe(e);
  }
  if (mine !== page.generation) return;
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
            el('td', {}, attemptsText(c.attempts, c.status)),
            // A CANCELLED command's lastError is the reason it was cancelled or killed, not an error.
            el('td', { class: c.status === 'CANCELLED' ? 'reason-text' : 'error-text' }, show(c.lastError)),
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

/**
 * The attempts of a command in words: "attempt 1 of 5" until one fails, then "failed 2 times"
 * (with the retries left while it may still run). Failures count over the command's life, so an
 * admin retry can take them past maxRetry: never "2 failed of 1".
 * @param {any} attempts @param {string} status
 */
function attemptsText(attempts, status) {
  if (!(attempts && typeof attempts === 'object' && 'failed' in attempts && 'maxRetry' in attempts)) {
    return show(attempts);
  }
  const failed = Number(attempts.failed);
  const unfinished = status === 'PENDING' || status === 'RUNNING';
  if (failed === 0) return unfinished ? `attempt 1 of ${Number(attempts.maxRetry) + 1}` : 'never failed';
  const times = `failed ${failed} time${failed === 1 ? '' : 's'}`;
  const left = Number(attempts.retriesLeft);
  return unfinished && Number.isFinite(left)
    ? `${times}, ${left} retr${left === 1 ? 'y' : 'ies'} left`
    : times;
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
  if (location.hash === target) refresh.view();
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
