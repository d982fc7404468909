// @ts-check
/* The asynccmd dashboard: a command's detail and its actions (see app.js). Values from the table go on the page as text only. */
import { confirmAction } from './actions.js';
import { api, describe } from './api.js';
import { $, capitalise, el, fill, progressView, show, statusBadge, time } from './dom.js';
import { page } from './state.js';

/** @param {string} id */
export async function showDetail(id) {
  const mine = page.generation;
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
    if (mine === page.generation) $('detail-error').textContent = describe(e);
    return;
  }
  if (mine !== page.generation) return;
  $('detail-title').replaceChildren(`Command ${view.id} `, statusBadge(view.status));
  /** @type {[string, unknown][]} */
  const fields = [
    ['type', view.type],
    ['bizKey', view.bizKey],
    ['status', `${view.status} (${view.operation})`],
    ['progress', view.progress ? progressView(view.progress) : null],
    ['workflow', contents.workflow ? workflowLink(contents.workflow) : null],
    [view.status === 'CANCELLED' ? 'reason' : 'lastError', view.lastError],
    ['nextRunAt', time(view.nextRunAt)],
    ['owner', view.owner],
    ['lease until', contents.leaseUntil ? time(contents.leaseUntil) : null],
    ['idempotent', contents.idempotent ? 'yes (holds its bizKey while unfinished)' : 'no'],
    ['created', time(view.createdAt)],
    ['updated', time(view.updatedAt)],
    ['started', time(view.startedAt)],
    ['finished', time(view.finishedAt)],
  ];
  fill(
    $('detail-fields'),
    ...fields.flatMap(([k, v]) => [el('dt', {}, k), el('dd', {}, v instanceof Node ? v : show(v))]),
  );
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
    const button = el('button', { type: 'button', class: className, 'data-action': name }, capitalise(name));
    button.addEventListener('click', () => void confirmAction(name, view));
    actions.append(button);
  }
}

/**
 * The link from a step's command to its workflow.
 * @param {{ workflowId: string, step: string }} w
 */
function workflowLink(w) {
  return el(
    'span',
    {},
    el(
      'a',
      { href: `#/workflows/${encodeURIComponent(w.workflowId)}`, 'data-workflow': w.workflowId },
      w.workflowId,
    ),
    ` (step ${w.step})`,
  );
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
